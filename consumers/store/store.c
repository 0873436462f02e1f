/*  store - the shipped consumer that archives every message in a database,
    the way datanommer archives fedmsg: SQLite for a single machine,
    PostgreSQL for production.

    Each message becomes one row (the schema is in docs/plugins/store.md):
    the hub's run and sequence number, topic, receive time, the body in one
    of three columns (body_json when it is JSON, body_text when it is other
    UTF-8 text, body_bytes otherwise) and msg_id when the body is a JSON
    object with a string "msg_id" member.

    Options (exactly one of sqlite and postgres):
        sqlite    path of an SQLite database file, created when missing
        postgres  a libpq conninfo ("host=db dbname=archive" or a URI)
        password_file  with postgres: a file holding the password (its
                  first line), refused when its group or others may read it
        password_env   with postgres: the environment variable holding the
                  password (so that the YAML holds no secret; neither is
                  ever logged)
        table     the table's name, default "messages"
        batch     1..100000, default 500: rows per transaction
        batch_ms  0..3600000, default 200: the longest a row waits for its
                  batch to be committed while messages keep coming

    Batching, and what an answer means. consume copies the message into the
    open batch and answers FANHUB_PENDING (ABI 1.1). The batch is written
    and committed in one transaction when it holds `batch` rows (or
    STORE_BATCH_BYTES of them), when batch_ms has passed since its first
    row, when the hub calls idle (its queue ran empty, or max_pending
    messages are open) and at fini; after the COMMIT every row of the batch
    is completed with host->complete (FANHUB_OK). So the hub counts a
    message done only once it is committed: until then its spool record
    stays, and a crash or kill of the hub loses no row the spool had. (On
    a 1.0 host, without host->complete, it answers FANHUB_OK at once, and a
    crash loses at most the open batch.) When the write fails the batch
    stays in memory, whole, and the message that triggered the write is
    handed back with FANHUB_RETRY;
    until a write works again, consume answers FANHUB_RETRY at once (the
    hub keeps those messages), reconnecting with a backoff and writing the
    kept batch first. With batch 1 or batch_ms 0 every write happens inside
    consume, so OK means committed. Writing a batch again after a commit
    whose answer was lost stores nothing twice: each row is skipped when its
    msg_id or its (run, seq) is already stored. A message that the database
    can never store is answered FANHUB_FAIL with the reason logged.

    consume is thread-safe: one mutex guards the batch and the connection
    (the database is one connection anyway).
*/
#include <fanhub/consumer.h>
#include <fanhub/sdk.h>

#include "store_db.h"
#include "store_options.h"

#include <jansson.h>

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <sys/stat.h>

/* A batch is also written when its rows hold this many bytes, so that a
   run of large messages does not pile up in memory. */
#define STORE_BATCH_BYTES (16 * 1024 * 1024)
/* The longest msg_id taken; a longer one is not used as a key. */
#define STORE_MSG_ID_MAX 1024
/* Reconnection backoff while the database is unavailable. */
#define STORE_BACKOFF_MIN_NS (100 * 1000000LL)
#define STORE_BACKOFF_MAX_NS (2000 * 1000000LL)
/* At most one "cannot store" line per this interval. */
#define STORE_REJECT_LOG_NS (10 * 1000000000LL)

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    const store_backend_t *backend;
    char *target;   /* path or conninfo; a conninfo is never logged */
    char *password; /* from password_file or password_env, or NULL */
    char table[STORE_TABLE_MAX + 1];
    size_t batch;
    int64_t batch_ns;
    int64_t run;

    pthread_mutex_t lock; /* guards everything below */
    store_db_t *db;       /* NULL when not connected */
    store_row_t *rows;    /* the open batch; room for `batch` rows */
    size_t count;
    size_t bytes;
    int64_t first_ns;    /* CLOCK_MONOTONIC ns of the batch's first row */
    bool broken;         /* the last write or connection failed */
    int64_t next_try_ns; /* when broken: the next reconnection */
    int64_t backoff_ns;
    uint64_t retried;     /* RETRY answers since it broke */
    uint64_t current_seq; /* the message consume is handling */
    bool in_consume;
    bool current_dropped; /* s_drop_row took the current message */

    uint64_t stored;     /* rows inserted */
    uint64_t duplicates; /* rows skipped as already stored */
    uint64_t rejected;   /* FAIL answers */
    uint64_t lost;       /* rows answered OK and then dropped */
    bool async;          /* the host has complete: answer PENDING */
    int64_t reject_log_ns;
    uint64_t rejects_unlogged;
} store_state_t;

