/*  cmd_collectd - `fanhub collectd`: the program for collectd's Exec plugin.

    collectd starts it (as a non-root user: Exec refuses root) with
    COLLECTD_HOSTNAME and COLLECTD_INTERVAL in its environment and reads
    its stdout. Every interval it asks the hub for STATS over the control
    socket and prints the snapshot as PUTVAL lines, flushed as one batch.

    It is meant to run as long as collectd does, so it outlives the hub:
    while the hub is down or restarting it prints nothing (collectd then
    marks the values missing, which is the truth) and says so once on
    stderr, which collectd logs, and once more when the hub is back. It
    stops with status 0 on SIGTERM (collectd's way to stop it) or SIGINT,
    and with status 1 when stdout is closed: collectd is gone, and if it
    comes back it starts a new one.

    Pacing uses absolute monotonic deadlines, so a slow answer does not
    make the batches drift. SIGTERM and SIGINT are blocked and taken with
    sigtimedwait while waiting for the next deadline: no signal is lost
    between a check and a sleep, and the handler CZMQ installs when it
    starts never sees them.
*/
#include "cli.h"
#include "clock.h"
#include "collectd_notify.h"
#include "commands.h"
#include "control.h"
#include "stats_format.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_DEFAULT_INTERVAL 10.0 /* collectd's own default Interval */
#define S_MAX_INTERVAL 86400.0
#define S_MAX_TIMEOUT_MS 2000 /* the longest wait for one answer */

enum { S_OPT_HOST = FH_CLI_LONG_ONLY, S_OPT_DISCONNECTED };

static const fh_cli_option_t s_options[] = {
    FH_CLI_CONTROL_OPTIONS,
    {'i', "interval", "S",
     "seconds between batches, also written as\n"
     "interval= (default: $COLLECTD_INTERVAL, else 10)"},
    {S_OPT_HOST, "host", "NAME",
     "the host name of the values (default:\n"
     "$COLLECTD_HOSTNAME, else this host's name)"},
    {S_OPT_DISCONNECTED, "disconnected-after", "S",
     "seconds a bus.connect endpoint may stay without\n"
     "a connection before a warning notification\n"
     "(default: -c's metrics.collectd.disconnected_after,\n"
     "else 10)"},
    FH_CLI_CURVE_OPTIONS,
    {0, NULL, NULL, NULL},
};

typedef struct {
    double interval, after; /* seconds */
} s_opts_t;

static const fh_cli_value_t s_values[] = {
    {'i', FH_CLI_SECONDS, offsetof (s_opts_t, interval), 0.001, S_MAX_INTERVAL},
    {S_OPT_DISCONNECTED, FH_CLI_SECONDS, offsetof (s_opts_t, after), 0.001, S_MAX_INTERVAL},
    {0},
};

static const fh_cli_command_t s_command = {
    "collectd",
    "[-c FILE | -e ENDPOINT] [--interval S] [--host NAME] [--disconnected-after S]",
    "A program for collectd's Exec plugin: every interval it asks the hub for\n"
    "its figures through the control socket and prints them on stdout as\n"
    "collectd PUTVAL lines (every figure of docs/metrics.md with a collectd\n"
    "type: per consumer the backlog as queue_length, counters as derive,\n"
    "interval latencies, ...), then PUTNOTIF lines when a backlog reaches\n"
    "queue.warn_at, a consumer is stuck or a bus endpoint stays disconnected\n"
    "(and \"okay\" when it is over). It keeps running while the hub is down or\n"
    "restarting, printing nothing then and saying so once on stderr.",
    s_options,
    "With collectd (config/collectd/fanhub-exec.conf in fanhub's sources is a\n"
    "ready snippet):\n"
    "\n"
    "  LoadPlugin exec\n"
    "  <Plugin exec>\n"
    "    Exec \"fanhub:fanhub\" \"/usr/bin/fanhub\" \"collectd\" \"-c\" "
    "\"/etc/fanhub/fanhub.yaml\"\n"
    "  </Plugin>\n"
    "\n"
    "collectd refuses to run Exec programs as root: name a user (and group)\n"
    "that may use the hub's control socket (an ipc:// socket is mode 0660,\n"
    "owned by the hub's user). Set `control:` in the hub's configuration:\n"
    "its default depends on $RUNTIME_DIRECTORY and $XDG_RUNTIME_DIR, which\n"
    "are not the same for the hub's service and for collectd.\n"
    "\n"
    "Exit status: 0 on SIGTERM or SIGINT, 1 when stdout is closed (collectd\n"
    "went away), 2 bad usage or configuration.",
};

/* True when stdout is a pipe whose reader is gone. Only asked when there
   was nothing to print, which is when no write would tell. */
static bool
s_stdout_gone (void)
{
    struct pollfd item = {STDOUT_FILENO, 0, 0};
    return poll (&item, 1, 0) == 1 && (item.revents & (POLLERR | POLLHUP));
}

