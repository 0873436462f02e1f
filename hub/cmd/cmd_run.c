/*  cmd_run - `fanhub run`: the hub itself.

    Signals are taken synchronously: the main thread blocks SIGINT, SIGTERM
    and SIGHUP before any thread starts (so every thread inherits the mask)
    and waits for them with sigtimedwait, waking once a second for the
    consumers' housekeeping (spool fsync, stuck checks) and, after a
    reload, to start consumer instances in turn (lineage.h). The first
    SIGINT or SIGTERM stops receiving and lets every consumer finish what
    is queued and every plugin's fini return (on threads of their own),
    for at most shutdown_timeout in all; a second one exits at once. A
    reload waits here for plugins' init (each on a thread "fh:init", at
    most shutdown_timeout: config/reload_init.h): a watcher thread takes
    the stop signals meanwhile, so that an init that hangs cannot hold
    the stop past shutdown_timeout either. The start is watched the same way:
    a stop during it (a worker's handshake, a slow init) ends it at once
    (the consumers' setting "stopping" tells an init that waits) and
    `fanhub run` exits FH_EXIT_STOPPED (3).
    systemd hears READY, RELOADING, STOPPING (notify.h).
*/
#include "cli.h"
#include "clock.h"
#include "commands.h"
#include "consumer.h"
#include "control.h"
#include "control_curve.h"
#include "control_path.h"
#include "fdlimit.h"
#include "crash.h"
#include "hub.h"
#include "log.h"
#include "notify.h"
#include "plugin.h"
#include "prometheus_http.h"
#include "reload_init.h"
#include "spool.h"
#include "thread.h"

#include <ctype.h>
#include <czmq.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_CHECK_NS (20 * INT64_C (1000000)) /* how often to look */
#define TICK_NS INT64_C (1000000000)            /* spool syncs, stuck checks */

enum { S_OPT_PLUGIN_DIR = FH_CLI_LONG_ONLY, S_OPT_FEDORA };

static const fh_cli_option_t s_options[] = {
    {'c', "config", "FILE", "the YAML configuration (see config/fanhub.yaml)"},
    {S_OPT_PLUGIN_DIR, "plugin-dir", "DIR",
     "where plugins named without a '/' are found\n"
     "(default: $FANHUB_PLUGIN_DIR, else the\n"
     "installed plugin directory)"},
    {S_OPT_FEDORA, "fedora-messaging", "FILE",
     "run the one consumer of a fedora-messaging\n"
     "config.toml, without a YAML file (not with -c)"},
    {'v', "verbose", NULL, "log debug lines too (over log_level)"},
    {'q', "quiet", NULL, "log warnings and errors only (over log_level)"},
    {0, NULL, NULL, NULL},
};

static const fh_cli_command_t s_command = {
    "run",
    "[-c FILE | --fedora-messaging FILE] [--plugin-dir DIR] [-v | -q]",
    "Runs the hub: subscribes to the bus endpoints of the configuration and\n"
    "hands each message to every consumer whose topics match, each consumer\n"
    "on its own thread. Without -c, runs the built-in default configuration\n"
    "(connect to tcp://127.0.0.1:9940, print every message to stdout).",
    s_options,
    "SIGHUP (or 'fanhub reload'): re-read the configuration file and its\n"
    "drop-ins; consumers that stay the same keep running, an invalid file is\n"
    "refused. Either way plugins reopen their files (the log plugin's path).\n"
    "SIGINT or SIGTERM: stop receiving, let each consumer finish its queue\n"
    "and call every plugin's fini (all within shutdown_timeout), exit 0. A\n"
    "second signal, or an expired shutdown_timeout, exits at once with\n"
    "status 1 and logs what was abandoned: messages left unconsumed, a\n"
    "consume or a fini that had not returned.\n"
    "\n"
    "Exit status: 0 clean stop, 1 runtime failure, 2 bad configuration, 3\n"
    "stopped by SIGINT or SIGTERM during the start (before the hub ran).",
};

static void
s_log_endpoints (const fh_config_t *config)
{
    for (size_t i = 0; i < config->connect.count; i++)
        fh_info ("bus: connecting to %s", config->connect.items[i]);
    for (size_t i = 0; i < config->bind.count; i++)
        fh_info ("bus: bound to %s", config->bind.items[i]);
}

/* The drop-ins read, and what the configuration has that is legal but
   likely wrong. */
