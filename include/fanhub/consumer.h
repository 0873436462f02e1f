/*  fanhub/consumer.h - the plugin ABI of fanhub consumers.

    A consumer plugin is a shared object that exports one function,
    fanhub_consumer_entry (), returning a pointer to a constant descriptor.
    The hub loads the object with dlopen (RTLD_NOW | RTLD_LOCAL), calls the
    entry function once, and checks the descriptor's ABI version and size
    before it calls anything else. The plugin never links against the hub:
    everything it may ask of the hub comes through the host table handed to
    init, so a plugin can be unit-tested against a fake host.

    Versioning. FANHUB_ABI_MAJOR changes when anything here changes
    incompatibly; the hub refuses a plugin of another major version.
    FANHUB_ABI_MINOR grows when something is added at the end of a struct;
    the hub refuses a plugin built against a newer minor than its own,
    and a plugin may check host->size before calling a newer host function.

    Threading contract.
    - init is called on the hub's main thread; fini on a thread of the hub
      made for it (so that a fini that hangs holds neither a reload nor the
      stop), never at the same time as any other call for that instance.
      Once each, in that order; fini only when init succeeded, after the
      last consume and idle have returned.
    - consume and idle are called on the consumer's own thread. With the
      default of one worker, never two calls at once for one instance.
    - With `workers: N` (only for plugins whose descriptor sets
      FANHUB_CONSUMER_THREAD_SAFE) consume may run on several threads at
      once, but never concurrently for two messages of the same ordering key.
    - Host functions may be called from any thread that the hub called into.

    Nothing of ZeroMQ or CZMQ appears here: a plugin needs only libc.

    Minimal plugin:

        #include <fanhub/consumer.h>
        static fanhub_result_t consume (void *state, const fanhub_msg_t *msg)
        { (void) state; (void) msg; return FANHUB_OK; }
        static const fanhub_consumer_desc_t desc = {
            FANHUB_CONSUMER_DESC_HEADER,
            .name = "noop", .version = "1.0", .consume = consume,
        };
        FANHUB_EXPORT const fanhub_consumer_desc_t *fanhub_consumer_entry (void)
        { return &desc; }
*/

#ifndef FANHUB_CONSUMER_H_INCLUDED
#define FANHUB_CONSUMER_H_INCLUDED

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FANHUB_ABI_MAJOR 1
#define FANHUB_ABI_MINOR 6

/* The name of the one symbol a plugin exports. */
#define FANHUB_CONSUMER_ENTRY_SYMBOL "fanhub_consumer_entry"

#if defined(__GNUC__)
#define FANHUB_EXPORT __attribute__ ((visibility ("default")))
#define FANHUB_PRINTF(fmt, args) __attribute__ ((format (printf, fmt, args)))
#else
#define FANHUB_EXPORT
#define FANHUB_PRINTF(fmt, args)
#endif

/* What consume answers. */
typedef enum {
    FANHUB_OK = 0,     /* done with this message */
    FANHUB_RETRY = 1,  /* failed for now; the hub may offer it again later */
    FANHUB_FAIL = 2,   /* failed for good; the hub counts it (dead letter) */
    FANHUB_PENDING = 3 /* ABI 1.1: not finished yet; the plugin finishes it
                          later with host->complete (see there) */
} fanhub_result_t;

/* ABI 1.1: names one message that consume answered FANHUB_PENDING, for
   host->complete. Never 0. */
typedef uint64_t fanhub_ticket_t;

typedef enum {
    FANHUB_LOG_ERROR = 3, /* syslog priorities, so journald reads them */
    FANHUB_LOG_WARNING = 4,
    FANHUB_LOG_INFO = 6,
    FANHUB_LOG_DEBUG = 7
} fanhub_log_level_t;

/* Kinds of option nodes: the consumer's `options:` YAML, as a tree. */
typedef enum {
    FANHUB_OPTION_SCALAR = 1,
    FANHUB_OPTION_LIST = 2,
    FANHUB_OPTION_MAP = 3
} fanhub_option_kind_t;

