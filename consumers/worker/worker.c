/*  worker - the shipped consumer whose code runs in long-lived child
    processes, in any language, speaking docs/worker-protocol.md; and its
    preset `python`, which runs the shipped Python runner
    (consumers/worker/python/) on a callable. One source, built twice
    (WORKER_PYTHON selects the preset's descriptor and options).

    consume copies the message into a frame, queues it for the I/O thread
    (loop.c) and answers FANHUB_PENDING; the message is done when a
    worker answers it (host->complete_reason). The hub's own machinery
    does the rest as for any plugin: its window (prefetch messages a
    process, host->set_window), consume_timeout counted from when a
    worker starts a message (host->ticket_started), the stuck figure, retries, dead letters, emit --wait, the spool's cursor;
    `workers: N` gives N processes (and N threads calling consume, which
    only queue), and order_by's scheduler keeps one message of a key in
    flight across them.

    Needs a hub with plugin ABI 1.3 (complete_reason, consumer_setting,
    set_state, count, msg_attempt).
*/
#define _GNU_SOURCE /* dladdr */

#include "worker.h"

#include <fanhub/sdk.h>

#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define RUNNER_PATH "worker-python/fanhub_worker/__main__.py" /* beside the plugin */

typedef struct {
    const fanhub_option_t *command; /* worker */
    const char *callable, *python;  /* python */
    const char *fedora_messaging;   /* python: a config.toml */
    const fanhub_option_t *path, *config;
    const char *max_crashes; /* refused: the consumer's key */
    int on_exception;
    int64_t handshake_timeout, restart_delay, restart_delay_max, shutdown_timeout;
    int64_t prefetch;
} opts_t;

#define COMMON_OPTIONS                                                                             \
    FANHUB_OPT_FIELD (opts_t, "config", FANHUB_OPT_MAP, config, NULL, 0, 0,                        \
                      "handed to the worker in HELLO (the runner: the consumer's config)"),        \
        FANHUB_OPT_FIELD (opts_t, "max_crashes", FANHUB_OPT_STRING, max_crashes, NULL, 0, 0,       \
                          "refused: set max_crashes on the consumer, not in its options"),         \
        FANHUB_OPT_FIELD (opts_t, "handshake_timeout", FANHUB_OPT_DURATION, handshake_timeout,     \
                          "30s", 1, 3600000, "a worker not READY by then is killed"),              \
        FANHUB_OPT_FIELD (opts_t, "restart_delay", FANHUB_OPT_DURATION, restart_delay, "100ms", 1, \
                          3600000, "wait before restarting a worker; doubles while it fails"),     \
        FANHUB_OPT_FIELD (opts_t, "restart_delay_max", FANHUB_OPT_DURATION, restart_delay_max,     \
                          "30s", 1, 3600000, "the longest wait before a restart"),                 \
        FANHUB_OPT_FIELD (opts_t, "shutdown_timeout", FANHUB_OPT_DURATION, shutdown_timeout, "5s", \
                          1, 3600000, "after QUIT, a worker still running is killed"),             \
        FANHUB_OPT_FIELD (opts_t, "prefetch", FANHUB_OPT_INT, prefetch, "10", 1, 10000,            \
                          "messages one worker process holds at once; the rest wait in the "       \
                          "consumer's queue")

#ifdef WORKER_PYTHON
static const char *const s_on_exception[] = {"fail", "retry", "halt", NULL};
static const fanhub_opt_t s_options[] = {
    {"callable", FANHUB_OPT_STRING, offsetof (opts_t, callable), NULL, 1, 1000, NULL,
     FANHUB_OPT_REQUIRED, "the consumer: \"package.module:Name\" (a class or a function)"},
    FANHUB_OPT_FIELD (opts_t, "python", FANHUB_OPT_FILE, python, "/usr/bin/python3", 0, 0,
                      "the interpreter"),
    FANHUB_OPT_FIELD (opts_t, "path", FANHUB_OPT_STRINGS, path, NULL, 0, 0,
                      "directories put first on sys.path"),
    {"on_exception", FANHUB_OPT_ENUM, offsetof (opts_t, on_exception), "fail", 0, 0, s_on_exception,
     0,
     "what an exception of the consumer answers: fail, retry, or halt (the consumer stops, "
     "as fedora-messaging's does)"},
    FANHUB_OPT_FIELD (opts_t, "fedora_messaging", FANHUB_OPT_FILE, fedora_messaging, NULL, 0, 0,
                      "a fedora-messaging config.toml: its consumer_config and log_config apply "
                      "(set by a consumer's fedora_messaging: key)"),
    COMMON_OPTIONS,
    FANHUB_OPT_END,
};
#else
static const fanhub_opt_t s_options[] = {
    {"command", FANHUB_OPT_STRINGS, offsetof (opts_t, command), NULL, 0, 0, NULL,
     FANHUB_OPT_REQUIRED, "[PROGRAM, ARG...]: the worker, run without a shell"},
    COMMON_OPTIONS,
    FANHUB_OPT_END,
};
#endif

