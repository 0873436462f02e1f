/*  config - the hub's configuration, loaded from one YAML file.

    fh_config_load_* parse the file with libyaml into fh_config_t, checking
    every key: unknown keys, wrong types, out-of-range values, duplicate
    consumer names, empty or invalid endpoint lists are all errors. An error
    is one line, "FILE:LINE:COL: message", naming the key (for example
    "hub.yaml:12:7: consumers[1].queue.capacity: expected a positive
    integer, got 'lots'"). The first error stops the load.

    Defaults live here and in config/fanhub.yaml, which documents every key
    and is compiled in as the default configuration (fh_config_default_yaml).
*/
#ifndef FH_CONFIG_H_INCLUDED
#define FH_CONFIG_H_INCLUDED

#include "options.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_DEFAULT_RCVHWM 100000
#define FH_DEFAULT_CONNECT_WARNING_MS 10000
#define FH_DEFAULT_QUEUE_CAPACITY 100000
#define FH_DEFAULT_SHUTDOWN_TIMEOUT_MS 10000
#define FH_DEFAULT_MAX_FRAMES 32
#define FH_DEFAULT_MAX_MESSAGE_BYTES (64u * 1024 * 1024)
#define FH_DEFAULT_METRICS_INTERVAL_MS 10000
#define FH_DEFAULT_MOKSHA_INTERVAL_MS 5000
#define FH_DEFAULT_RETRY_MAX_ATTEMPTS 5
#define FH_DEFAULT_RETRY_INITIAL_MS 100
#define FH_DEFAULT_RETRY_MAX_MS 30000
#define FH_DEFAULT_RETRY_JITTER_PERMILLE 200
#define FH_DEFAULT_MAX_PENDING 1000
#define FH_DEFAULT_MAX_CRASHES 3
/* Payload bytes held in memory: one consumer's queue, and all together. */
#define FH_DEFAULT_QUEUE_MAX_BYTES (64u * 1024 * 1024)
#define FH_DEFAULT_MEMORY_MAX_BYTES (256u * 1024 * 1024)
#define FH_MAX_MAX_PENDING 100000
#define FH_DEFAULT_CONSUME_TIMEOUT_MS 60000
#define FH_DEFAULT_SPOOL_SEGMENT_BYTES (64u * 1024 * 1024)
#define FH_DEFAULT_SPOOL_FSYNC_INTERVAL_MS 1000

/* queue.overflow: what a full queue does with a new message. */
typedef enum {
    FH_OVERFLOW_UNSET = -1,  /* resolved at load: spill with state_dir, else drop-newest */
    FH_OVERFLOW_BLOCK = 0,   /* the enqueuer waits (stalls every consumer) */
    FH_OVERFLOW_DROP_NEWEST, /* the new message is dropped, counted */
    FH_OVERFLOW_DROP_OLDEST, /* the oldest queued message is dropped, counted */
    FH_OVERFLOW_SPILL        /* the new message goes to the disk spool */
} fh_overflow_t;

typedef enum { FH_FSYNC_NEVER = 0, FH_FSYNC_INTERVAL, FH_FSYNC_ALWAYS } fh_fsync_t;

typedef struct {
    size_t max_attempts;     /* consume calls per message, first included */
    int64_t initial_ms;      /* delay before the first retry */
    int64_t max_ms;          /* cap of the doubling delay */
    int64_t jitter_permille; /* +- this share of each delay, at random */
} fh_retry_config_t;

typedef struct {
    char **items;
    size_t count;
} fh_strlist_t;

/* A consumer's `publish:` (publish.h): where the messages its plugin
   publishes go. Off when bind and connect are both empty and local false. */
typedef enum { FH_ENVELOPE_NONE = 0, FH_ENVELOPE_FEDMSG } fh_envelope_t;

typedef struct {
    fh_strlist_t bind;    /* endpoints the consumer's socket binds */
    fh_strlist_t connect; /* endpoints it connects to (a fedmsg-relay's inbound) */
    int envelope;         /* fh_envelope_t */
    struct {              /* sign: {cert, key}; off when key is NULL */
        char *cert, *key;
    } sign;
    bool local;   /* this hub's consumers get them too */
    size_t queue; /* messages held for a peer: SNDHWM, and while no subscriber */
} fh_publish_config_t;

#define FH_DEFAULT_PUBLISH_QUEUE 1000