/* A byte range owned by the hub, valid for the duration of the call that
   produced it (for message accessors: until consume returns). It is not
   NUL-terminated. */
typedef struct {
    const void *data;
    size_t size;
} fanhub_bytes_t;

typedef struct fanhub_msg fanhub_msg_t;       /* one bus message, read-only */
typedef struct fanhub_option fanhub_option_t; /* one node of options: */
typedef struct fanhub_ctx fanhub_ctx_t;       /* the hub's handle for one
                                                 consumer instance */
typedef struct fanhub_metric fanhub_metric_t; /* ABI 1.6: one of a plugin's
                                                 own figures */
struct fanhub_consumer_desc;

/* ABI 1.2: option tables. A plugin declares its options as a table of
   fanhub_opt_t (desc->options) and, in init and check, calls
   host->options_read, which walks `options:` against the table and fills
   a struct of the plugin's own: each entry names the field by offsetof
   and the host writes the value there, of the C type its type names:

     STRING    const char *   any scalar text (min/max: its length)
     FILE      const char *   a path: a scalar, not empty
     INT       int64_t        decimal, optional '-' (min/max: the range)
     UINT      uint64_t       decimal (min/max: the range)
     DOUBLE    double         a finite number (min/max: the range)
     BOOL      bool           true or false
     DURATION  int64_t        milliseconds: a number with a unit, ms, s,
                              m or h ("250ms", "2s", "1.5s"); bare:
                              milliseconds
     SIZE      uint64_t       bytes: an integer with a unit, B, KiB (K),
                              MiB (M) or GiB (G); bare: bytes
     ENUM      int            the index of the value in `values`
     STRINGS   const fanhub_option_t *  a list of scalars: read it with
                              option_count and option_at
     ANY       const fanhub_option_t *  any node, checked by the plugin
                              (kept for outside plugins; prefer a type)

   ABI 1.4 adds:

     MAPS      const fanhub_option_t *  a list of maps
     MAP       const fanhub_option_t *  a map. When the table has entries
                              named "KEY.SUB", the map's keys are read
                              against them, as the options are against
                              the table (unknown keys refused; a REQUIRED
                              SUB only when the map is given; defaults
                              always); without such entries, any map
     STRING_OR_LIST  const fanhub_option_t *  a scalar, or a list of
                              scalars that is not empty: read it with
                              fanhub_option_items and fanhub_option_item
     ENDPOINT  const char *   a ZeroMQ endpoint, checked as the hub checks
                              bus endpoints (FANHUB_OPT_BIND: as bus.bind)
     ENDPOINTS const fanhub_option_t *  an endpoint or a list of them (not
                              empty), each checked as ENDPOINT
     SECRET    char *         a secret from KEY_file or KEY_env (the entry
                              named KEY takes those two keys, not KEY):
                              fanhub_secret_read's rules (a file only its
                              owner may read or change; a variable set and
                              not empty). The field is set to NULL first,
                              then to the secret, malloc'd: the plugin
                              owns it (wipe and free it). Give both keys
                              and the later one is refused.

   FANHUB_OPT_ALTERNATIVE (1.4) on an entry makes it and the entries
   before it that carry the flag, up to and including the first entry
   without it, alternatives: at most one of them may be given (the later
   one is refused: "give A or B, not both"); REQUIRED on the first of them
   asks for one of them.

   A key the table does not name is refused (the message lists the known
   ones), as is a value of the wrong form or out of range, and a REQUIRED
   entry that is missing ("missing: " and its help text); every message
   is one line that starts with "options.KEY: " and ends with the
   FILE:LINE:COL of the value. The hub reads the options against the table
   once before it calls init or check, so neither ever sees options that
   the table refuses. An entry that is absent gets its default
   (`def`, written as in YAML, e.g. "100", "true", "2s"; NULL leaves the
   field as the plugin set it). Pointers handed over (strings, nodes)
   point into the option tree or the table: valid until init or check
   returns; copy what you keep. The range applies when min != max. */