static void
s_log_warnings (const fh_config_t *config)
{
    for (size_t i = 0; i < config->dropins.count; i++)
        fh_info ("%s: drop-in %s", config->source, config->dropins.items[i]);
    for (size_t i = 0; i < config->warnings.count; i++)
        fh_warning ("%s", config->warnings.items[i]);
}

/* --fedora-messaging FILE: the configuration it stands for, or NULL. */
static char *s_fedora_yaml;

/* A consumer named after the file (badges.toml: badges), its
   characters those a name may have. */
static char *
s_fedora_config (const char *file)
{
    const char *base = strrchr (file, '/') ? strrchr (file, '/') + 1 : file;
    char name[65];
    size_t len = 0;
    for (const char *c = base; *c && len < sizeof name - 1; c++)
        name[len++] = (isalnum ((unsigned char) *c) || strchr ("_.-", *c)) ? *c : '_';
    name[len] = '\0';
    char *dot = strstr (name, ".toml");
    if (dot && dot != name)
        *dot = '\0';
    /* The path as a YAML double-quoted scalar: backslashes and quotes escaped. */
    size_t size = strlen (file) * 2 + 2 * sizeof name + 128;
    char *yaml = malloc (size), *at;
    if (!yaml)
        return NULL;
    /* The hub takes the consumer's name too: its control socket is
       fanhub-NAME.sock, one per file as fm-consumer@NAME is one unit. */
    const char *called = len ? name : "fedora-messaging";
    at = yaml
         + snprintf (yaml, size,
                     "name: \"%s\"\nbus: {}\nconsumers:\n  - name: \"%s\"\n"
                     "    fedora_messaging: \"",
                     called, called);
    for (const char *c = file; *c; c++) {
        if (*c == '"' || *c == '\\')
            *at++ = '\\';
        *at++ = *c;
    }
    strcpy (at, "\"\n");
    return yaml;
}

/* The configuration: -c FILE, --fedora-messaging FILE, or the default. */
static fh_config_t *
s_load (const char *path, char *err, size_t errlen)
{
    if (s_fedora_yaml)
        return fh_config_load_string (s_fedora_yaml, strlen (s_fedora_yaml), "--fedora-messaging",
                                      err, errlen);
    return fh_cli_load_config (path, err, errlen);
}

/* SIGHUP (or `fanhub reload`): the same file again; an invalid one is
   refused and the running configuration stays. */
static void
s_reload (fh_hub_t *hub, const char *path, bool level_given)
{
    char err[2048], down[1024], result[2200];
    int down_count = -1;
    fh_notify ("RELOADING=1\nMONOTONIC_USEC=%llu",
               (unsigned long long) (fh_clock_mono_ns () / 1000));
    fh_hub_note_reload_start (hub); /* before the file is read */
    fh_info ("reloading %s", path ? path : "the built-in default configuration");
    fh_config_t *config = s_load (path, err, sizeof err);
    if (config)
        s_log_warnings (config);
    if (config)
        down_count = fh_hub_reload (hub, config, err, sizeof err, down, sizeof down);
    if (down_count >= 0) {
        const fh_config_t *now = fh_hub_config (hub);
        /* The live keys outside consumers (shutdown_timeout is read when
           the hub stops). */
        if (!level_given)
            fh_log_set_level ((fanhub_log_level_t) now->log_level);
        /* Applied; a consumer it added or changed that did not come up
           makes it "DOWN", said to the caller and logged as an error. */
        snprintf (result, sizeof result, "%s reloaded %s: %zu consumer%s%s%s",
                  down_count ? "DOWN" : "OK", now->source, now->consumer_count,
                  now->consumer_count == 1 ? "" : "s", down_count ? "; not up: " : "",
                  down_count ? down : "");
        if (down_count)
            fh_error ("%s", result + 5);
        else
            fh_info ("%s", result + 3);
    }
    else {
        /* -2: a plugin's init was abandoned (reload_init.h). */
        snprintf (result, sizeof result,
                  "ERROR reload refused: %s%s (running on the previous configuration)",
                  down_count == -2 ? FH_INIT_ABANDONED_WORD : "", err);
        fh_error ("%s", result + 6);
    }
    /* Refused or not, plugins reopen their files: logrotate's postrotate
       sends SIGHUP whatever the configuration's state. Before the answer,
       so that what is consumed after it goes to the new file. */
    fh_consumer_reopen_all ();
    fh_hub_note_reload (hub, result);
    fh_notify ("READY=1\nSTATUS=%s", result); /* refused or not, it runs */
}