typedef struct {
    char *name;          /* unique among consumers; [A-Za-z0-9_.-]+ */
    char *plugin;        /* shipped plugin name, or a path (has a '/') */
    fh_strlist_t topics; /* patterns; count 0 = every message */
    size_t queue_capacity;
    size_t warn_at;         /* queue.warn_at: backlog warning, 0 = none */
    int overflow;           /* queue.overflow: fh_overflow_t, never UNSET after load */
    size_t spool_max_bytes; /* queue.spool_max_bytes, 0 = no cap */
    size_t queue_max_bytes; /* queue.max_bytes: payload held in memory, 0 = no cap */
    fh_retry_config_t retry;
    int64_t consume_timeout_ms; /* 0 = never reported stuck */
    size_t workers;             /* threads calling consume, >= 1 */
    char *order_by;           /* "topic", "topic_segment:K", "frame:K", "json:/ptr"; NULL = none */
    bool coalesce;            /* replace a queued message of the same key */
    fanhub_option_t *options; /* always a map, possibly empty */
    char *where;              /* "FILE:LINE:COL" of the consumer's entry */
    size_t max_pending;       /* messages a plugin may hold FANHUB_PENDING at once */
    bool write_ahead;         /* queue.write_ahead: with spill and a state_dir,
                             every message goes through the spool */
    size_t max_crashes;       /* a spooled message that crashed the hub this many
                             times is dead-lettered at the next start */
    struct {                  /* shard: {index, count}; count 0 = no shard (shard.h) */
        size_t index, count;
    } shard;
    fh_publish_config_t publish; /* publish:; off unless it names an endpoint */
    /* fedora_messaging: FILE, its config.toml normalised (config_fedora.c;
       fm_config.py says the shape); NULL for any other consumer. */
    struct json_t *fedora_messaging;
} fh_consumer_config_t;

typedef struct {
    int64_t interval_ms;                    /* metrics.interval: span of "interval"
                                     figures and collectd's interval */
    char *collectd_socket;                  /* metrics.collectd.socket, or NULL */
    int64_t collectd_interval_ms;           /* metrics.collectd.interval, or 0 = interval_ms */
    int64_t collectd_disconnected_after_ms; /* metrics.collectd.disconnected_after, 0 = 10 s */
    char *prometheus_listen;                /* metrics.prometheus.listen HOST:PORT, or NULL */
    char *moksha_socket;                    /* metrics.moksha_socket endpoint, or NULL */
    int64_t moksha_interval_ms;             /* metrics.moksha_interval */
} fh_metrics_config_t;

typedef struct {
    char *source;                /* file name, or "<default>" for the embedded one */
    char *name;                  /* optional hub name (`name:`), else NULL */
    fh_strlist_t connect;        /* bus.connect */
    fh_strlist_t bind;           /* bus.bind; connect + bind together not empty */
    int rcvhwm;                  /* bus.rcvhwm, >= 0 (0 = no limit) */
    int64_t connect_warning_ms;  /* bus.connect_warning; 0 = no warning */
    size_t max_frames;           /* bus.max_frames, >= 2 */
    size_t max_message_bytes;    /* bus.max_message_bytes, > 0 */
    char *control;               /* control endpoint, resolved (never NULL) */
    int64_t shutdown_timeout_ms; /* shutdown_timeout, in seconds in YAML */
    char *state_dir;             /* state_dir: spools and dead letters; NULL = none */
    size_t memory_max_bytes;     /* memory.max_bytes: payload all queues hold, 0 = no cap */
    struct {
        int fsync; /* fh_fsync_t */
        int64_t fsync_interval_ms;
        size_t segment_bytes;
    } spool;
    int log_level;        /* fanhub_log_level_t */
    fh_strlist_t publish; /* bus.publish: where emitted messages also go */
    struct {              /* bus.gap_detection; off when counter is NULL */
        char *counter;    /* top-level JSON member holding the producer's counter */
        char *producer;   /* "topic", "topic_prefix:N" or "json:/pointer" */
        size_t max_producers;
    } gaps;
    struct {                     /* bus.curve; off when secret_key_file is NULL */
        char *secret_key_file;   /* zcert secret file, mode 0600 */
        char public_key[41];     /* Z85, read from the file at load */
        char secret_key[41];     /* Z85: never logged nor shown */
        char *server_public_key; /* Z85: the publishers' key, for bus.connect */
        fh_strlist_t allow;      /* Z85 client keys let in on bind and publish */
        char *allow_dir;         /* zcert directory of client keys, or NULL */
    } curve;
    fh_strlist_t allow_ip;     /* bus.allow_ip: peer addresses let in; none = any */
    size_t max_peers;          /* bus.max_peers per bind endpoint; 0 = from the
                                    descriptor limit */
    struct {                   /* control_curve; off when secret_key_file is NULL */
        char *secret_key_file; /* the control socket's zcert secret file, 0600 */
        char public_key[41];   /* Z85, read from the file at load */
        char secret_key[41];   /* Z85: never logged nor shown */
        fh_strlist_t allow;    /* Z85 client keys let in */
        char *allow_dir;       /* zcert directory of client keys, or NULL */
        char *client_key_file; /* the pair `fanhub stats -c` and the other
                                     clients use; let in too; or NULL */
        char client_public_key[41];
        char client_secret_key[41];
    } control_curve;
    bool control_insecure;       /* control_insecure: a tcp control endpoint
                                     off loopback without CURVE, knowingly */
    fanhub_option_t *amqp;       /* bus.amqp, checked by source_amqp.h; or NULL */
    fanhub_option_t *signatures; /* bus.validate_signatures, checked by
                                    fedmsg_settings.h; or NULL (off) */
    fh_metrics_config_t metrics;
    fh_consumer_config_t *consumers; /* the main file's, then the drop-ins' */
    size_t consumer_count;           /* >= 1 */
    fh_strlist_t include;            /* include: as written (files and globs) */
    fh_strlist_t dropins;            /* the drop-in files read, in order */
    fh_strlist_t warnings;           /* "FILE:LINE:COL: ..." lines check and run show */
} fh_config_t;