typedef enum {
    FANHUB_OPT_STRING = 1,
    FANHUB_OPT_FILE = 2,
    FANHUB_OPT_INT = 3,
    FANHUB_OPT_UINT = 4,
    FANHUB_OPT_DOUBLE = 5,
    FANHUB_OPT_BOOL = 6,
    FANHUB_OPT_DURATION = 7,
    FANHUB_OPT_SIZE = 8,
    FANHUB_OPT_ENUM = 9,
    FANHUB_OPT_STRINGS = 10,
    FANHUB_OPT_ANY = 11,
    FANHUB_OPT_MAPS = 12, /* ABI 1.4 from here */
    FANHUB_OPT_MAP = 13,
    FANHUB_OPT_STRING_OR_LIST = 14,
    FANHUB_OPT_ENDPOINT = 15,
    FANHUB_OPT_ENDPOINTS = 16,
    FANHUB_OPT_SECRET = 17
} fanhub_opt_type_t;

#define FANHUB_OPT_REQUIRED 0x1u    /* fanhub_opt_t.flags: must be given */
#define FANHUB_OPT_ALTERNATIVE 0x2u /* 1.4: one of it and those before it */
#define FANHUB_OPT_BIND 0x4u        /* 1.4: ENDPOINT(S) to bind, not connect */

typedef struct {
    const char *name; /* the key; NULL ends the table */
    fanhub_opt_type_t type;
    size_t offset;             /* offsetof (the plugin's struct, field) */
    const char *def;           /* default, as YAML text, or NULL */
    double min, max;           /* range (see above), when min != max */
    const char *const *values; /* ENUM: the names, NULL-terminated */
    uint32_t flags;            /* FANHUB_OPT_REQUIRED */
    const char *help;          /* one line, for `fanhub plugins --options` */
} fanhub_opt_t;

/* Ends an option table (every field given, so no compiler asks for more). */
#define FANHUB_OPT_END                                                                             \
    {                                                                                              \
        NULL, (fanhub_opt_type_t) 0, 0, NULL, 0, 0, NULL, 0, NULL                                  \
    }

/* An entry whose value goes to field of the plugin's struct type, without
   enum values or flags (write those entries out in full):
     FANHUB_OPT_FIELD (my_options_t, "port", FANHUB_OPT_INT, port, "80",
                       1, 65535, "the port to connect to") */
#define FANHUB_OPT_FIELD(type, name, opt_type, field, def, min, max, help)                         \
    {                                                                                              \
        name, opt_type, offsetof (type, field), def, min, max, NULL, 0, help                       \
    }

/* The host table: what the hub offers a plugin. Passed to init; valid until
   fini returns. New members are only ever added at the end. */
