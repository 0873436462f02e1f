/*  exec - the shipped consumer that runs a command for every message.

    The command gets the body on its standard input and the message in its
    environment:

        FANHUB_TOPIC     the topic (cut at its first NUL byte, if it has one)
        FANHUB_SEQ       the hub's sequence number, in decimal
        FANHUB_CONSUMER  the consumer's name

    on top of the hub's own environment. Its exit status is the answer:

        0                       FANHUB_OK
        75 (EX_TEMPFAIL)        FANHUB_RETRY
        anything else           FANHUB_FAIL
        killed by a signal      FANHUB_FAIL
        still running at timeout_ms
                                FANHUB_FAIL "timed out": its process group
                                gets SIGTERM, and SIGKILL kill_grace_ms later
        cannot be started       FANHUB_FAIL (no such program, exec format),
                                FANHUB_RETRY (out of processes, fds, memory)

    Options:
        command        required. A list [PROGRAM, ARG...], run directly, no
                       shell; PROGRAM without a '/' is looked up in PATH at
                       init. With shell: true, one string run as
                       ["/bin/sh", "-c", STRING].
        shell          true | false, default false
        timeout_ms     1..86400000, default 10000
        kill_grace_ms  0..3600000, default 1000; 0 sends SIGKILL at once
        stdout         null (default): /dev/null; stderr: the hub's stderr;
                       inherit: the hub's own stdout

    Failures are logged with the reason: the exit status or signal and the
    first line of the command's stderr (the rest of stderr is read and
    discarded). The first failure of a streak is logged, then at most one
    line a second while the streak lasts, each saying how many failures
    went unlogged; a burst of short streaks is held to the same rate once
    ten lines have been written in quick succession. When the command
    succeeds again after failures, that is logged once.

    The child. It is started with posix_spawn (glibc's is a vfork, cheap
    beside fork for a big hub) in a process group of its own, so that a
    timeout kills whatever it started too. It sees only file descriptors 0,
    1 and 2: the hub holds many descriptors without close-on-exec (ZeroMQ
    sockets, eventfds) and a leaked pipe end would also keep another
    command's stdin from ever reaching end of file. Its signal mask is
    empty and every signal has its default action: the hub blocks SIGTERM
    and friends in its threads and ignores SIGPIPE, and both would be
    inherited across exec.

    The conversation. consume writes the body into a non-blocking pipe and
    reads stderr from another, both in one poll() loop with the deadline, so
    a large body that the command never reads cannot deadlock it. A command
    that exits or closes stdin early ends the writing (EPIPE is expected
    then, not an error). SIGPIPE is blocked on the calling thread while it
    writes and a SIGPIPE that the write raised is taken back with
    sigtimedwait, so the plugin is safe whether or not the host ignores
    SIGPIPE. The child's end is noticed through a pidfd when the kernel has
    them (else by polling in 10 ms steps); it is reaped by consume before it
    returns, timed out or not, so no zombie outlives a call. The group is
    signalled before the child is reaped, while its id cannot be reused.

    Thread-safe: everything of a run lives on consume's stack; the state is
    read-only after init but for the failure log, which has a mutex.
*/
#include "exec_internal.h"

#include <fanhub/sdk.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* -------------------------------------------------------------------------
   Options */

/* Finds PROGRAM in PATH as execvp would; a malloc'd path or NULL. */
static char *
s_search_path (const char *program)
{
    const char *search = getenv ("PATH");
    if (!search || !*search)
        search = "/usr/local/bin:/usr/bin:/bin";
    size_t plen = strlen (program);
    while (true) {
        const char *colon = strchr (search, ':');
        size_t dlen = colon ? (size_t) (colon - search) : strlen (search);
        /* An empty entry is the current directory. */
        const char *dir = dlen ? search : ".";
        size_t dirlen = dlen ? dlen : 1;
        char *candidate = malloc (dirlen + plen + 2);
        if (!candidate)
            return NULL;
        memcpy (candidate, dir, dirlen);
        candidate[dirlen] = '/';
        memcpy (candidate + dirlen + 1, program, plen + 1);
        struct stat st;
        if (stat (candidate, &st) == 0 && S_ISREG (st.st_mode) && access (candidate, X_OK) == 0)
            return candidate;
        free (candidate);
        if (!colon)
            return NULL;
        search = colon + 1;
    }
}