/* program found as posix_spawnp would find it (PATH when it has no '/'):
   0, or -1 with why. */
static int
s_find_program (const char *program, char *why, size_t whylen)
{
    if (!program || !*program) {
        snprintf (why, whylen, "an empty program name");
        return -1;
    }
    if (strchr (program, '/')) {
        if (access (program, X_OK) == 0)
            return 0;
        snprintf (why, whylen, "%s: %s", program, strerror (errno));
        return -1;
    }
    const char *path = getenv ("PATH");
    path = path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn (path, ":");
        char full[4096];
        snprintf (full, sizeof full, "%.*s/%s", (int) len, len ? path : ".", program);
        if (access (full, X_OK) == 0)
            return 0;
        path += len + (path[len] == ':');
    }
    snprintf (why, whylen, "%s: not found in PATH", program);
    return -1;
}

#ifdef WORKER_PYTHON
/* The shipped runner, beside this plugin (so that the hub always runs the
   runner of its own protocol, at any prefix and in the build tree). */
static int
s_runner (char *out, size_t size)
{
    Dl_info info;
    if (!dladdr ((void *) s_find_program, &info) || !info.dli_fname)
        return -1;
    const char *slash = strrchr (info.dli_fname, '/');
    int len = slash ? (int) (slash - info.dli_fname) : 1;
    snprintf (out, size, "%.*s/%s", len, slash ? info.dli_fname : ".", RUNNER_PATH);
    return 0;
}
#endif

static int
s_read_options (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
                opts_t *o, char *err, size_t errlen)
{
    memset (o, 0, sizeof *o);
    if (!FANHUB_HOST_HAS_1_4 (host)) {
        snprintf (err, errlen, "needs a hub with plugin ABI 1.4 or later (this one has %u.%u)",
                  (unsigned) host->abi_major, (unsigned) host->abi_minor);
        return -1;
    }
    if (host->options_load (ctx, options, o, sizeof *o, err, errlen) != 0)
        return -1;
    /* One max_crashes for crashes of the hub and of workers: the
       consumer's key, read with consumer_setting. */
    if (o->max_crashes) {
        snprintf (err, errlen,
                  "options.max_crashes: not an option of this plugin; set max_crashes on the "
                  "consumer, beside options (%s)",
                  host->option_where (host->option_get (options, "max_crashes")));
        return -1;
    }
    char why[512];
#ifdef WORKER_PYTHON
    char runner[4096];
    if (s_find_program (o->python, why, sizeof why) != 0) {
        snprintf (err, errlen, "options.python: the interpreter is missing: %s", why);
        return -1;
    }
    if (s_runner (runner, sizeof runner) != 0 || access (runner, R_OK) != 0) {
        snprintf (err, errlen, "the shipped Python runner is missing: %s", runner);
        return -1;
    }
    if (!strchr (o->callable, ':') && !strchr (o->callable, '.')) {
        snprintf (err, errlen, "options.callable: \"%s\" is not \"module:Name\" (%s)", o->callable,
                  host->option_where (host->option_get (options, "callable")));
        return -1;
    }
#else
    if (host->option_count (o->command) == 0) {
        snprintf (err, errlen, "options.command: an empty list (%s)",
                  host->option_where (o->command));
        return -1;
    }
    if (s_find_program (host->option_scalar (host->option_at (o->command, 0, NULL)), why,
                        sizeof why)
        != 0) {
        snprintf (err, errlen, "options.command: the program is missing: %s (%s)", why,
                  host->option_where (o->command));
        return -1;
    }
#endif
    if (o->restart_delay_max < o->restart_delay) {
        snprintf (err, errlen, "options.restart_delay_max is below restart_delay");
        return -1;
    }
    return 0;
}