typedef struct fanhub_host {
    uint32_t abi_major;
    uint32_t abi_minor;
    size_t size; /* sizeof (fanhub_host_t) of the hub */

    /* Logs one line, prefixed with the consumer's name. */
    void (*log) (fanhub_ctx_t *ctx, fanhub_log_level_t level, const char *fmt, ...)
        FANHUB_PRINTF (3, 4);
    /* The consumer's `name:` from the configuration. */
    const char *(*consumer_name) (fanhub_ctx_t *ctx);

    /* Options. `options` handed to init is always a map (empty when the
       configuration has none). Lookups of a missing key answer NULL. */
    fanhub_option_kind_t (*option_kind) (const fanhub_option_t *node);
    /* Child of a map by key, or NULL. */
    const fanhub_option_t *(*option_get) (const fanhub_option_t *map, const char *key);
    /* A scalar's text (NUL-terminated), or NULL when node is not a scalar. */
    const char *(*option_scalar) (const fanhub_option_t *node);
    /* Number of items of a list or entries of a map; 0 for a scalar. */
    size_t (*option_count) (const fanhub_option_t *node);
    /* Item i of a list or entry i of a map (then *key, if not NULL, gets the
       entry's key), in file order; NULL when i is out of range. */
    const fanhub_option_t *(*option_at) (const fanhub_option_t *node, size_t i, const char **key);
    /* "FILE:LINE:COL" of the node, for error messages. */
    const char *(*option_where) (const fanhub_option_t *node);

    /* Message accessors; msg is only valid during consume. */
    fanhub_bytes_t (*msg_topic) (const fanhub_msg_t *msg); /* frame 0 */
    fanhub_bytes_t (*msg_body) (const fanhub_msg_t *msg);  /* frame 1 */
    size_t (*msg_frame_count) (const fanhub_msg_t *msg);   /* >= 2 */
    /* Frame i (0 = topic, 1 = body); {NULL, 0} when out of range. */
    fanhub_bytes_t (*msg_frame) (const fanhub_msg_t *msg, size_t i);
    /* The hub's sequence number: 1 for the first message it accepted since
       it started (or, when spools kept messages from the last run, one
       more than the highest of theirs, so that a seq names one message
       within a run), one more for each after. */
    uint64_t (*msg_seq) (const fanhub_msg_t *msg);
    /* When the hub received the message, in nanoseconds since the Unix
       epoch. Taken from a monotonic clock and offset to wall time once at
       start, so it never goes backwards within one run. */
    int64_t (*msg_received_ns) (const fanhub_msg_t *msg);

    /* ABI 1.1 (check host->size >= offsetof (fanhub_host_t, complete) +
       sizeof host->complete before using these). Asynchronous completion.

       consume may answer FANHUB_PENDING instead of finishing a message:
       it takes msg_ticket (msg) during that consume call and, later, from
       any thread, calls complete (ctx, ticket, result) exactly once with
       FANHUB_OK, FANHUB_RETRY or FANHUB_FAIL. Until then the message is
       not done: it counts in in_flight, its spool record stays unconsumed
       (a crash delivers it again), emit --wait does not answer. Not
       completed within the consumer's consume_timeout, the attempt fails
       as if completed with FANHUB_RETRY and the ticket is void; a reload
       or stop waits for open tickets at most shutdown_timeout, then voids
       them (not done: a spooled message comes back). RETRY and FAIL
       work as if consume had answered them (backoff, retry.max_attempts,
       dead letters). The message itself (msg) is only valid during
       consume: copy what is needed. The hub stops calling consume while
       the consumer's `max_pending` messages are open, and calls idle
       then, so that a plugin which batches can flush. complete with a
       ticket that is void, unknown or already completed is logged,
       counted (completions_late) and ignored.
       complete may be called from inside consume (of the same message,
       after msg_ticket, or another one) and from idle and fini; once fini
       returns, open tickets are void. A complete after fini returned
       (from a thread fini did not wait for) is logged and counted as
       late, never a crash: ctx stays valid for the host's calls. */
    fanhub_ticket_t (*msg_ticket) (const fanhub_msg_t *msg);
    void (*complete) (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result);

    /* ABI 1.2 (FANHUB_HOST_HAS_1_2 before using these). */

    /* Reads options against desc->options (see fanhub_opt_t) into values,
       a struct of values_size bytes that every entry's field must fit.
       Call it from init and check with their options. 0, or -1 with one
       line in err (errlen bytes). */
    int (*options_read) (fanhub_ctx_t *ctx, const struct fanhub_consumer_desc *desc,
                         const fanhub_option_t *options, void *values, size_t values_size,
                         char *err, size_t errlen);
    /* Says why a message failed: call it from consume before answering
       FANHUB_RETRY or FANHUB_FAIL (or before complete with either), on
       the thread that answers. The hub logs the reason with the retry or
       the failure and keeps it in the dead letter. One line; cut at 255
       bytes. A later call replaces it; an OK answer drops it. */
    void (*set_reason) (fanhub_ctx_t *ctx, const char *fmt, ...) FANHUB_PRINTF (2, 3);

    /* ABI 1.3 (FANHUB_HOST_HAS_1_3 before using these). For plugins that
       run the work elsewhere (the worker plugin's processes). */

    /* complete with the plugin's reason for RETRY or FAIL, as set_reason
       gives one with a synchronous answer: logged with the retry or the
       failure and kept in the dead letter (one line, cut at 255 bytes;
       NULL or "" for none). Otherwise as complete. */
    void (*complete_reason) (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result,
                             const char *reason);
    /* A setting of the consumer from the configuration, as a number:
       "workers", "max_pending", "consume_timeout_ms" (0: never),
       "retry.max_attempts", "max_crashes"; -1 for a name it does not
       know. And one of the process, not of the configuration:
       "stopping", 1 once the hub was told to stop (SIGTERM, SIGINT),
       else 0 (hubs before it: -1), so that an init waiting for something
       (a worker's handshake) can give up at once; any thread. */
    int64_t (*consumer_setting) (fanhub_ctx_t *ctx, const char *name);
    /* What the plugin's own machinery is doing (FANHUB_STATE_*), with the
       last error (printf-style; NULL keeps the last one, "" clears it):
       `fanhub stats` shows both, Prometheus and collectd the state. */
    void (*set_state) (fanhub_ctx_t *ctx, int state, const char *fmt, ...) FANHUB_PRINTF (3, 4);
    /* Adds n to one of the consumer's plugin counters (FANHUB_COUNT_*),
       shown in stats, Prometheus and collectd. Any thread. */
    void (*count) (fanhub_ctx_t *ctx, int counter, uint64_t n);
    /* Which attempt this consume call is: 1 for the first, one more for
       each RETRY before it (retry.max_attempts bounds it); 0 outside
       consume. */
    uint32_t (*msg_attempt) (const fanhub_msg_t *msg);

    /* ABI 1.4 (FANHUB_HOST_HAS_1_4 before using it). */

    /* options_read against the table of the plugin that ctx belongs to:
       what init and check call, without handing the descriptor back. */
    int (*options_load) (fanhub_ctx_t *ctx, const fanhub_option_t *options, void *values,
                         size_t values_size, char *err, size_t errlen);

    /* ABI 1.5 (FANHUB_HOST_HAS_1_5 before using these). */

    /* Puts one message on the consumer's `publish:` endpoints (and, with
       `local: true`, on this hub's own bus), wrapped and signed as the
       consumer's publish settings say. Never blocks: 0 when queued, -1
       when dropped (no publish endpoints, the queue full, a body that
       cannot be wrapped), counted in publish_failed either way; a queued
       message counts in published. Any thread. */
    int (*publish) (fanhub_ctx_t *ctx, const char *topic, const void *body, size_t size);
    /* The plugin holds at most n messages at once (its window, n >= 1):
       the hub calls consume only while fewer than n (and fewer than
       max_pending) of the consumer's tickets are open; the rest wait in
       the consumer's queue, as backlog. From this call on, the plugin
       starts each ticket's consume_timeout itself with ticket_started: a
       ticket not started yet never expires. Call it from init; 0 lifts
       both. */
    void (*set_window) (fanhub_ctx_t *ctx, size_t n);
    /* The work on an open ticket starts now: its consume_timeout counts
       from this call, not from consume (a plugin that queues messages
       before working on them, like the worker plugin's processes). Any
       thread; a void ticket is ignored. */
    void (*ticket_started) (fanhub_ctx_t *ctx, fanhub_ticket_t ticket);

    /* ABI 1.6 (FANHUB_HOST_HAS_1_6 before using these). Figures of the
       plugin's own, shown under its consumer in `fanhub stats`, the STATS
       JSON (consumers[].plugin_metrics), Prometheus
       (fanhub_plugin_PLUGIN_NAME, `_total` added to a counter's, with
       the consumer label) and collectd (derive-plugin_NAME or
       gauge-plugin_NAME under the consumer's plugin instance). */

    /* Registers one from init: kind FANHUB_METRIC_COUNTER (it only
       grows) or FANHUB_METRIC_GAUGE (a value now); name 1 to 40 of
       [a-z0-9_], starting with a letter, not ending in "_total", unique
       within the consumer; help one line of at most 200 bytes. At most
       FANHUB_METRICS_MAX per consumer. The metric, valid as long as ctx
       (after fini too), or NULL with one line in err (errlen bytes)
       saying why it is refused. */
    fanhub_metric_t *(*metric_new) (fanhub_ctx_t *ctx, const char *name, int kind, const char *help,
                                    char *err, size_t errlen);
    /* Adds n to a metric (a gauge's n may be negative; a counter's
       negative n is ignored). Any thread, a lock-free atomic add. */
    void (*metric_add) (fanhub_metric_t *metric, int64_t n);
    /* Sets a gauge's value (a counter is left alone). Any thread. */
    void (*metric_set) (fanhub_metric_t *metric, int64_t value);
} fanhub_host_t;