/* SIGUSR1, sent by the control actor for `fanhub restart NAME`: the
   consumer gets a new instance, as from a reload that changed it. One
   from elsewhere finds nothing asked and does nothing. */
static void
s_restart (fh_hub_t *hub)
{
    char name[256], err[2048], down[1024], result[2600];
    if (!fh_hub_restart_take (hub, name, sizeof name))
        return;
    fh_info ("consumer '%s': restarting (fanhub restart)", name);
    int down_count = fh_hub_restart (hub, name, err, sizeof err, down, sizeof down);
    if (down_count < 0)
        snprintf (result, sizeof result, "ERROR restart of '%s' refused: %s%s", name,
                  down_count == -2 ? FH_INIT_ABANDONED_WORD : "", err);
    else if (down_count > 0)
        snprintf (result, sizeof result, "DOWN restarted consumer '%s'; not up: %s", name, down);
    else
        snprintf (result, sizeof result,
                  "OK restarted consumer '%s': its new instance takes over once the old one "
                  "has consumed what it holds",
                  name);
    if (down_count != 0)
        fh_error ("%s", strchr (result, ' ') + 1);
    else
        fh_info ("%s", result + 3);
    fh_hub_note_restart (hub, result);
}

/* The start and a reload run plugins' init on this thread, and an init
   may take long or never return. Meanwhile a watcher thread takes SIGINT
   and SIGTERM: it tells the consumers (their setting "stopping", which an
   init waiting for its workers reads), the start gives up before the next
   consumer, and the stop begins when the start or the reload returns,
   its deadline running from the signal; past it (or at a second signal)
   the process exits 1, naming the init it waited for. */
typedef struct {
    fh_hub_t *hub;             /* a reload's; NULL at the start */
    const fh_config_t *config; /* the start's */
    const char *what;          /* "the start", "the reload" */
    sigset_t stops;
    int sig;          /* the stop that came meanwhile, or 0 */
    int64_t deadline; /* ... and when shutdown_timeout runs out */
} s_watch_t;

static void
s_give_up (s_watch_t *watch, const char *why)
{
    char loading[512] = "";
    if (watch->hub)
        fh_hub_loading (watch->hub, loading, sizeof loading);
    fh_error ("%s under way still waits for %s (its init has not returned): exiting "
              "without draining (%s)",
              watch->what, loading[0] ? loading : "a plugin", why);
    fflush (stderr);
    _exit (FH_EXIT_FAILURE);
}

static void *
s_watch (void *arg)
{
    s_watch_t *watch = arg;
    while (true) {
        int64_t now = fh_clock_mono_ns ();
        if (watch->sig && now >= watch->deadline)
            s_give_up (watch, "shutdown_timeout expired");
        int64_t wait_ns = watch->sig ? watch->deadline - now : 3600 * INT64_C (1000000000);
        struct timespec wait = {(time_t) (wait_ns / 1000000000), (long) (wait_ns % 1000000000)};
        siginfo_t info;
        int sig = sigtimedwait (&watch->stops, &info, &wait);
        if (sig != SIGINT && sig != SIGTERM)
            continue;
        /* The hub never sends itself SIGINT or SIGTERM but here. */
        if (info.si_pid == getpid () && (info.si_code == SI_TKILL || info.si_code == SI_USER))
            break; /* s_watched: the start or the reload returned */
        if (watch->sig)
            s_give_up (watch, "a second signal");
        fh_consumer_note_stopping ();
        int64_t timeout_ms = watch->config ? watch->config->shutdown_timeout_ms : 0;
        if (watch->hub) {
            fh_hub_lock (watch->hub);
            timeout_ms = fh_hub_config (watch->hub)->shutdown_timeout_ms;
            fh_hub_unlock (watch->hub);
        }
        watch->sig = sig;
        watch->deadline = fh_clock_mono_ns () + timeout_ms * 1000000;
        fh_info ("%s: stopping once %s under way returns (shutdown_timeout %.3g s)",
                 strsignal (sig), watch->what, (double) timeout_ms / 1000);
    }
    return NULL;
}