/* A YAML scalar as JSON: booleans, null, integers and decimals typed as
   YAML's core schema types them; anything else a string. */
static json_t *
s_scalar_json (const char *text)
{
    /* YAML's core schema spells them three ways: a Python-minded
       `enabled: False` must not reach the consumer as a true string. */
    static const char *const trues[] = {"true", "True", "TRUE"},
                             *const falses[] = {"false", "False", "FALSE"},
                             *const nulls[] = {"null", "Null", "NULL", "~"};
    for (size_t i = 0; i < 3; i++)
        if (strcmp (text, trues[i]) == 0 || strcmp (text, falses[i]) == 0)
            return json_boolean (strcmp (text, trues[i]) == 0);
    for (size_t i = 0; i < 4; i++)
        if (strcmp (text, nulls[i]) == 0)
            return json_null ();
    char *end;
    errno = 0;
    long long integer = strtoll (text, &end, 10);
    if (*text && !*end && errno == 0 && !strchr (" \t+", text[0]))
        return json_integer (integer);
    double real = strtod (text, &end);
    if (*text && !*end && errno == 0 && strpbrk (text, "0123456789") && !strpbrk (text, "xXnN "))
        return json_real (real);
    return json_string (text);
}

static json_t *
s_option_json (const fanhub_host_t *host, const fanhub_option_t *node)
{
    fanhub_option_kind_t kind = host->option_kind (node);
    if (kind == FANHUB_OPTION_SCALAR)
        return s_scalar_json (host->option_scalar (node));
    json_t *out = kind == FANHUB_OPTION_LIST ? json_array () : json_object ();
    for (size_t i = 0; out && i < host->option_count (node); i++) {
        const char *key = NULL;
        json_t *value = s_option_json (host, host->option_at (node, i, &key));
        if (kind == FANHUB_OPTION_LIST)
            json_array_append_new (out, value);
        else
            json_object_set_new (out, key ? key : "", value);
    }
    return out;
}

static void
s_free_strings (char **list)
{
    for (size_t i = 0; list && list[i]; i++)
        free (list[i]);
    free (list);
}

/* argv (NULL-ended) from the options. */
static char **
s_argv (const fanhub_host_t *host, const opts_t *o)
{
#ifdef WORKER_PYTHON
    (void) host;
    char runner[4096];
    if (s_runner (runner, sizeof runner) != 0)
        return NULL;
    char **argv = calloc (3, sizeof *argv);
    if (argv && (!(argv[0] = strdup (o->python)) || !(argv[1] = strdup (runner)))) {
        s_free_strings (argv);
        return NULL;
    }
    return argv;
#else
    size_t count = host->option_count (o->command);
    char **argv = calloc (count + 1, sizeof *argv);
    for (size_t i = 0; argv && i < count; i++) {
        const char *arg = host->option_scalar (host->option_at (o->command, i, NULL));
        if (!(argv[i] = strdup (arg ? arg : ""))) {
            s_free_strings (argv);
            return NULL;
        }
    }
    return argv;
#endif
}

/* The hub's environment, without FANHUB_WORKER_* and FANHUB_CONSUMER,
   plus FANHUB_WORKER_FD=3 and FANHUB_CONSUMER=NAME. */
static char **
s_envp (const char *name)
{
    size_t count = 0;
    while (environ[count])
        count++;
    char **envp = calloc (count + 3, sizeof *envp);
    size_t n = 0;
    for (size_t i = 0; envp && i < count; i++) {
        if (strncmp (environ[i], "FANHUB_WORKER_", 14) == 0
            || strncmp (environ[i], "FANHUB_CONSUMER=", 16) == 0)
            continue;
        if (!(envp[n++] = strdup (environ[i]))) {
            s_free_strings (envp);
            return NULL;
        }
    }
    if (envp
        && (!(envp[n++] = strdup ("FANHUB_WORKER_FD=3"))
            || asprintf (&envp[n++], "FANHUB_CONSUMER=%s", name) < 0)) {
        envp[n - 1] = NULL;
        s_free_strings (envp);
        return NULL;
    }
    return envp;
}