/* ABI 1.6: host->metric_new's kinds and limit. */
#define FANHUB_METRIC_COUNTER 0
#define FANHUB_METRIC_GAUGE 1
#define FANHUB_METRICS_MAX 32

/* True when the host table offers the ABI 1.6 calls (metric_new,
   metric_add, metric_set). */
#define FANHUB_HOST_HAS_1_6(host)                                                                  \
    ((host)->abi_minor >= 6                                                                        \
     && (host)->size >= offsetof (fanhub_host_t, metric_set) + sizeof (host)->metric_set)

/* True when the host table offers the ABI 1.5 calls (publish, set_window,
   ticket_started). */
#define FANHUB_HOST_HAS_1_5(host)                                                                  \
    ((host)->abi_minor >= 5                                                                        \
     && (host)->size >= offsetof (fanhub_host_t, ticket_started) + sizeof (host)->ticket_started)

/* True when the host table offers the ABI 1.4 call (options_load). */
#define FANHUB_HOST_HAS_1_4(host)                                                                  \
    ((host)->abi_minor >= 4                                                                        \
     && (host)->size >= offsetof (fanhub_host_t, options_load) + sizeof (host)->options_load)

/* ABI 1.4: a STRING_OR_LIST or ENDPOINTS value as a list: how many items
   (a scalar is one) and the text of item i (NULL past the end). */