/* Starts the watcher; false when it could not (then signals wait). */
static bool
s_watch_begin (s_watch_t *watch, fh_thread_t *watcher, fh_hub_t *hub, const fh_config_t *config,
               const char *what)
{
    *watch = (s_watch_t){.hub = hub, .config = config, .what = what};
    sigemptyset (&watch->stops);
    sigaddset (&watch->stops, SIGINT);
    sigaddset (&watch->stops, SIGTERM);
    char why[256];
    return fh_thread_start (watcher, "fh:stop-watch", s_watch, watch, why, sizeof why) == 0;
}

/* Ends the watcher: the stop signal that came meanwhile (its deadline in
   *deadline), or 0. */
static int
s_watch_end (s_watch_t *watch, fh_thread_t *watcher, bool watched, int64_t *deadline)
{
    if (watched) {
        /* Its own signal, told from a real one by its sender. */
        pthread_kill (watcher->id, SIGINT);
        fh_thread_join (watcher);
    }
    *deadline = watch->deadline;
    return watch->sig;
}

/* s_reload, watched. Returns the stop signal that came meanwhile (its
   deadline in *deadline), or 0. */
static int
s_reload_watched (fh_hub_t *hub, const char *path, bool level_given, bool restart,
                  int64_t *deadline)
{
    s_watch_t watch;
    fh_thread_t watcher = {0};
    bool watched
        = s_watch_begin (&watch, &watcher, hub, NULL, restart ? "the restart" : "the reload");
    if (restart)
        s_restart (hub);
    else
        s_reload (hub, path, level_given);
    return s_watch_end (&watch, &watcher, watched, deadline);
}

/* Once a second, on this thread rather than the control actor's: a spool
   fsync on a slow disk may take long, and STATS must not wait for it.
   Returns when the next tick is due. */
static int64_t
s_tick (fh_hub_t *hub, int64_t next_tick)
{
    int64_t now = fh_clock_mono_ns ();
    if (now < next_tick)
        return next_tick;
    fh_hub_tick (hub, now);
    fh_reload_init_reap (); /* inits a reload gave up on that returned since */
    return now + TICK_NS;
}

/* After a second signal or an expired timeout: consumer threads may be
   inside a plugin, so neither fini nor exit()'s handlers can run safely. */
static void
s_abandon (fh_hub_t *hub, const char *why, int status)
{
    fh_hub_log_counts (hub);
    fh_hub_abandon (hub, why);
    char what[512];
    if (fh_reload_init_outstanding (what, sizeof what))
        fh_error ("the stop still waits for %s (its init has not returned), abandoned by a "
                  "reload: %s",
                  what, why);
    fh_error ("exiting without draining (%s)", why);
    fflush (stderr);
    _exit (status);
}

/* While stopping: waits a little for the consumers, giving up at the
   deadline or at a second signal. Returns when the next tick is due. */
static int64_t
s_wait_stopping (fh_hub_t *hub, const sigset_t *signals, int64_t deadline, int64_t next_tick)
{
    int64_t left = deadline - fh_clock_mono_ns ();
    if (left <= 0)
        s_abandon (hub, "shutdown_timeout expired", FH_EXIT_FAILURE);
    if (left > DRAIN_CHECK_NS)
        left = DRAIN_CHECK_NS;
    struct timespec wait = {0, (long) left};
    int sig = sigtimedwait (signals, NULL, &wait);
    if (sig == SIGINT || sig == SIGTERM)
        s_abandon (hub, "a second signal", FH_EXIT_FAILURE);
    return s_tick (hub, next_tick);
}

/* Before any thread exists (CZMQ's included), so all inherit the mask:
   the main thread takes these signals with sigtimedwait. */
static void
s_block_signals (sigset_t *signals)
{
    sigemptyset (signals);
    sigaddset (signals, SIGINT);
    sigaddset (signals, SIGTERM);
    sigaddset (signals, SIGHUP);
    sigaddset (signals, SIGUSR1); /* `fanhub restart` (s_restart) */
    pthread_sigmask (SIG_BLOCK, signals, NULL);
    signal (SIGPIPE, SIG_IGN); /* a closed stdout is an error, not death */
    zsys_handler_set (NULL);   /* CZMQ must not install its own handlers */
    fh_crash_install ();       /* a plugin's crash or exit() is named */
}

/* The running hub: what s_start made and s_stop ends. */
typedef struct {
    fh_config_t *config;
    fh_hub_t *hub;
    fh_prometheus_http_t *http;
    fh_control_t *control;
    int stop_sig;          /* a stop that came during the start, or 0 */
    int64_t stop_deadline; /* ... and its deadline */
} s_run_t;