static void
s_destroy (worker_t *w)
{
    if (!w)
        return;
    if (w->thread_made) {
        atomic_store (&w->stop, true);
        loop_wake (w);
        pthread_join (w->thread, NULL);
    }
    for (size_t i = 0; w->procs && i < w->nprocs; i++) {
        proc_kill (&w->procs[i]);
        wbuf_free (&w->procs[i].in);
        wbuf_free (&w->procs[i].outq);
    }
    for (int64_t i = 0; w->jobs && i < w->cap; i++)
        free (w->jobs[i].frame);
    for (size_t i = 0; w->procs && i < w->nprocs; i++)
        free (w->procs[i].held);
    free (w->procs);
    free (w->jobs);
    free (w->free_slots);
    free (w->waitq);
    free (w->crashes);
    free (w->hello_options);
    s_free_strings (w->argv);
    s_free_strings (w->envp);
    if (w->wake_fd >= 0)
        close (w->wake_fd);
    pthread_mutex_destroy (&w->lock);
    pthread_cond_destroy (&w->ready_cond);
    free (w);
}

/* The consumer's own figures (ABI 1.6; none on an older hub): 0, or -1
   with err. */
static int
s_metrics (worker_t *w, char *err, size_t errlen)
{
    const fanhub_host_t *host = w->host;
    if (!FANHUB_HOST_HAS_1_6 (host))
        return 0;
    w->m_crashes = host->metric_new (w->ctx, "crashes", FANHUB_METRIC_COUNTER,
                                     "Worker processes that ended while they should run (hangs "
                                     "included); each is started again.",
                                     err, errlen);
    w->m_hangs = !w->m_crashes ? NULL
                               : host->metric_new (w->ctx, "hangs", FANHUB_METRIC_COUNTER,
                                                   "Worker processes killed for holding a "
                                                   "message past consume_timeout.",
                                                   err, errlen);
    w->m_pending = !w->m_hangs ? NULL
                               : host->metric_new (w->ctx, "answers_pending", FANHUB_METRIC_GAUGE,
                                                   "Messages sent to the worker processes and "
                                                   "not answered yet.",
                                                   err, errlen);
    return w->m_pending ? 0 : -1;
}

/* The settings and the tables; -1 when out of memory. */
static int
s_setup (worker_t *w, const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
         const opts_t *o)
{
    w->host = host;
    w->ctx = ctx;
    w->name = host->consumer_name (ctx);
    int64_t max_pending = host->consumer_setting (ctx, "max_pending");
    max_pending = max_pending > 0 ? max_pending : 1000;
    int64_t workers = host->consumer_setting (ctx, "workers");
    w->nprocs = workers > 0 ? (size_t) workers : 1;
    w->prefetch = o->prefetch;
    w->window = o->prefetch * (int64_t) w->nprocs;
    w->window = w->window < max_pending ? w->window : max_pending;
    w->cap = 2 * w->window;
    int64_t timeout_ms = host->consumer_setting (ctx, "consume_timeout_ms");
    w->consume_timeout_ns = timeout_ms > 0 ? timeout_ms * 1000000 : 0;
    w->max_attempts = host->consumer_setting (ctx, "retry.max_attempts");
    int64_t max_crashes = host->consumer_setting (ctx, "max_crashes");
    w->max_crashes = max_crashes > 0 ? (uint64_t) max_crashes : 3; /* the hub's default */
    w->handshake_ns = o->handshake_timeout * 1000000;
    w->restart_ns = o->restart_delay * 1000000;
    w->restart_max_ns = o->restart_delay_max * 1000000;
    w->shutdown_ns = o->shutdown_timeout * 1000000;
    json_t *json = s_option_json (host, options);
    w->hello_options = json ? json_dumps (json, JSON_COMPACT) : NULL;
    json_decref (json);
    w->argv = s_argv (host, o);
    w->envp = s_envp (w->name);
    size_t cap = (size_t) w->cap;
    w->procs = calloc (w->nprocs, sizeof *w->procs);
    w->jobs = calloc (cap, sizeof *w->jobs);
    w->free_slots = calloc (cap, sizeof *w->free_slots);
    w->waitq = calloc (cap, sizeof *w->waitq);
    if (!w->hello_options || !w->argv || !w->envp || !w->procs || !w->jobs || !w->free_slots
        || !w->waitq)
        return -1;
    for (size_t i = 0; i < w->nprocs; i++) {
        if (!(w->procs[i].held = calloc ((size_t) w->prefetch, sizeof *w->procs[i].held)))
            return -1;
        w->procs[i].index = i;
        w->procs[i].sock = w->procs[i].out = w->procs[i].err = -1;
        w->procs[i].status = -1;
    }
    for (size_t i = 0; i < cap; i++)
        w->free_slots[i] = cap - 1 - i;
    w->nfree = cap;
    return 0;
}

