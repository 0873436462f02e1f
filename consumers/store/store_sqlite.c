/*  store_sqlite - the store consumer's SQLite backend.

    The database runs in WAL mode with synchronous=NORMAL: a commit is one
    append to the log without an fsync, so a batch survives a crash of the
    hub but its last commits may be lost to a power failure (SQLite's own
    trade-off for WAL; readers never block the writer). A batch is one
    BEGIN IMMEDIATE ... COMMIT, which takes the write lock up front, so
    another writer makes the batch wait (busy timeout) or fail as a whole,
    never part way.

    The schema is the one of docs/plugins/store.md with SQLite's types:
    received_at is ISO 8601 text in UTC, which sorts in time order and which
    SQLite's date functions read; body_json keeps the JSON text byte for
    byte.
*/
#include "store_db.h"

#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a batch waits for another writer's lock before it fails (and
   is tried again later). */
#define STORE_SQLITE_BUSY_MS 2000
/* SQLITE_MAX_LENGTH as SQLite is built by default (and by Debian). */
#define STORE_SQLITE_MAX_ROW 1000000000

struct store_db {
    sqlite3 *db;
    sqlite3_stmt *insert;
};

static void
s_why_db (char *why, size_t whylen, sqlite3 *db, const char *what)
{
    char prefix[128];
    snprintf (prefix, sizeof prefix, "%s: ", what);
    store_db_why (why, whylen, prefix, db ? sqlite3_errmsg (db) : "out of memory");
}

static void
s_close (store_db_t **db_p)
{
    store_db_t *self = *db_p;
    if (!self)
        return;
    sqlite3_finalize (self->insert);
    sqlite3_close (self->db);
    free (self);
    *db_p = NULL;
}

/* A failure that may pass: the database busy, an I/O error, a full disk. */
static bool
s_passing (int rc)
{
    return (rc & 0xFF) == SQLITE_BUSY || (rc & 0xFF) == SQLITE_IOERR || (rc & 0xFF) == SQLITE_FULL;
}

/* WAL mode, or why not. journal_mode answers the mode it ended up in: a
   database that cannot do WAL (":memory:", some network file systems)
   says so here. */
static int
s_use_wal (store_db_t *self, char *why, size_t whylen, bool *retry_can_help)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db, "PRAGMA journal_mode = WAL", -1, &stmt, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step (stmt);
    if (rc != SQLITE_ROW) {
        s_why_db (why, whylen, self->db, "cannot set WAL mode");
        *retry_can_help = s_passing (rc);
        sqlite3_finalize (stmt);
        return -1;
    }
    const char *mode = (const char *) sqlite3_column_text (stmt, 0);
    int ok = mode && strcmp (mode, "wal") == 0;
    if (!ok)
        snprintf (why, whylen, "cannot use WAL mode (journal mode is %s)", mode ? mode : "unknown");
    sqlite3_finalize (stmt);
    return ok ? 0 : -1;
}

/* The table (docs/plugins/store.md) and the prepared insert. */
static int
s_prepare (store_db_t *self, const char *table, char *why, size_t whylen, bool *retry_can_help)
{
    char sql[2048];
    snprintf (sql, sizeof sql,
              "PRAGMA synchronous = NORMAL;"
              "CREATE TABLE IF NOT EXISTS \"%1$s\" ("
              " id INTEGER PRIMARY KEY,"
              " run INTEGER NOT NULL,"
              " seq INTEGER NOT NULL,"
              " topic TEXT NOT NULL,"
              " received_at TEXT NOT NULL,"
              " msg_id TEXT,"
              " body_json TEXT,"
              " body_text TEXT,"
              " body_bytes BLOB,"
              " CONSTRAINT \"%1$s_one_body\" CHECK ((body_json IS NOT NULL)"
              " + (body_text IS NOT NULL) + (body_bytes IS NOT NULL) = 1),"
              " CONSTRAINT \"%1$s_msg_id_key\" UNIQUE (msg_id),"
              " CONSTRAINT \"%1$s_run_seq_key\" UNIQUE (run, seq));"
              "CREATE INDEX IF NOT EXISTS \"%1$s_topic_idx\""
              " ON \"%1$s\" (topic);"
              "CREATE INDEX IF NOT EXISTS \"%1$s_received_at_idx\""
              " ON \"%1$s\" (received_at);",
              table);
    int rc = sqlite3_exec (self->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        s_why_db (why, whylen, self->db, "cannot create the schema");
        *retry_can_help = s_passing (rc);
        return -1;
    }
    /* ON CONFLICT DO NOTHING rather than INSERT OR IGNORE: OR IGNORE would
       also skip a row that breaks the CHECK, silently. */
    snprintf (sql, sizeof sql,
              "INSERT INTO \"%s\" (run, seq, topic, received_at, msg_id,"
              " body_json, body_text, body_bytes)"
              " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
              " ON CONFLICT DO NOTHING",
              table);
    rc = sqlite3_prepare_v3 (self->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &self->insert, NULL);
    if (rc != SQLITE_OK) {
        /* Mostly a table of that name made by something else. */
        s_why_db (why, whylen, self->db, "cannot prepare the insert");
        return -1;
    }
    return 0;
}