/* Makes and starts the hub, /metrics and the control socket; undoes what
   it made and returns the exit status when one fails, else 0. */
static int
s_start (s_run_t *run, const char *plugin_dir)
{
    char err[2048] = "";
    const fh_config_t *config = run->config;
    fh_fdlimit_raise (); /* before any socket: bus peers get what is left (fdlimit.h) */
    /* Plugins' init run in fh_hub_new, watched (s_watch). */
    s_watch_t watch;
    fh_thread_t watcher = {0};
    bool watched = s_watch_begin (&watch, &watcher, NULL, config, "the start");
    run->hub = fh_hub_new (run->config, fh_plugin_dir (plugin_dir), err, sizeof err);
    int status = run->hub ? 0 : FH_EXIT_USAGE;
    /* Listen before the hub starts: a port that is taken fails the start
       before any thread runs or the bus is touched. Until the control
       socket is up, /metrics answers 503. */
    if (status == 0) {
        fh_control_client_use_own_keys (config); /* before the /metrics thread calls */
        run->http = fh_prometheus_http_new (config, err, sizeof err);
        status = !run->http && err[0] ? FH_EXIT_FAILURE : 0;
    }
    if (status == 0 && fh_hub_start (run->hub, err, sizeof err) != 0)
        status = FH_EXIT_FAILURE;
    run->stop_sig = s_watch_end (&watch, &watcher, watched, &run->stop_deadline);
    if (status != 0 && run->stop_sig) {
        fh_error ("%s", err);
        fh_error ("%s: the start was stopped: exiting without running", strsignal (run->stop_sig));
        status = FH_EXIT_STOPPED;
    }
    if (status == 0 && !(run->control = fh_control_new (run->hub, err, sizeof err))) {
        fh_hub_stop_receiving (run->hub);
        status = FH_EXIT_FAILURE;
    }
    if (status != 0) {
        if (status != FH_EXIT_STOPPED)
            fh_error ("%s", err);
        fh_prometheus_http_destroy (&run->http);
        fh_hub_destroy (&run->hub);
        return status;
    }
    /* As bound: a tcp port '*' is the one chosen, for whoever reads the
       log to connect (tests never pick a port and hope). */
    fh_prometheus_http_set_control (run->http, fh_control_path_bound ());
    fh_info ("control: serving %s%s", fh_control_path_bound (),
             config->control_curve.secret_key_file ? " with CURVE (control_curve)"
             : config->control_insecure && strncmp (config->control, "tcp://", 6) == 0
                 ? " in clear (control_insecure)"
                 : "");
    if (run->http)
        fh_info ("prometheus: serving http://%s/metrics", fh_prometheus_http_address (run->http));
    s_log_endpoints (config);
    fh_info ("running %s with %zu consumer%s (pid %d)", config->source, config->consumer_count,
             config->consumer_count == 1 ? "" : "s", (int) getpid ());
    /* The bus socket and the control socket are up. */
    fh_notify ("READY=1\nMAINPID=%d\nSTATUS=running %zu consumer%s", (int) getpid (),
               config->consumer_count, config->consumer_count == 1 ? "" : "s");
    return 0;
}

/* Stops on signal sig: consumers finish their queues until the deadline
   (0: shutdown_timeout from now), every fini on a thread of its own
   within the same deadline; then everything goes. The exit status. */
static int
s_stop (s_run_t *run, int sig, sigset_t *signals, int64_t deadline, int64_t next_tick)
{
    fh_hub_t *hub = run->hub;
    int64_t timeout_ms = fh_hub_config (hub)->shutdown_timeout_ms; /* live in a reload */
    fh_info ("%s: stopping; consumers finish their queues (shutdown_timeout %.3g s)",
             strsignal (sig), (double) timeout_ms / 1000);
    if (!deadline)
        deadline = fh_clock_mono_ns () + timeout_ms * 1000000;
    fh_notify ("STOPPING=1\nSTATUS=stopping: consumers finish their queues");
    fh_hub_stop_receiving (hub);
    /* Each step starts the instances whose predecessors are gone. */
    while (fh_hub_step (hub) > 0 || !fh_hub_drained (hub))
        next_tick = s_wait_stopping (hub, signals, deadline, next_tick);
    fh_hub_log_counts (hub);
    fh_prometheus_http_destroy (&run->http);
    fh_control_destroy (&run->control);
    /* A plugin whose fini hangs is named and left behind; so is an init
       a reload gave up on, waited for as a fini is (exit()'s handlers
       must not run while a thread is inside a plugin). */
    fh_hub_finish (hub);
    for (fh_hub_step (hub); fh_hub_instances (hub) > 0 || fh_reload_init_reap () > 0;
         fh_hub_step (hub))
        next_tick = s_wait_stopping (hub, signals, deadline, next_tick);
    fh_hub_destroy (&run->hub);
    uint64_t again = fh_spool_unsaved_total ();
    if (again) {
        fh_error ("stopped, but a spool cursor could not be written: %llu done messages "
                  "will be delivered again by the next run",
                  (unsigned long long) again);
        return FH_EXIT_FAILURE;
    }
    fh_info ("stopped");
    return FH_EXIT_OK;
}