/* Asks for one snapshot and prints it. Returns -1 when stdout is gone. */
static int
s_batch (const char *endpoint, const char *host, double interval, int timeout_ms, bool *down,
         fh_collectd_notify_t *notify)
{
    char err[1024];
    char *answer = fh_control_call (endpoint, "STATS", timeout_ms, err, sizeof err);
    json_t *snapshot = NULL;
    if (answer && strncmp (answer, "ERROR", 5) == 0)
        snprintf (err, sizeof err, "%s: the hub answered: %.200s", endpoint, answer);
    else if (answer) {
        json_error_t error;
        snapshot = json_loads (answer, 0, &error);
        if (!json_is_object (snapshot)) {
            snprintf (err, sizeof err, "%s: the answer is not a stats snapshot: %s", endpoint,
                      snapshot ? "not a JSON object" : error.text);
            json_decref (snapshot);
            snapshot = NULL;
        }
    }
    free (answer);
    if (!snapshot) {
        if (!*down)
            fprintf (stderr,
                     "fanhub collectd: %s; printing nothing until the hub "
                     "answers\n",
                     err);
        *down = true;
        return s_stdout_gone () ? -1 : 0;
    }
    if (*down)
        fprintf (stderr, "fanhub collectd: the hub answers again on %s\n", endpoint);
    *down = false;
    fh_metrics_snapshot_t *figures = fh_metrics_from_json (snapshot);
    json_decref (snapshot);
    char *text = figures ? fh_metrics_collectd (figures, host, interval, 0) : NULL;
    int64_t now = fh_clock_mono_ns ();
    char *notes = figures ? fh_collectd_notify (notify, figures, host, (double) now / 1e9,
                                                (double) (now + fh_clock_wall_offset_ns ()) / 1e9)
                          : NULL;
    fh_metrics_snapshot_destroy (&figures);
    if (!text || !notes) {
        free (text);
        free (notes);
        fprintf (stderr, "fanhub collectd: out of memory; this batch is not printed\n");
        return 0;
    }
    errno = 0;
    int rc = fputs (text, stdout);
    if (rc != EOF)
        rc = fputs (notes, stdout);
    free (text);
    free (notes);
    if (rc == EOF || fflush (stdout) == EOF || ferror (stdout)) {
        int error = errno;
        fprintf (stderr, "fanhub collectd: cannot write to stdout: %s%s\n",
                 error ? strerror (error) : "write error",
                 error == EPIPE ? " (collectd went away)" : "");
        return -1;
    }
    return 0;
}

/* Waits until the monotonic deadline; true when a stop signal came. */
static bool
s_wait_until (const sigset_t *stop, int64_t deadline_ns)
{
    while (true) {
        /* At least one look, even when the deadline has passed: a signal
           that came during the batch is pending now. */
        int64_t left = deadline_ns - fh_clock_mono_ns ();
        if (left < 0)
            left = 0;
        struct timespec timeout = {(time_t) (left / 1000000000), (long) (left % 1000000000)};
        if (sigtimedwait (stop, NULL, &timeout) > 0)
            return true;
        /* EAGAIN: the time is up; EINTR: another signal's handler ran. */
        if (left == 0)
            return false;
    }
}

/* A batch every interval until SIGTERM or SIGINT (status 0) or until
   stdout is gone (1). */
static int
s_serve (const char *endpoint, const char *host, double interval, double after)
{
    /* Before any thread exists (CZMQ starts its own on the first socket),
       so that every thread inherits the mask and the signals stay pending
       for sigtimedwait. */
    sigset_t stop;
    sigemptyset (&stop);
    sigaddset (&stop, SIGTERM);
    sigaddset (&stop, SIGINT);
    sigprocmask (SIG_BLOCK, &stop, NULL);
    /* A write to a closed pipe is an EPIPE to report, not a silent death. */
    signal (SIGPIPE, SIG_IGN);

    int64_t interval_ns = llround (interval * 1e9);
    int timeout_ms = interval * 1000 < S_MAX_TIMEOUT_MS ? (int) ceil (interval * 1000)
                                                        : S_MAX_TIMEOUT_MS;
    if (timeout_ms < 100)
        timeout_ms = 100;
    fh_collectd_notify_t *notify = fh_collectd_notify_new (after);
    if (!notify) {
        fprintf (stderr, "fanhub collectd: out of memory\n");
        return FH_EXIT_FAILURE;
    }
    int status = FH_EXIT_OK;
    bool down = false;
    int64_t next = fh_clock_mono_ns ();
    while (true) {
        if (s_batch (endpoint, host, interval, timeout_ms, &down, notify) != 0) {
            status = FH_EXIT_FAILURE;
            break;
        }
        /* The next point of the grid that is still ahead: a batch that
           took longer than an interval skips points rather than bursts. */
        int64_t now = fh_clock_mono_ns ();
        next += interval_ns;
        if (next <= now)
            next += ((now - next) / interval_ns + 1) * interval_ns;
        if (s_wait_until (&stop, next))
            break;
    }
    fh_collectd_notify_destroy (&notify);
    return status;
}

int
fh_cmd_collectd (int argc, char **argv)
{
    const char *host = getenv ("COLLECTD_HOSTNAME");
    const char *interval_env = getenv ("COLLECTD_INTERVAL");
    bool interval_given = false, after_given = false;
    s_opts_t opts = {S_DEFAULT_INTERVAL, FH_COLLECTD_DISCONNECTED_AFTER_S};
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, &opts);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        switch (opt) {
        case 'i': interval_given = true; break; /* the values: s_values */
        case S_OPT_HOST: host = arg; break;
        case S_OPT_DISCONNECTED: after_given = true; break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next < argc) {
        return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next]);
    }
    /* collectd's interval, read as --interval is, when that is not given. */
    if (!interval_given && interval_env
        && !fh_cli_store (&cli, 'i', "COLLECTD_INTERVAL", interval_env))
        return fh_cli_status (&cli);
    double interval = opts.interval, after = opts.after;
    char hostname[256];
    host = fh_cli_host_name (host, hostname, sizeof hostname);
    fh_config_t *config;
    int keys;
    const char *endpoint = fh_cli_control_open (&cli, true, &config, &keys);
    if (!endpoint)
        return keys;

    /* -c: the hub's own metrics.collectd.disconnected_after, unless given. */
    if (!after_given && config && config->metrics.collectd_disconnected_after_ms > 0)
        after = (double) config->metrics.collectd_disconnected_after_ms / 1e3;
    int status = s_serve (endpoint, host, interval, after);
    fh_config_destroy (&config);
    return status;
}