/* The embedded default configuration (config/fanhub.yaml) and its length. */
extern const char fh_config_default_yaml[];
extern const size_t fh_config_default_yaml_len;

/* The one rule for consumer names, the hub's and the dead-letter CLI's:
   1 to 64 of A-Z a-z 0-9 _ . -, not starting with '.' (a consumer's name
   is a directory under state_dir). A hub's name follows the same rule
   but may start with '.'. */
bool fh_config_name_valid (const char *text);
bool fh_config_hub_name_valid (const char *text);

/* Loads a file. On error returns NULL and writes the message to err. */
fh_config_t *fh_config_load_file (const char *path, char *err, size_t errlen);
/* Where the Python runner is (its worker-python/ folder), for reading a
   consumer's fedora_messaging: file; before loading. Default:
   $FANHUB_PLUGIN_DIR. config_fedora.c. */
void fh_config_set_plugin_dir (const char *dir);
/* Loads YAML text; `source` names it in error messages. */
fh_config_t *fh_config_load_string (const char *text, size_t len, const char *source, char *err,
                                    size_t errlen);
/* fh_config_load_file for a control client (`fanhub stats`, `reload`,
   `collectd`), the file read once: when it does not load (an edit half
   done), err says why and, when control_only is given, what the client
   can still make of it: its top-level `control`, or the default endpoint
   of its `name` (fh_config_control_only), in a config that holds only
   source and control, with *control_only set. */
fh_config_t *fh_config_load_for_control (const char *path, bool *control_only, char *err,
                                         size_t errlen);
/* The top-level control endpoint of a YAML text (source names it) that
   does not load as a configuration, read from the YAML alone, ${VAR}
   expanded: `control:`, else the default of `name:`. NULL when the YAML
   does not parse, has a key twice, a ${VAR} unset, control_curve (its
   keys need a file that loads), or a control endpoint that is not
   ipc://PATH or tcp:// on loopback (off loopback needs the file's own
   checks). */
fh_config_t *fh_config_control_only (const char *text, size_t len, const char *source);
/* A control endpoint as a client gives it (-e): ipc://PATH or
   tcp://HOST:PORT. NULL when valid, else a static reason. */
const char *fh_config_control_check (const char *endpoint);
/* Safe with NULL and twice; nulls *self_p. */
void fh_config_destroy (fh_config_t **self_p);

/* A reload's question, answered from the tables that parse the file:
   the keys outside consumers: that differ between running and next and
   that a running hub cannot change (every key but log_level and
   shutdown_timeout), written to out as "bus.max_frames, bus.rcvhwm".
   Returns how many. */
size_t fh_config_restart_keys (const fh_config_t *running, const fh_config_t *next, char *out,
                               size_t outlen);
/* True when consumer configurations a and b differ at most in keys a
   running instance takes live (topics, queue.warn_at). */
bool fh_config_consumer_same (const fh_consumer_config_t *a, const fh_consumer_config_t *b);

/* Checks a ZeroMQ endpoint as the config accepts it: tcp://HOST:PORT
   (HOST may be '*' and PORT '*' when binding), ipc://PATH, inproc://NAME.
   Returns NULL when valid, else a static reason. */
const char *fh_endpoint_check (const char *endpoint, bool for_bind);
/* Splits addr, the part of tcp://HOST:PORT after "tcp://": answers NULL
   and sets host (host_len bytes, without brackets) and port, or answers
   a static reason. */
const char *fh_endpoint_tcp_split (const char *addr, const char **host, size_t *host_len,
                                   const char **port);

#endif