/* What `fanhub run` was given. */
typedef struct {
    const char *path, *plugin_dir, *fedora;
    bool level_given; /* -v or -q: the file's log_level does not apply */
} s_args_t;

/* Parses the command line into args; -1 to go on, else the exit status
   (--help, --version, a usage error). */
static int
s_parse_args (int argc, char **argv, s_args_t *args)
{
    fh_cli_t cli;
    fh_cli_begin (&cli, &s_command, argc, argv);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        if (opt == 'c')
            args->path = arg;
        else if (opt == S_OPT_PLUGIN_DIR)
            args->plugin_dir = arg;
        else if (opt == S_OPT_FEDORA)
            args->fedora = arg;
        else if (opt == 'v' || opt == 'q') {
            fh_log_set_level (opt == 'v' ? FANHUB_LOG_DEBUG : FANHUB_LOG_WARNING);
            args->level_given = true;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next < argc)
        return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next]);
    if (args->path && args->fedora)
        return fh_cli_usage_error (&s_command, "-c and --fedora-messaging do not go together");
    return -1;
}

int
fh_cmd_run (int argc, char **argv)
{
    s_args_t args = {0};
    int parsed = s_parse_args (argc, argv, &args);
    if (parsed >= 0)
        return parsed;
    const char *path = args.path, *plugin_dir = args.plugin_dir;
    bool level_given = args.level_given;

    sigset_t signals;
    s_block_signals (&signals);
    char err[2048];
    fh_config_set_plugin_dir (fh_plugin_dir (plugin_dir));
    if (args.fedora && !(s_fedora_yaml = s_fedora_config (args.fedora))) {
        fh_error ("out of memory");
        return FH_EXIT_FAILURE;
    }
    s_run_t run = {.config = s_load (path, err, sizeof err)};
    if (!run.config) {
        free (s_fedora_yaml);
        fh_error ("%s", err);
        return FH_EXIT_USAGE;
    }
    if (!level_given)
        fh_log_set_level ((fanhub_log_level_t) run.config->log_level);
    s_log_warnings (run.config);
    int status = s_start (&run, plugin_dir);
    if (status != 0) {
        fh_config_destroy (&run.config);
        free (s_fedora_yaml);
        return status;
    }
    int sig = run.stop_sig; /* every consumer started, but a stop came meanwhile */
    int64_t next_tick = fh_clock_mono_ns () + TICK_NS, deadline = run.stop_deadline;
    while (!sig) {
        /* While consumers are leaving after a reload, look at them every
           100 ms; otherwise wait for a signal, or the next tick. */
        int64_t wait_ns = fh_hub_step (run.hub) ? 100000000 : next_tick - fh_clock_mono_ns ();
        struct timespec wait = {(time_t) (wait_ns > 0 ? wait_ns / 1000000000 : 0),
                                (long) (wait_ns > 0 ? wait_ns % 1000000000 : 0)};
        int got = sigtimedwait (&signals, NULL, &wait);
        if (got == SIGINT || got == SIGTERM)
            sig = got;
        else if (got == SIGHUP || got == SIGUSR1)
            sig = s_reload_watched (run.hub, path, level_given, got == SIGUSR1, &deadline);
        if (sig)
            break; /* from a reload: a stop came meanwhile, its deadline runs already */
        next_tick = s_tick (run.hub, next_tick);
    }
    status = s_stop (&run, sig, &signals, deadline, next_tick);
    fh_config_destroy (&run.config);
    free (s_fedora_yaml);
    return status;
}
