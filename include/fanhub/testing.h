/*  fanhub/testing.h - a fake host, to unit-test a consumer plugin without
    a hub (libfanhub-testing.a; pkg-config fanhub-testing, or the CMake
    target fanhub::testing).

    A plugin's init, check and consume get a host table (fanhub/consumer.h);
    here it is fanhub_fake_host, whose options and messages are plain
    structs that a test writes as literals. Options are read against the
    plugin's option table by the hub's own reader (the same code, compiled
    into this library), so a test sees the values and the errors the hub
    would give, FILE:LINE:COL included.

      fanhub_option_t   kind, key (as an entry of a map), text (scalars),
                        where ("FILE:LINE:COL", for messages), items and
                        count (lists and maps); FANHUB_FAKE_SCALAR, _LIST
                        and _MAP write one
      fanhub_msg_t      up to four frames (topic, body, more), seq and the
                        receive time; fanhub_fake_msg writes the first two
      fanhub_ctx_t      what the plugin logged (the count of lines, the
                        last one, all of them) and its last set_reason,
                        under a lock: plugins may log from their own
                        threads. desc is the descriptor whose option table
                        options_load reads (NULL: the plugin that
                        fanhub_fake_plugin_load loaded last)

    The host functions are exported one by one too, so that a test can
    build a table of its own (with msg_ticket and complete, say) around
    them. Nothing here is thread-safe but what the ctx lock guards.
*/
#ifndef FANHUB_TESTING_H_INCLUDED
#define FANHUB_TESTING_H_INCLUDED

#include <fanhub/consumer.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fanhub_option {
    fanhub_option_kind_t kind;
    const char *key;  /* as an entry of a map */
    const char *text; /* scalars */
    const char *where;
    const struct fanhub_option *items; /* lists and maps */
    size_t count;
};

/* One option node, as an initializer. */
#define FANHUB_FAKE_SCALAR(key, text, where)                                                       \
    {                                                                                              \
        FANHUB_OPTION_SCALAR, (key), (text), (where), NULL, 0                                      \
    }
#define FANHUB_FAKE_LIST(key, items, count, where)                                                 \
    {                                                                                              \
        FANHUB_OPTION_LIST, (key), NULL, (where), (items), (count)                                 \
    }
#define FANHUB_FAKE_MAP(key, items, count, where)                                                  \
    {                                                                                              \
        FANHUB_OPTION_MAP, (key), NULL, (where), (items), (count)                                  \
    }

struct fanhub_msg {
    fanhub_bytes_t frames[4];
    size_t nframes;
    uint64_t seq;
    int64_t ns; /* received_ns */
};

struct fanhub_ctx {
    const char *name; /* consumer_name; NULL: "test" */
    bool skip_debug;  /* do not record FANHUB_LOG_DEBUG lines */
    pthread_mutex_t lock;
    int lines;                          /* lines logged */
    char last[1024];                    /* the last of them */
    char all[16384];                    /* all of them, each ending in '\n' (cut when full) */
    char reason[256];                   /* the last host->set_reason (under the lock) */
    int published;                      /* host->publish calls (ABI 1.5), under the lock */
    char published_topic[256];          /* the last one's topic (cut to fit) */
    size_t published_size;              /* and its body's size */
    size_t window;                      /* the last host->set_window (ABI 1.5) */
    int started;                        /* host->ticket_started calls (ABI 1.5) */
    const fanhub_consumer_desc_t *desc; /* options_load's table; NULL: the
                                           plugin fanhub_fake_plugin_load loaded */
    struct fh_plugin_metrics *metrics;  /* host->metric_new's (ABI 1.6): read
                                           with fanhub_fake_host_metric */
};

/* The host table: every function of ABI 1.4 but msg_ticket and complete
   (a plugin that answers FANHUB_PENDING needs a table of its own), and
   ABI 1.5's publish, set_window and ticket_started, which record the
   call in the ctx (publish answers 0), and ABI 1.6's metric_new,
   metric_add and metric_set, the hub's own (the same names refused). */
extern const fanhub_host_t fanhub_fake_host;

/* The descriptor fanhub_fake_plugin_load loaded last (a test may set it). */
extern const fanhub_consumer_desc_t *fanhub_fake_host_loaded;

/* A context that has logged nothing, named "test". */
void fanhub_fake_ctx_init (fanhub_ctx_t *ctx);