/* shell: true: command is one string for /bin/sh -c. */
static int
s_read_shell_command (exec_state_t *self, const fanhub_option_t *node, char *err, size_t errlen)
{
    const fanhub_host_t *host = self->host;
    const char *text = host->option_scalar (node);
    if (!text) {
        snprintf (err, errlen,
                  "options.command: with shell: true, expected one string for /bin/sh -c, got "
                  "a list (%s)",
                  host->option_where (node));
        return -1;
    }
    if (!*text) {
        snprintf (err, errlen, "options.command: must not be empty (%s)",
                  host->option_where (node));
        return -1;
    }
    self->argv = calloc (4, sizeof *self->argv);
    if (!self->argv)
        return -2;
    self->argv[0] = strdup ("/bin/sh");
    self->argv[1] = strdup ("-c");
    self->argv[2] = strdup (text);
    self->path = strdup ("/bin/sh");
    return self->argv[0] && self->argv[1] && self->argv[2] && self->path ? 0 : -2;
}

/* Checks that node (the table made it a string or a list of strings) is
   a list with a program first. */
static int
s_check_argv (const fanhub_host_t *host, const fanhub_option_t *node, char *err, size_t errlen)
{
    if (host->option_kind (node) == FANHUB_OPTION_SCALAR) {
        snprintf (err, errlen,
                  "options.command: expected a list [PROGRAM, ARG...], got a string; to run it "
                  "with /bin/sh -c, set shell: true (%s)",
                  host->option_where (node));
        return -1;
    }
    if (!*fanhub_option_item (host, node, 0)) {
        snprintf (err, errlen, "options.command[0]: the program must not be empty (%s)",
                  host->option_where (host->option_at (node, 0, NULL)));
        return -1;
    }
    return 0;
}

/* self->path: the program as given when it has a '/', else found in PATH
   as execvp would find it. */
static int
s_resolve_program (exec_state_t *self, const char *where, char *err, size_t errlen)
{
    const char *program = self->argv[0];
    if (!strchr (program, '/')) {
        self->path = s_search_path (program);
        if (!self->path) {
            snprintf (err, errlen, "options.command[0]: %s: not found in PATH (%s)", program,
                      where);
            return -1;
        }
        return 0;
    }
    struct stat st;
    int e = 0;
    if (stat (program, &st) != 0)
        e = errno;
    else if (!S_ISREG (st.st_mode))
        e = EACCES;
    else if (access (program, X_OK) != 0)
        e = errno;
    if (e) {
        snprintf (err, errlen, "options.command[0]: %s: cannot run: %s (%s)", program, strerror (e),
                  where);
        return -1;
    }
    self->path = strdup (program);
    return self->path ? 0 : -2;
}

/* Checks command (given shell) and fills self->path and self->argv. */
static int
s_read_command (exec_state_t *self, const fanhub_option_t *node, bool shell, char *err,
                size_t errlen)
{
    const fanhub_host_t *host = self->host;
    int rc;
    if (shell)
        rc = s_read_shell_command (self, node, err, errlen);
    else {
        size_t argc = fanhub_option_items (host, node);
        if (s_check_argv (host, node, err, errlen) != 0)
            return -1;
        self->argv = calloc (argc + 1, sizeof *self->argv);
        rc = self->argv ? 0 : -2;
        for (size_t i = 0; rc == 0 && i < argc; i++) {
            self->argv[i] = strdup (fanhub_option_item (host, node, i));
            if (!self->argv[i])
                rc = -2;
        }
        if (rc == 0)
            rc = s_resolve_program (self, host->option_where (host->option_at (node, 0, NULL)), err,
                                    errlen);
    }
    if (rc == -2)
        snprintf (err, errlen, "exec: out of memory");
    return rc ? -1 : 0;
}