static store_db_t *
s_open (const char *path, const char *password, const char *table, char *why, size_t whylen,
        bool *retry_can_help)
{
    (void) password; /* store.c allows it with postgres only */
    *retry_can_help = false;
    store_db_t *self = (store_db_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (why, whylen, "out of memory");
        *retry_can_help = true;
        return NULL;
    }
    /* NOMUTEX: store.c serialises every use of the connection. No URI
       parsing: the option is a file name. */
    int rc = sqlite3_open_v2 (
        path, &self->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        s_why_db (why, whylen, self->db, "cannot open");
        /* A missing directory or a permission is a configuration error;
           anything else (a full disk, I/O) may pass. */
        *retry_can_help = rc != SQLITE_CANTOPEN && rc != SQLITE_PERM && rc != SQLITE_READONLY
                          && rc != SQLITE_NOTADB;
        s_close (&self);
        return NULL;
    }
    sqlite3_extended_result_codes (self->db, 1);
    sqlite3_busy_timeout (self->db, STORE_SQLITE_BUSY_MS);
    if (s_use_wal (self, why, whylen, retry_can_help) != 0
        || s_prepare (self, table, why, whylen, retry_can_help) != 0) {
        s_close (&self);
        return NULL;
    }
    return self;
}

/* Runs one statement without results; 0 or the SQLite code. */
static int
s_exec (store_db_t *self, const char *sql)
{
    return sqlite3_exec (self->db, sql, NULL, NULL, NULL);
}

/* Errors that belong to one row rather than to the database. */
static bool
s_row_error (int rc)
{
    switch (rc & 0xFF) {
    case SQLITE_TOOBIG:
    case SQLITE_MISMATCH:
    case SQLITE_CONSTRAINT:
    case SQLITE_RANGE: return true;
    }
    return false;
}

static int
s_bind (sqlite3_stmt *stmt, int64_t run, const store_row_t *row)
{
    /* reset answers the previous step's error, which was handled then. */
    sqlite3_reset (stmt);
    sqlite3_clear_bindings (stmt);
    int rc;
    if ((rc = sqlite3_bind_int64 (stmt, 1, run))
        || (rc = sqlite3_bind_int64 (stmt, 2, (sqlite3_int64) row->seq))
        || (rc = sqlite3_bind_text (stmt, 3, row->topic, (int) row->topic_size, SQLITE_STATIC))
        || (rc = sqlite3_bind_text (stmt, 4, row->received_at, -1, SQLITE_STATIC)))
        return rc;
    if (row->msg_id && (rc = sqlite3_bind_text (stmt, 5, row->msg_id, -1, SQLITE_STATIC)))
        return rc;
    /* The copy is never a NULL pointer, so an empty body binds as an empty
       value rather than as NULL. */
    if (row->kind == STORE_BODY_BYTES)
        return sqlite3_bind_blob64 (stmt, 8, row->body, row->body_size, SQLITE_STATIC);
    return sqlite3_bind_text64 (stmt, row->kind == STORE_BODY_JSON ? 6 : 7, row->body,
                                row->body_size, SQLITE_STATIC, SQLITE_UTF8);
}

static store_db_rc_t
s_write (store_db_t *self, int64_t run, const store_row_t *rows, size_t n, size_t *bad,
         size_t *inserted, char *why, size_t whylen)
{
    *inserted = 0;
    int rc = s_exec (self, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) {
        s_why_db (why, whylen, self->db, "BEGIN");
        return STORE_DB_BROKEN;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        rc = s_bind (self->insert, run, &rows[i]);
        if (rc == SQLITE_OK)
            rc = sqlite3_step (self->insert);
        if (rc == SQLITE_DONE) {
            count += (size_t) sqlite3_changes (self->db);
            continue;
        }
        s_why_db (why, whylen, self->db, "INSERT");
        sqlite3_reset (self->insert);
        s_exec (self, "ROLLBACK");
        if (s_row_error (rc)) {
            *bad = i;
            return STORE_DB_ROW_ERROR;
        }
        return STORE_DB_BROKEN;
    }
    sqlite3_reset (self->insert);
    sqlite3_clear_bindings (self->insert);
    rc = s_exec (self, "COMMIT");
    if (rc != SQLITE_OK) {
        s_why_db (why, whylen, self->db, "COMMIT");
        s_exec (self, "ROLLBACK");
        return STORE_DB_BROKEN;
    }
    *inserted = count;
    return STORE_DB_OK;
}

static int
s_check_target (const char *path, char *why, size_t whylen)
{
    /* Both would lose everything at exit, silently. */
    if (strcmp (path, ":memory:") == 0 || strncmp (path, "file:", 5) == 0) {
        snprintf (why, whylen, "expected the path of a database file, got \"%s\"", path);
        return -1;
    }
    return 0;
}

static int
s_check_row (const store_row_t *row, char *why, size_t whylen)
{
    /* SQLite's default SQLITE_MAX_LENGTH bounds a row as well as a value. */
    size_t size = row->topic_size + row->body_size + (row->msg_id ? strlen (row->msg_id) : 0) + 256;
    if (size > STORE_SQLITE_MAX_ROW) {
        snprintf (why, whylen, "%zu bytes, more than SQLite's row limit of %d bytes", size,
                  STORE_SQLITE_MAX_ROW);
        return -1;
    }
    return 0;
}

const store_backend_t store_sqlite_backend = {
    .name = "SQLite",
    .open = s_open,
    .check_target = s_check_target,
    .check_row = s_check_row,
    .write = s_write,
    .close = s_close,
};