/* A message of two frames, topic and body (not copied). */
fanhub_msg_t fanhub_fake_msg (const void *topic, size_t topic_size, const void *body,
                              size_t body_size, uint64_t seq, int64_t ns);

/* Loads a plugin as the hub does (dlopen RTLD_NOW | RTLD_LOCAL, then its
   entry): its descriptor, with the handle in *dl (dlclose it when done);
   NULL with the reason printed on stderr. */
const fanhub_consumer_desc_t *fanhub_fake_plugin_load (const char *path, void **dl);

/* A test group's plugin, as its setup makes it and its teardown ends it:
   the descriptor and handle of fanhub_fake_plugin_load, and a new
   directory for what the plugin writes. */
typedef struct {
    const fanhub_consumer_desc_t *desc;
    void *dl;
    char dir[256]; /* $TMPDIR (else /tmp)/NAME-XXXXXX */
} fanhub_fake_plugin_t;

/* Loads the plugin at path and makes plugin->dir, named after name: 0, or
   -1 with the reason on stderr (what a cmocka group setup returns). */
int fanhub_fake_plugin_open (fanhub_fake_plugin_t *plugin, const char *path, const char *name);

/* dlclose, and plugin->dir removed with all below it. */
void fanhub_fake_plugin_close (fanhub_fake_plugin_t *plugin);

/* One case of a plugin's options: init with options (a map) refuses with
   exactly the message expected, leaving its state NULL, or, expected
   NULL, accepts (fini is then called). 0 when it did; else -1 and what
   it did instead in got. */
int fanhub_fake_option_case (const fanhub_consumer_desc_t *desc, fanhub_ctx_t *ctx,
                             const fanhub_option_t *options, const char *expected, char *got,
                             size_t got_size);

/* The functions of fanhub_fake_host. */
void fanhub_fake_host_log (fanhub_ctx_t *ctx, fanhub_log_level_t level, const char *fmt, ...)
    FANHUB_PRINTF (3, 4);
const char *fanhub_fake_host_consumer_name (fanhub_ctx_t *ctx);
fanhub_option_kind_t fanhub_fake_host_option_kind (const fanhub_option_t *node);
const fanhub_option_t *fanhub_fake_host_option_get (const fanhub_option_t *map, const char *key);
const char *fanhub_fake_host_option_scalar (const fanhub_option_t *node);
size_t fanhub_fake_host_option_count (const fanhub_option_t *node);
const fanhub_option_t *fanhub_fake_host_option_at (const fanhub_option_t *node, size_t i,
                                                   const char **key);
const char *fanhub_fake_host_option_where (const fanhub_option_t *node);
fanhub_bytes_t fanhub_fake_host_msg_topic (const fanhub_msg_t *msg);
fanhub_bytes_t fanhub_fake_host_msg_body (const fanhub_msg_t *msg);
size_t fanhub_fake_host_msg_frame_count (const fanhub_msg_t *msg);
fanhub_bytes_t fanhub_fake_host_msg_frame (const fanhub_msg_t *msg, size_t i);
uint64_t fanhub_fake_host_msg_seq (const fanhub_msg_t *msg);
int64_t fanhub_fake_host_msg_received_ns (const fanhub_msg_t *msg);
int fanhub_fake_host_options_read (fanhub_ctx_t *ctx, const fanhub_consumer_desc_t *desc,
                                   const fanhub_option_t *options, void *values, size_t values_size,
                                   char *err, size_t errlen);
int fanhub_fake_host_options_load (fanhub_ctx_t *ctx, const fanhub_option_t *options, void *values,
                                   size_t values_size, char *err, size_t errlen);
void fanhub_fake_host_set_reason (fanhub_ctx_t *ctx, const char *fmt, ...) FANHUB_PRINTF (2, 3);
int fanhub_fake_host_publish (fanhub_ctx_t *ctx, const char *topic, const void *body, size_t size);
void fanhub_fake_host_set_window (fanhub_ctx_t *ctx, size_t n);
void fanhub_fake_host_ticket_started (fanhub_ctx_t *ctx, fanhub_ticket_t ticket);
fanhub_metric_t *fanhub_fake_host_metric_new (fanhub_ctx_t *ctx, const char *name, int kind,
                                              const char *help, char *err, size_t errlen);
/* The value of the metric the plugin registered as name (ABI 1.6), or
   INT64_MIN when it registered none of that name. */
int64_t fanhub_fake_host_metric (fanhub_ctx_t *ctx, const char *name);

#ifdef __cplusplus
}
#endif

#endif
