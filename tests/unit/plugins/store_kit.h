/*  store_kit - what the store plugin's tests share: store.so and a
    directory for its databases (a cmocka group setup and teardown),
    options, messages, and reading back with a connection of its own what
    the plugin wrote. Include it once, after <cmocka.h>, <sqlite3.h> and
    <fanhub/testing.h>.
*/
#ifndef STORE_KIT_H_INCLUDED
#define STORE_KIT_H_INCLUDED

#include "plugin_kit.h"

/* -------------------------------------------------------------------------
   Helpers */

static int s_files; /* numbers the temp files */

#define BYTES(s) (s), sizeof (s) - 1

static inline void
s_ctx_init (fanhub_ctx_t *ctx)
{
    fanhub_fake_ctx_init (ctx);
    ctx->skip_debug = true;
}

/* A fresh database file name. */
static inline void
s_temp (char *path, size_t size)
{
    snprintf (path, size, "%s/db-%d.sqlite", s_plugin.dir, ++s_files);
}

/* Starts an instance on the SQLite file PATH with batch and batch_ms
   (NULL leaves an option out). */
static inline void *
s_start (fanhub_ctx_t *ctx, const char *path, const char *batch, const char *batch_ms)
{
    fanhub_option_t items[3];
    size_t n = 0;
    items[n++] = (fanhub_option_t) SCALAR ("sqlite", path, "t.yaml:5:13");
    if (batch)
        items[n++] = (fanhub_option_t) SCALAR ("batch", batch, "t.yaml:6:12");
    if (batch_ms)
        items[n++] = (fanhub_option_t) SCALAR ("batch_ms", batch_ms, "t.yaml:7:15");
    return s_start_map (ctx, items, n);
}

static inline fanhub_msg_t
s_msg (const void *topic, size_t topic_size, const void *body, size_t body_size, uint64_t seq,
       int64_t ns)
{
    return fanhub_fake_msg (topic, topic_size, body, body_size, seq, ns);
}

/* Consumes a message with a text topic and body. */
static inline int
s_send (void *plugin, const char *topic, const char *body, uint64_t seq)
{
    fanhub_msg_t msg
        = s_msg (topic, strlen (topic), body, strlen (body), seq, (int64_t) seq * 1000);
    return s_plugin.desc->consume (plugin, &msg);
}

/* A separate, read-only connection, as an operator would open. */
static inline sqlite3 *
s_open (const char *path)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2 (path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK)
        print_error ("open %s: %s\n", path, sqlite3_errmsg (db));
    assert_int_equal (rc, SQLITE_OK);
    sqlite3_busy_timeout (db, 10000);
    return db;
}

/* The first column of the first row of sql as an integer. */
static inline long long
s_query_int (sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL);
    if (rc != SQLITE_OK)
        print_error ("%s: %s\n", sql, sqlite3_errmsg (db));
    assert_int_equal (rc, SQLITE_OK);
    assert_int_equal (sqlite3_step (stmt), SQLITE_ROW);
    long long v = sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    return v;
}

/* The rows of sql, columns joined with '|' and rows ended with '\n'; NULL
   is shown as "NULL", a blob as x'hex'. Caller frees. */
static inline char *
s_query_text (sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (db, sql, -1, &stmt, NULL);
    if (rc != SQLITE_OK)
        print_error ("%s: %s\n", sql, sqlite3_errmsg (db));
    assert_int_equal (rc, SQLITE_OK);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc (cap);
    assert_non_null (out);
    out[0] = '\0';
    while ((rc = sqlite3_step (stmt)) == SQLITE_ROW) {
        int columns = sqlite3_column_count (stmt);
        for (int i = 0; i < columns; i++) {
            char cell[4096];
            int type = sqlite3_column_type (stmt, i);
            if (type == SQLITE_NULL)
                snprintf (cell, sizeof cell, "NULL");
            else if (type == SQLITE_BLOB) {
                const unsigned char *p = sqlite3_column_blob (stmt, i);
                int n = sqlite3_column_bytes (stmt, i);
                size_t o = (size_t) snprintf (cell, sizeof cell, "x'");
                for (int j = 0; j < n && o + 4 < sizeof cell; j++)
                    o += (size_t) snprintf (cell + o, sizeof cell - o, "%02x", p[j]);
                snprintf (cell + o, sizeof cell - o, "'");
            }
            else
                snprintf (cell, sizeof cell, "%s", (const char *) sqlite3_column_text (stmt, i));
            size_t need = strlen (cell) + 2;
            if (len + need >= cap) {
                cap = cap * 2 + need;
                out = realloc (out, cap);
                assert_non_null (out);
            }
            len += (size_t) snprintf (out + len, cap - len, "%s%s", i ? "|" : "", cell);
        }
        out[len++] = '\n';
        out[len] = '\0';
    }
    assert_int_equal (rc, SQLITE_DONE);
    sqlite3_finalize (stmt);
    return out;
}

static inline void
s_assert_query (sqlite3 *db, const char *sql, const char *expected)
{
    char *got = s_query_text (db, sql);
    if (strcmp (got, expected) != 0)
        print_error ("%s\n got:\n%s\nwant:\n%s\n", sql, got, expected);
    assert_string_equal (got, expected);
    free (got);
}

static inline long long
s_rows (const char *path)
{
    sqlite3 *db = s_open (path);
    long long n = s_query_int (db, "SELECT count(*) FROM messages");
    sqlite3_close (db);
    return n;
}

static inline bool
s_logged (fanhub_ctx_t *ctx, const char *text)
{
    return strstr (ctx->all, text) != NULL;
}

/* -------------------------------------------------------------------------
   Setup */

static inline int
s_group_setup (void **state)
{
    (void) state;
    return fanhub_fake_plugin_open (&s_plugin, SHIPPED_PLUGIN_DIR "/store.so", "fanhub-test-store");
}

static inline int
s_group_teardown (void **state)
{
    (void) state;
    fanhub_fake_plugin_close (&s_plugin);
    return 0;
}

#endif