/* The options as the host reads them from the table. */
typedef struct {
    const fanhub_option_t *command;
    bool shell;
    int64_t timeout_ms;
    int64_t grace_ms;
    int out; /* exec_stdout_t */
} exec_options_t;

static const char *const s_stdout_values[] = {"null", "stderr", "inherit", NULL};

#define EXEC_OPT(name, type, field, def, lo, hi, values, flags, help)                              \
    {                                                                                              \
        name, type, offsetof (exec_options_t, field), def, lo, hi, values, flags, help             \
    }
static const fanhub_opt_t s_options[] = {
    EXEC_OPT ("command", FANHUB_OPT_STRING_OR_LIST, command, NULL, 0, 0, NULL, FANHUB_OPT_REQUIRED,
              "the command to run, as a list [PROGRAM, ARG...]"),
    EXEC_OPT ("shell", FANHUB_OPT_BOOL, shell, "false", 0, 0, NULL, 0,
              "command is one string for /bin/sh -c"),
    EXEC_OPT ("timeout_ms", FANHUB_OPT_DURATION, timeout_ms, "10000", 1, EXEC_TIMEOUT_MS_MAX, NULL,
              0, "how long one run may take before it is killed (RETRY)"),
    EXEC_OPT ("kill_grace_ms", FANHUB_OPT_DURATION, grace_ms, "1000", 0, EXEC_GRACE_MS_MAX, NULL, 0,
              "between SIGTERM and SIGKILL on a timeout"),
    EXEC_OPT ("stdout", FANHUB_OPT_ENUM, out, "null", 0, 0, s_stdout_values, 0,
              "where the command's stdout goes"),
    FANHUB_OPT_END,
};

static int
s_read_options (exec_state_t *self, const fanhub_option_t *options, char *err, size_t errlen)
{
    exec_options_t o = {0};
    if (self->host->options_load (self->ctx, options, &o, sizeof o, err, errlen) != 0)
        return -1;
    self->timeout_ns = o.timeout_ms * 1000000;
    self->grace_ns = o.grace_ms * 1000000;
    self->out = (exec_stdout_t) o.out;
    return s_read_command (self, o.command, o.shell, err, errlen);
}

static bool
s_is_ours (const char *entry)
{
    return strncmp (entry, "FANHUB_TOPIC=", 13) == 0 || strncmp (entry, "FANHUB_SEQ=", 11) == 0
           || strncmp (entry, "FANHUB_CONSUMER=", 16) == 0;
}

/* The environment every command starts from: the hub's at init, less the
   variables the plugin sets per message. */
static int
s_snapshot_env (exec_state_t *self)
{
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    self->env = calloc (n + 1, sizeof *self->env);
    if (!self->env)
        return -1;
    for (char **e = environ; e && *e; e++) {
        if (s_is_ours (*e))
            continue;
        self->env[self->nenv] = strdup (*e);
        if (!self->env[self->nenv])
            return -1;
        self->nenv++;
    }
    const char *name = self->host->consumer_name (self->ctx);
    if (!name)
        name = "";
    size_t size = strlen ("FANHUB_CONSUMER=") + strlen (name) + 1;
    self->consumer_env = malloc (size);
    if (!self->consumer_env)
        return -1;
    snprintf (self->consumer_env, size, "FANHUB_CONSUMER=%s", name);
    return 0;
}

static void
s_destroy (exec_state_t *self)
{
    if (self->argv)
        for (char **a = self->argv; *a; a++)
            free (*a);
    free (self->argv);
    if (self->env)
        for (size_t i = 0; i < self->nenv; i++)
            free (self->env[i]);
    free (self->env);
    free (self->consumer_env);
    free (self->path);
    free (self);
}

/* A state with the options read: what init keeps and check throws away.
   NULL with err. */