/* Whether the hub was told to stop (SIGTERM, SIGINT): the consumer's
   setting "stopping" (hubs before it answer -1). */
static bool
s_hub_stopping (const worker_t *w)
{
    return w->host->consumer_setting (w->ctx, "stopping") > 0;
}

/* Starts the I/O thread and waits until every worker is READY: 0, or -1
   with why (the first that failed, the time it took, or a stop of the
   hub: looked at every 100 ms, so that a stop need not wait out
   handshake_timeout). */
static int
s_start (worker_t *w, char *err, size_t errlen)
{
    if (pthread_create (&w->thread, NULL, loop_thread, w) != 0) {
        snprintf (err, errlen, "cannot start its thread");
        return -1;
    }
    w->thread_made = true;
    struct timespec until;
    clock_gettime (CLOCK_MONOTONIC, &until);
    int64_t wait_ns = w->handshake_ns + 2000000000;
    until.tv_sec += (time_t) (wait_ns / 1000000000);
    until.tv_nsec += (long) (wait_ns % 1000000000);
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock (&w->lock);
    int rc = 0;
    bool stopping = false;
    while (w->ready_count + w->start_down < w->nprocs && !w->start_failed && rc == 0
           && !(stopping = s_hub_stopping (w))) {
        struct timespec now, slice;
        clock_gettime (CLOCK_MONOTONIC, &now);
        slice = now;
        slice.tv_nsec += 100000000;
        if (slice.tv_nsec >= 1000000000) {
            slice.tv_sec++;
            slice.tv_nsec -= 1000000000;
        }
        bool last = slice.tv_sec > until.tv_sec
                    || (slice.tv_sec == until.tv_sec && slice.tv_nsec >= until.tv_nsec);
        rc = pthread_cond_timedwait (&w->ready_cond, &w->lock, last ? &until : &slice);
        if (rc == ETIMEDOUT && !last)
            rc = 0;
    }
    /* Workers whose consumer refused to start for now count as settled:
       the consumer shows down (loop.c said so) and they start again with
       backoff, as when they fail later. */
    bool ok = w->ready_count + w->start_down >= w->nprocs && !w->start_failed;
    if (ok)
        w->running = true;
    /* None ready, some refused for now: down before init returns (a
       reload reads the state then; the I/O thread says it a moment later,
       after its wake-up). Under the lock, so a READY since wins. */
    if (ok && w->ready_count == 0 && w->start_down > 0)
        w->host->set_state (w->ctx, FANHUB_STATE_DOWN, "%s", w->start_err);
    else if (stopping)
        snprintf (err, errlen, "the hub is stopping: gave up waiting for READY");
    else
        snprintf (err, errlen, "%s", w->start_failed ? w->start_err : "workers not READY in time");
    pthread_mutex_unlock (&w->lock);
    return ok ? 0 : -1;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    opts_t o;
    if (s_read_options (host, ctx, options, &o, err, errlen) != 0)
        return -1;
    worker_t *w = calloc (1, sizeof *w);
    if (!w) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    w->wake_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init (&w->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init (&attr);
    pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
    pthread_cond_init (&w->ready_cond, &attr);
    pthread_condattr_destroy (&attr);
    if (w->wake_fd < 0 || s_setup (w, host, ctx, options, &o) != 0) {
        snprintf (err, errlen, "out of memory, or no eventfd");
        s_destroy (w);
        return -1;
    }
    /* The hub keeps what the processes cannot hold yet in the consumer's
       queue (backlog, overflow, spool), and each message's
       consume_timeout runs from when its worker starts it. */
    if (FANHUB_HOST_HAS_1_5 (host))
        host->set_window (ctx, (size_t) w->window);
    if (s_metrics (w, err, errlen) != 0) {
        s_destroy (w);
        return -1;
    }
    if (s_start (w, err, errlen) != 0) {
        s_destroy (w);
        return -1;
    }
    *state = w;
    return 0;
}

static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    opts_t o;
    return s_read_options (host, ctx, options, &o, err, errlen);
}