/* What logs call the database: the file for SQLite; for PostgreSQL only
   the word, since a conninfo may hold a password. */
static const char *
s_display (const store_state_t *self)
{
    return self->backend == &store_sqlite_backend ? self->target : "PostgreSQL";
}

static char *
s_copy (const void *data, size_t size)
{
    char *copy = (char *) malloc (size + 1);
    if (copy) {
        if (size)
            memcpy (copy, data, size);
        copy[size] = '\0';
    }
    return copy;
}

static void
s_row_free (store_row_t *row)
{
    free (row->topic);
    free (row->body);
    free (row->msg_id);
    memset (row, 0, sizeof *row);
}

/* Sorts the body into its column and finds its msg_id. JSON is any JSON
   text (RFC 8259, a scalar too) that jansson reads without its extensions:
   no \u0000, integers within 64 bits. */
static void
s_classify (store_row_t *row)
{
    row->kind = STORE_BODY_BYTES;
    if (memchr (row->body, '\0', row->body_size) || !fanhub_utf8_valid (row->body, row->body_size))
        return;
    row->kind = STORE_BODY_TEXT;
    json_error_t error;
    json_t *root = json_loadb (row->body, row->body_size, JSON_DECODE_ANY, &error);
    if (!root)
        return;
    row->kind = STORE_BODY_JSON;
    json_t *id = json_object_get (root, "msg_id"); /* NULL unless object */
    if (json_is_string (id)) {
        size_t size = json_string_length (id);
        /* An empty msg_id would make every other empty one a duplicate. */
        if (size > 0 && size <= STORE_MSG_ID_MAX)
            row->msg_id = s_copy (json_string_value (id), size);
    }
    json_decref (root);
}

/* Builds the plugin's own copy of a message; -1 when out of memory. */
static int
s_row_make (store_state_t *self, const fanhub_msg_t *msg, store_row_t *row)
{
    const fanhub_host_t *host = self->host;
    fanhub_bytes_t topic = host->msg_topic (msg);
    fanhub_bytes_t body = host->msg_body (msg);
    memset (row, 0, sizeof *row);
    row->seq = host->msg_seq (msg);
    /* Microseconds, truncated towards the past, as PostgreSQL's
       timestamptz keeps them. */
    fanhub_rfc3339 (row->received_at, host->msg_received_ns (msg), 6);
    row->topic = s_copy (topic.data, topic.size);
    row->topic_size = topic.size;
    row->body = s_copy (body.data, body.size);
    row->body_size = body.size;
    if (!row->topic || !row->body) {
        s_row_free (row);
        return -1;
    }
    s_classify (row);
    return 0;
}

static void
s_clear_rows (store_state_t *self)
{
    for (size_t i = 0; i < self->count; i++)
        s_row_free (&self->rows[i]);
    self->count = 0;
    self->bytes = 0;
}

/* Logs why a message is answered FAIL, at most once per
   STORE_REJECT_LOG_NS: a publisher that sends nothing but such messages
   must not flood the log. */
static void
s_log_reject (store_state_t *self, const store_row_t *row, const char *why)
{
    int64_t now = fanhub_now_ns ();
    if (self->reject_log_ns && now - self->reject_log_ns < STORE_REJECT_LOG_NS) {
        self->rejects_unlogged++;
        return;
    }
    self->host->log (self->ctx, FANHUB_LOG_WARNING,
                     "message %llu cannot be stored in %s: %s (%llu more "
                     "not logged)",
                     (unsigned long long) row->seq, s_display (self), why,
                     (unsigned long long) self->rejects_unlogged);
    self->reject_log_ns = now;
    self->rejects_unlogged = 0;
}

/* The database refused rows[i] for its content: stores the body in a
   plainer column (JSON as text, text as bytes), and when it is bytes
   already, drops the row, loudly. */