static exec_state_t *
s_new (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
       size_t errlen)
{
    if (host->abi_major != FANHUB_ABI_MAJOR) {
        snprintf (err, errlen, "exec: host ABI %u, plugin built for %u", (unsigned) host->abi_major,
                  (unsigned) FANHUB_ABI_MAJOR);
        return NULL;
    }
    exec_state_t *self = (exec_state_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "exec: out of memory");
        return NULL;
    }
    self->host = host;
    self->ctx = ctx;
    self->credit = EXEC_LOG_BURST_NS;
    if (s_read_options (self, options, err, errlen)) {
        s_destroy (self);
        return NULL;
    }
    return self;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    exec_state_t *self = s_new (host, ctx, options, err, errlen);
    if (!self)
        return -1;
    if (s_snapshot_env (self) || pthread_mutex_init (&self->lock, NULL)) {
        snprintf (err, errlen, "exec: out of memory");
        s_destroy (self);
        return -1;
    }
    *state = self;
    return 0;
}

/* init acquires nothing (no process runs before the first message), so
   check is init's option reading, on a state thrown away at once. */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    exec_state_t *self = s_new (host, ctx, options, err, errlen);
    if (!self)
        return -1;
    s_destroy (self);
    return 0;
}

static void
s_fini (void *state)
{
    exec_state_t *self = (exec_state_t *) state;
    pthread_mutex_destroy (&self->lock);
    s_destroy (self);
}

/* -------------------------------------------------------------------------
   The failure log */

/* Takes one line's worth of credit when there is one. Credit grows by one
   line a second up to a burst of ten. */
static bool
s_take_credit (exec_state_t *self, int64_t now)
{
    int64_t credit = self->credit + (now - self->last_line);
    if (credit > EXEC_LOG_BURST_NS)
        credit = EXEC_LOG_BURST_NS;
    if (credit < EXEC_SECOND_NS)
        return false;
    self->credit = credit - EXEC_SECOND_NS;
    self->last_line = now;
    return true;
}

/* The topic for a log line: at most 200 bytes, cut at a character. */
static int
s_topic_len (fanhub_bytes_t topic)
{
    size_t n = topic.size;
    if (n > 200) {
        n = 200;
        while (n > 0 && (((const uint8_t *) topic.data)[n] & 0xC0) == 0x80)
            n--;
    }
    return (int) n;
}

static void
s_account (exec_state_t *self, const fanhub_msg_t *msg, const exec_outcome_t *out)
{
    pthread_mutex_lock (&self->lock);
    int64_t now = fanhub_now_ns ();
    if (out->result == FANHUB_OK) {
        if (self->failing && s_take_credit (self, now))
            self->host->log (self->ctx, FANHUB_LOG_INFO,
                             "command succeeds again after %llu failed "
                             "run%s",
                             (unsigned long long) self->streak, self->streak == 1 ? "" : "s");
        self->failing = false;
        self->streak = 0;
    }
    else {
        bool starts = !self->failing;
        bool due = starts || now - self->last_line >= EXEC_SECOND_NS;
        if (due && s_take_credit (self, now)) {
            fanhub_bytes_t topic = self->host->msg_topic (msg);
            char more[64] = "";
            if (self->unlogged)
                snprintf (more, sizeof more, " (%llu failures not logged)",
                          (unsigned long long) self->unlogged);
            self->host->log (self->ctx, FANHUB_LOG_WARNING, "message %llu (%.*s): %s%s%s",
                             (unsigned long long) self->host->msg_seq (msg), s_topic_len (topic),
                             topic.size ? (const char *) topic.data : "", out->reason,
                             out->result == FANHUB_RETRY ? "; answering RETRY" : "", more);
            self->unlogged = 0;
        }
        else
            self->unlogged++;
        self->failing = true;
        self->streak++;
    }
    pthread_mutex_unlock (&self->lock);
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    exec_state_t *self = (exec_state_t *) state;
    exec_outcome_t out;
    exec_run (self, msg, &out);
    s_account (self, msg, &out);
    if (out.result != FANHUB_OK) /* for the hub's log line and the dead letter */
        self->host->set_reason (self->ctx, "%s", out.reason);
    return out.result;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "exec", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .options = s_options, .fini = s_fini, .check = s_check)