static void
s_fini (void *state)
{
    s_destroy (state);
}

/* msg as an 'M' frame into frame (its ticket set later): 0, or a result
   with the reason set. */
static fanhub_result_t
s_encode (worker_t *w, const fanhub_msg_t *msg, wbuf_t *frame, uint64_t *seq, uint32_t *attempt)
{
    const fanhub_host_t *h = w->host;
    size_t count = h->msg_frame_count (msg);
    fanhub_bytes_t stack[8];
    fanhub_bytes_t *frames = count <= 8 ? stack : malloc (count * sizeof *frames);
    if (!frames) {
        h->set_reason (w->ctx, "out of memory");
        return FANHUB_RETRY;
    }
    for (size_t i = 0; i < count; i++)
        frames[i] = h->msg_frame (msg, i);
    char id[256];
    size_t id_size = wire_msg_id (frames[1].data, frames[1].size, id, sizeof id);
    wire_msg_t m = {.seq = h->msg_seq (msg),
                    .attempt = h->msg_attempt (msg),
                    .received_ns = h->msg_received_ns (msg),
                    .id = id,
                    .id_size = id_size,
                    .frames = frames,
                    .count = count};
    int rc = wire_message (frame, &m);
    if (frames != stack)
        free (frames);
    if (rc != 0) {
        h->set_reason (w->ctx, "cannot make its frame (out of memory, or over 1 GiB)");
        return FANHUB_FAIL;
    }
    *seq = m.seq;
    *attempt = m.attempt;
    return FANHUB_OK;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    worker_t *w = state;
    const fanhub_host_t *h = w->host;
    fanhub_ticket_t ticket = h->msg_ticket (msg);
    if (!ticket) {
        h->set_reason (w->ctx, "no ticket for the message");
        return FANHUB_RETRY;
    }
    wbuf_t frame = {0};
    uint64_t seq;
    uint32_t attempt;
    fanhub_result_t rc = s_encode (w, msg, &frame, &seq, &attempt);
    if (rc != FANHUB_OK)
        return rc;
    int64_t now = worker_now_ns ();
    char why[WORKER_REASON_MAX + 1];
    pthread_mutex_lock (&w->lock);
    rc = FANHUB_PENDING;
    if (w->halted) {
        fanhub_utf8_format (why, sizeof why, "the consumer is %.*s",
                            (int) fanhub_utf8_cut (w->halt_reason, strlen (w->halt_reason), 200),
                            w->halt_reason);
        rc = FANHUB_FAIL;
    }
    else if (w->nfree == 0) {
        snprintf (why, sizeof why, "more messages open than its window (prefetch × workers)");
        rc = FANHUB_RETRY;
    }
    else if (w->ncrashes && crash_hung_out (w, seq, why, sizeof why))
        rc = FANHUB_FAIL; /* the hub expired its last hang: that one was charged */
    if (rc != FANHUB_PENDING) {
        pthread_mutex_unlock (&w->lock);
        wbuf_free (&frame);
        h->set_reason (w->ctx, "%s", why);
        return rc;
    }
    size_t slot = w->free_slots[--w->nfree];
    job_t *job = &w->jobs[slot];
    uint64_t wire = (++w->serial << 32) | slot;
    for (int i = 0; i < 8; i++)
        frame.data[WIRE_TICKET_OFFSET + i] = (uint8_t) (wire >> (56 - 8 * i));
    *job = (job_t){.used = true,
                   .suspect = crash_suspect (w, seq),
                   .wire = wire,
                   .ticket = ticket,
                   .seq = seq,
                   .attempt = attempt,
                   .frame = frame.data,
                   .frame_size = frame.size,
                   .proc = -1,
                   .consumed_ns = now};
    bool was_empty = w->wcount == 0;
    w->waitq[(w->whead + w->wcount) % (size_t) w->cap] = slot;
    w->wcount++;
    pthread_mutex_unlock (&w->lock);
    if (was_empty)
        loop_wake (w);
    return FANHUB_PENDING;
}

#ifdef WORKER_PYTHON
FANHUB_CONSUMER_DEFINE (s_desc, .name = "python", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini, .check = s_check, .options = s_options)
#else
FANHUB_CONSUMER_DEFINE (s_desc, .name = "worker", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .fini = s_fini, .check = s_check, .options = s_options)
#endif
