/*  store_db - the database side of the store consumer: one interface, two
    backends (SQLite and PostgreSQL).

    store.c owns the batch of rows and decides when to write it; a backend
    knows only how to open a connection (creating the schema and preparing
    the insert) and how to write a whole batch in one transaction. Keeping
    the transaction inside one call means no transaction is ever left open
    between two calls of the hub, so a connection that dies between calls
    costs nothing but a reconnect.

    Every insert ignores a row that conflicts with a unique constraint
    (msg_id, or run and seq): writing a batch again after a commit whose
    outcome is unknown stores each message once.
*/
#ifndef STORE_DB_H_INCLUDED
#define STORE_DB_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which body column a row fills; exactly one of the three is not NULL. */
typedef enum {
    STORE_BODY_JSON = 0,  /* body_json: valid JSON */
    STORE_BODY_TEXT = 1,  /* body_text: valid UTF-8 without NUL, not JSON */
    STORE_BODY_BYTES = 2, /* body_bytes: anything else */
} store_body_kind_t;

/* "YYYY-MM-DDTHH:MM:SS.ffffffZ" and its NUL. */
#define STORE_TIME_SIZE 28

/* One message as the plugin keeps it until its batch is committed. The
   strings are the plugin's own copies, each with a NUL after its bytes. */
typedef struct {
    uint64_t seq;
    char received_at[STORE_TIME_SIZE];
    char *topic;
    size_t topic_size;
    char *body;
    size_t body_size;
    char *msg_id; /* NULL when the body carries none */
    store_body_kind_t kind;
    uint64_t ticket; /* the hub's, for host->complete; 0 when answered at once */
} store_row_t;

typedef enum {
    STORE_DB_OK = 0,        /* the batch is committed */
    STORE_DB_ROW_ERROR = 1, /* rows[*bad] was refused for its content; the
                               transaction was rolled back */
    STORE_DB_BROKEN = 2,    /* anything else: nothing is known to be
                               committed; close and reconnect */
} store_db_rc_t;

typedef struct store_db store_db_t;

typedef struct {
    const char *name; /* "SQLite" or "PostgreSQL", for messages */
    /* Connects to target (a path or a conninfo), creates the schema of
       `table` when missing and prepares the insert. On failure returns NULL
       with a one-line reason in why; *retry_can_help is false when the
       database answered but refused (a schema that does not match, no
       permission), true when it could not be reached. password, when not
       NULL, is the secret the target leaves out (PostgreSQL's password,
       from password_file or password_env); it is never logged. */
    store_db_t *(*open) (const char *target, const char *password, const char *table, char *why,
                         size_t whylen, bool *retry_can_help);
    /* Checks the option's text before anything is opened; 0 or -1 with a
       reason. */
    int (*check_target) (const char *target, char *why, size_t whylen);
    /* Refuses a message that this database could never store (-1 with a
       reason); consume then answers FANHUB_FAIL rather than keep a row
       that no retry will write. */
    int (*check_row) (const store_row_t *row, char *why, size_t whylen);
    /* Inserts rows[0..n) with `run` in one transaction and commits. Counts
       the rows actually inserted (not ignored as already stored) in
       *inserted. */
    store_db_rc_t (*write) (store_db_t *db, int64_t run, const store_row_t *rows, size_t n,
                            size_t *bad, size_t *inserted, char *why, size_t whylen);
    /* Closes; safe with *db_p NULL, nulls it. */
    void (*close) (store_db_t **db_p);
} store_backend_t;

extern const store_backend_t store_sqlite_backend;
extern const store_backend_t store_pg_backend;

/* Copies a database's error text into why as one line: newlines become
   spaces, trailing white space goes. */
void store_db_why (char *why, size_t whylen, const char *prefix, const char *text);

#endif