static inline size_t
fanhub_option_items (const fanhub_host_t *host, const fanhub_option_t *node)
{
    return host->option_kind (node) == FANHUB_OPTION_SCALAR ? 1 : host->option_count (node);
}

static inline const char *
fanhub_option_item (const fanhub_host_t *host, const fanhub_option_t *node, size_t i)
{
    if (host->option_kind (node) == FANHUB_OPTION_SCALAR)
        return i == 0 ? host->option_scalar (node) : NULL;
    return host->option_scalar (host->option_at (node, i, NULL));
}

/* ABI 1.3: host->set_state's states. */
#define FANHUB_STATE_UP 0     /* working (the default) */
#define FANHUB_STATE_DOWN 1   /* cannot work now; it keeps trying */
#define FANHUB_STATE_HALTED 2 /* stopped on purpose; no retries until a restart */

/* ABI 1.3: host->count's counters. */
#define FANHUB_COUNT_RESTARTS 1 /* worker processes started again */
#define FANHUB_COUNT_SKIPPED 2  /* messages done without processing (a worker's DROP) */

/* True when the host table offers the ABI 1.3 calls. */
#define FANHUB_HOST_HAS_1_3(host)                                                                  \
    ((host)->abi_minor >= 3                                                                        \
     && (host)->size >= offsetof (fanhub_host_t, msg_attempt) + sizeof (host)->msg_attempt)

/* True when the host table offers the ABI 1.2 calls (options_read and
   set_reason). */
#define FANHUB_HOST_HAS_1_2(host)                                                                  \
    ((host)->abi_minor >= 2                                                                        \
     && (host)->size >= offsetof (fanhub_host_t, set_reason) + sizeof (host)->set_reason)

/* True when the host table offers the ABI 1.1 completion calls. */
#define FANHUB_HOST_HAS_COMPLETE(host)                                                             \
    ((host)->abi_minor >= 1                                                                        \
     && (host)->size >= offsetof (fanhub_host_t, complete) + sizeof (host)->complete               \
     && (host)->msg_ticket && (host)->complete)

/* Descriptor flags. */
#define FANHUB_CONSUMER_THREAD_SAFE 0x1u /* consume may run on N threads */