static void
s_demote_row (store_state_t *self, size_t i, const char *why)
{
    static const char *const names[] = {"body_json", "body_text", "body_bytes"};
    store_row_t *row = &self->rows[i];
    if (row->kind != STORE_BODY_BYTES) {
        store_body_kind_t kind = (store_body_kind_t) (row->kind + 1);
        self->host->log (self->ctx, FANHUB_LOG_WARNING,
                         "message %llu: %s refused it with its body in %s "
                         "(%s); storing the body in %s",
                         (unsigned long long) row->seq, s_display (self), names[row->kind], why,
                         names[kind]);
        row->kind = kind;
        return;
    }
    self->host->log (self->ctx, FANHUB_LOG_ERROR,
                     "message %llu (%.200s): %s refused it (%s); dropped",
                     (unsigned long long) row->seq, row->topic, s_display (self), why);
    if (row->ticket) {
        /* Still the hub's: it fails (a dead letter), nothing is lost. */
        self->host->complete (self->ctx, row->ticket, FANHUB_FAIL);
        self->rejected++;
    }
    else if (self->in_consume && row->seq == self->current_seq)
        self->current_dropped = true;
    else
        self->lost++;
    self->bytes -= row->topic_size + row->body_size;
    s_row_free (row);
    memmove (&self->rows[i], &self->rows[i + 1], (self->count - i - 1) * sizeof *self->rows);
    self->count--;
}

/* Opens the connection; -1 with the reason in why. */
static int
s_connect (store_state_t *self, char *why, size_t whylen)
{
    if (self->db)
        return 0;
    bool retry_can_help;
    self->db = self->backend->open (self->target, self->password, self->table, why, whylen,
                                    &retry_can_help);
    return self->db ? 0 : -1;
}

/* Marks the database unavailable; logs the first failure of a streak. */
static void
s_set_broken (store_state_t *self, const char *why)
{
    self->backend->close (&self->db);
    int64_t now = fanhub_now_ns ();
    if (!self->broken) {
        char keeping[96] = "";
        if (self->count > 0)
            snprintf (keeping, sizeof keeping, "keeping %zu messages to write again, and ",
                      self->count);
        self->host->log (self->ctx, FANHUB_LOG_ERROR,
                         "%s: %s; %sanswering RETRY until the database is "
                         "back (logged once)",
                         s_display (self), why, keeping);
        self->broken = true;
        self->retried = 0;
        self->backoff_ns = STORE_BACKOFF_MIN_NS;
    }
    else {
        self->host->log (self->ctx, FANHUB_LOG_DEBUG, "%s: still failing: %s", s_display (self),
                         why);
        self->backoff_ns *= 2;
        if (self->backoff_ns > STORE_BACKOFF_MAX_NS)
            self->backoff_ns = STORE_BACKOFF_MAX_NS;
    }
    self->next_try_ns = now + self->backoff_ns;
}

/* Writes the open batch in one transaction. On success the batch is empty
   and the database no longer broken. On failure the batch is kept whole,
   the reason is in why and the caller calls s_set_broken. */
static int
s_flush (store_state_t *self, char *why, size_t whylen)
{
    if (s_connect (self, why, whylen))
        return -1;
    size_t held = self->count;
    while (self->count > 0) {
        size_t bad = 0, inserted = 0;
        store_db_rc_t rc = self->backend->write (self->db, self->run, self->rows, self->count, &bad,
                                                 &inserted, why, whylen);
        if (rc == STORE_DB_OK) {
            self->stored += inserted;
            self->duplicates += self->count - inserted;
            /* Committed: done, for the hub too. */
            for (size_t i = 0; i < self->count; i++)
                if (self->rows[i].ticket)
                    self->host->complete (self->ctx, self->rows[i].ticket, FANHUB_OK);
            s_clear_rows (self);
            break;
        }
        if (rc == STORE_DB_BROKEN)
            return -1;
        /* Each refusal makes a row plainer or removes it: this ends. */
        s_demote_row (self, bad < self->count ? bad : self->count - 1, why);
    }
    if (self->broken) {
        self->host->log (self->ctx, FANHUB_LOG_INFO,
                         "%s: available again; wrote the %zu kept messages, "
                         "answered RETRY to %llu meanwhile",
                         s_display (self), held, (unsigned long long) self->retried);
        self->broken = false;
    }
    return 0;
}

/* Writes the batch when there is one, or only connects; marks the
   database broken when that fails. */
static int
s_flush_or_break (store_state_t *self)
{
    char why[512];
    if (s_flush (self, why, sizeof why) == 0)
        return 0;
    s_set_broken (self, why);
    return -1;
}

/* While broken: tries again when the backoff allows. */
static int
s_recover (store_state_t *self)
{
    if (fanhub_now_ns () < self->next_try_ns)
        return -1;
    return s_flush_or_break (self);
}

static fanhub_result_t
s_consume_locked (store_state_t *self, const fanhub_msg_t *msg)
{
    if (self->broken && s_recover (self))
        return FANHUB_RETRY;
    /* A batch is written when full, and nothing is added while broken. */
    assert (self->count < self->batch);
    store_row_t *row = &self->rows[self->count];
    if (s_row_make (self, msg, row))
        return FANHUB_RETRY; /* out of memory: the hub keeps it */
    char reason[256];
    /* Both databases keep seq as a signed 64-bit integer; the hub counts
       from 1, so this is for a broken host only. */
    if (row->seq > INT64_MAX)
        snprintf (reason, sizeof reason, "its seq is above 2^63 - 1");
    if (row->seq > INT64_MAX || self->backend->check_row (row, reason, sizeof reason)) {
        s_log_reject (self, row, reason);
        s_row_free (row);
        self->rejected++;
        return FANHUB_FAIL;
    }
    int64_t now = fanhub_now_ns ();
    if (self->count == 0)
        self->first_ns = now;
    if (self->async)
        row->ticket = self->host->msg_ticket (msg);
    /* Answered at once, or later from the commit. */
    const fanhub_result_t added = row->ticket ? FANHUB_PENDING : FANHUB_OK;
    self->count++;
    self->bytes += row->topic_size + row->body_size;
    if (self->count < self->batch && self->bytes < STORE_BATCH_BYTES
        && now - self->first_ns < self->batch_ns)
        return added;

    self->current_seq = row->seq;
    self->current_dropped = false;
    self->in_consume = true;
    char why[512];
    int rc = s_flush (self, why, sizeof why);
    self->in_consume = false;
    if (rc && !self->current_dropped) {
        /* The batch stays for later; this message goes back to the hub.
           It is the last row: nothing is added while broken, and rows the
           database refused were taken out of the middle. */
        row = &self->rows[--self->count];
        self->bytes -= row->topic_size + row->body_size;
        s_row_free (row);
        s_set_broken (self, why);
        return FANHUB_RETRY;
    }
    if (rc)
        s_set_broken (self, why);
    if (self->current_dropped) {
        self->rejected++;
        return FANHUB_FAIL;
    }
    /* With a ticket it was completed by the commit (or failed) already. */
    return added;
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    store_state_t *self = (store_state_t *) state;
    pthread_mutex_lock (&self->lock);
    fanhub_result_t rc = s_consume_locked (self, msg);
    if (rc == FANHUB_RETRY)
        self->retried++;
    pthread_mutex_unlock (&self->lock);
    return rc;
}

static void
s_idle (void *state)
{
    store_state_t *self = (store_state_t *) state;
    pthread_mutex_lock (&self->lock);
    if (self->broken)
        s_recover (self);
    else if (self->count > 0)
        s_flush_or_break (self);
    pthread_mutex_unlock (&self->lock);
}

static void
s_destroy (store_state_t *self)
{
    s_clear_rows (self);
    self->backend->close (&self->db);
    pthread_mutex_destroy (&self->lock);
    free (self->rows);
    free (self->target);
    if (self->password) {
        memset (self->password, 0, strlen (self->password));
        free (self->password);
    }
    free (self);
}

static void
s_fini (void *state)
{
    store_state_t *self = (store_state_t *) state;
    pthread_mutex_lock (&self->lock);
    char why[512];
    if (self->count > 0 && s_flush (self, why, sizeof why)) {
        uint64_t low = self->rows[0].seq, high = low;
        for (size_t i = 0; i < self->count; i++) {
            if (self->rows[i].seq < low)
                low = self->rows[i].seq;
            if (self->rows[i].seq > high)
                high = self->rows[i].seq;
        }
        size_t held = 0; /* not done for the hub: it keeps them (spool) */
        for (size_t i = 0; i < self->count; i++)
            held += self->rows[i].ticket != 0;
        self->host->log (self->ctx, FANHUB_LOG_ERROR,
                         "%s: %zu messages (seq %llu to %llu) not stored at "
                         "shutdown: %s; %zu of them were never answered OK "
                         "(the hub keeps those), %zu are lost",
                         s_display (self), self->count, (unsigned long long) low,
                         (unsigned long long) high, why, held, self->count - held);
        self->lost += self->count - held;
    }
    self->host->log (self->ctx, FANHUB_LOG_INFO,
                     "%s: stored %llu messages, %llu already stored, %llu "
                     "refused, %llu lost",
                     s_display (self), (unsigned long long) self->stored,
                     (unsigned long long) self->duplicates, (unsigned long long) self->rejected,
                     (unsigned long long) self->lost);
    pthread_mutex_unlock (&self->lock);
    s_destroy (self);
}