typedef struct fanhub_consumer_desc {
    uint32_t abi_major; /* FANHUB_ABI_MAJOR at build time */
    uint32_t abi_minor; /* FANHUB_ABI_MINOR at build time */
    size_t size;        /* sizeof (fanhub_consumer_desc_t) at build time */
    const char *name;   /* short name, e.g. "log" */
    const char *version;
    uint32_t flags;

    /* Optional. Checks the options and makes the instance's state. On
       success returns 0 and sets *state (which may stay NULL). To refuse,
       writes a one-line reason into err (errlen bytes, always > 0) and
       returns -1; fini is then not called. Keep host and ctx for later
       calls: both stay valid until fini returns. */
    int (*init) (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
                 void **state, char *err, size_t errlen);
    /* Required. Handles one message: FANHUB_OK, RETRY or FAIL, or (ABI
       1.1, see host->complete) FANHUB_PENDING to finish it later. */
    fanhub_result_t (*consume) (void *state, const fanhub_msg_t *msg);
    /* Optional. Called on the consumer's thread when its queue has run
       empty, before the thread sleeps, and when max_pending messages are
       open (PENDING): the moment to flush buffers. */
    void (*idle) (void *state);
    /* Optional. Releases the state; called once, after the last consume. */
    void (*fini) (void *state);

    /* ABI 1.1: the hub reads this member only when size covers it.

       Optional. `fanhub check`: validates the options exactly as init
       would and reports what would stop init, without acquiring anything:
       no socket bound or connected, no file, directory or database
       created or opened for writing, no lock, thread or process. What it
       can only look at (a directory that does not exist, a file that
       cannot be written) it reports as init would. Returns 0 when init
       would accept the options; else writes a one-line reason into err
       (errlen bytes, always > 0) and returns -1. host->log may add notes.
       Called on the hub's main thread; init is not called for a check.
       A plugin without check (ABI 1.0) is checked by init, then fini. */
    int (*check) (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
                  char *err, size_t errlen);

    /* ABI 1.2: the hub reads this member only when size covers it.

       Optional. The plugin's option table, ended by an entry whose name
       is NULL (an empty table: the plugin takes no options). init and
       check read their options with host->options_read against it, and
       `fanhub plugins --options NAME` prints it. */
    const fanhub_opt_t *options;

    /* ABI 1.3: the hub reads this member only when size covers it.

       Optional. Reopens what the instance writes to by name (a log file
       that logrotate renamed): asked at every reload (SIGHUP or `fanhub
       reload`, accepted or refused). Called on the consumer's own thread
       before its next consume or idle call; with workers > 1 on one of
       them while the others may consume. On an error the plugin logs it
       and keeps what it had open. */
    void (*reopen) (void *state);
} fanhub_consumer_desc_t;

/* Put first in a descriptor's initializer. */
#define FANHUB_CONSUMER_DESC_HEADER                                                                \
    .abi_major = FANHUB_ABI_MAJOR, .abi_minor = FANHUB_ABI_MINOR,                                  \
    .size = sizeof (fanhub_consumer_desc_t)

/* The function every plugin exports. */
typedef const fanhub_consumer_desc_t *(*fanhub_consumer_entry_fn) (void);
FANHUB_EXPORT const fanhub_consumer_desc_t *fanhub_consumer_entry (void);

/* Defines that function, answering &desc: FANHUB_CONSUMER_ENTRY (s_desc). */
#define FANHUB_CONSUMER_ENTRY(desc)                                                                \
    FANHUB_EXPORT const fanhub_consumer_desc_t *fanhub_consumer_entry (void)                       \
    {                                                                                              \
        return &(desc);                                                                            \
    }

/* Both in one: the descriptor desc, FANHUB_CONSUMER_DESC_HEADER first and
   then the members given, and the entry that answers it:
     FANHUB_CONSUMER_DEFINE (s_desc, .name = "log", .version = "1.0",
                             .init = s_init, .consume = s_consume)
   (init and check read their options with host->options_load, ABI 1.4,
   which needs no descriptor). */
#define FANHUB_CONSUMER_DEFINE(desc, ...)                                                          \
    static const fanhub_consumer_desc_t desc = {FANHUB_CONSUMER_DESC_HEADER, __VA_ARGS__};         \
    FANHUB_CONSUMER_ENTRY (desc)

#ifdef __cplusplus
}
#endif

#endif