/* A random positive 63-bit number naming this instance: (run, seq) is
   unique for every message it stores. */
static int64_t
s_random_run (void)
{
    uint64_t v = 0;
    if (getrandom (&v, sizeof v, 0) != (ssize_t) sizeof v) {
        struct timespec ts;
        clock_gettime (CLOCK_REALTIME, &ts);
        v = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
        v ^= (uint64_t) getpid () << 40;
    }
    v &= INT64_MAX;
    return v ? (int64_t) v : 1;
}

/* What init would refuse, found without opening the database: the options,
   and for SQLite, whether the file could be opened or created. A
   PostgreSQL server is not asked: one that cannot be reached is a passing
   state for init too (the consumer retries). */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, char *err,
         size_t errlen)
{
    store_options_t o;
    if (store_options_parse (host, ctx, options, &o, err, errlen))
        return -1;
    store_options_free (&o); /* read as init reads it, and forgotten at once */
    if (o.backend != &store_sqlite_backend)
        return 0;
    bool exists;
    char why[PATH_MAX + 128];
    if (fanhub_probe_file (o.target, &exists, why, sizeof why) != 0) {
        snprintf (err, errlen, "options.%s: %s: cannot open: %s (%s)", o.target_key, o.target, why,
                  host->option_where (o.target_node));
        return -1;
    }
    if (!exists)
        host->log (ctx, FANHUB_LOG_INFO, "%s does not exist yet; run creates it", o.target);
    return 0;
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options, void **state,
        char *err, size_t errlen)
{
    store_options_t o;
    if (store_options_parse (host, ctx, options, &o, err, errlen))
        return -1;
    const store_backend_t *backend = o.backend;
    const char *target = o.target;
    const fanhub_option_t *target_node = o.target_node;
    const char *target_key = o.target_key;
    const char *table = o.table;
    int64_t batch = o.batch;
    int64_t batch_ms = o.batch_ms;
    char why[512];

    store_state_t *self = (store_state_t *) calloc (1, sizeof *self);
    if (!self) {
        store_options_free (&o);
        snprintf (err, errlen, "store: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->backend = backend;
    snprintf (self->table, sizeof self->table, "%s", table);
    self->batch = (size_t) batch;
    self->batch_ns = (int64_t) batch_ms * 1000000;
    self->run = s_random_run ();
    self->async = FANHUB_HOST_HAS_COMPLETE (host);
    self->target = strdup (target);
    self->rows = (store_row_t *) calloc ((size_t) batch, sizeof *self->rows);
    if (!self->target || !self->rows || pthread_mutex_init (&self->lock, NULL) != 0) {
        store_options_free (&o);
        free (self->rows);
        free (self->target);
        free (self);
        snprintf (err, errlen, "store: out of memory");
        return -1;
    }
    self->password = o.password; /* ours now: s_destroy wipes it */

    /* The schema is made now, so that a database that refuses it (or a
       file that cannot be created) stops the hub at start. One that cannot
       be reached is a passing state, not a configuration error: the
       consumer starts and answers RETRY until it can connect. */
    bool retry_can_help = false;
    self->db
        = backend->open (target, self->password, self->table, why, sizeof why, &retry_can_help);
    if (!self->db && !retry_can_help) {
        snprintf (err, errlen, "options.%s: %s%s%s (%s)", target_key,
                  backend == &store_sqlite_backend ? target : "",
                  backend == &store_sqlite_backend ? ": " : "", why,
                  host->option_where (target_node));
        s_destroy (self);
        return -1;
    }
    if (!self->db)
        s_set_broken (self, why);
    else
        host->log (ctx, FANHUB_LOG_INFO, "%s: storing in table %s as run %lld", s_display (self),
                   self->table, (long long) self->run);
    *state = self;
    return 0;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "store", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .options = store_option_table, .idle = s_idle, .fini = s_fini,
                        .check = s_check)
