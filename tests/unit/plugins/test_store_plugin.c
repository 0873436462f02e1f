/*  test_store_plugin - the shipped store consumer on SQLite, driven through
    a fake host: the schema, every column of every row, duplicates, its
    options, threads. When rows are committed, and what happens while
    another writer holds the database, is test_store_plugin_commit.c.

    The test loads store.so with dlopen like the hub does and hands it a
    host table of its own. What the plugin wrote is read back with a
    separate SQLite connection, as an operator would read the archive.
    PostgreSQL is covered by tests/integration/plugins/test_store.py against a real
    server; here only its unreachable case, which needs none.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_dir.h"

#include <fanhub/consumer.h>
#include <sqlite3.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fanhub/testing.h>

#include "store_kit.h"

/* -------------------------------------------------------------------------
   Tests */

static void
test_descriptor (void **state)
{
    (void) state;
    s_assert_descriptor ("store");
    assert_non_null (s_plugin.desc->idle);
}

/* The documented schema, made by init alone, in WAL mode; starting again
   on the same file keeps it. */
static void
test_schema (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    for (int round = 0; round < 2; round++) {
        fanhub_ctx_t ctx;
        s_ctx_init (&ctx);
        void *plugin = s_start (&ctx, path, NULL, NULL);
        assert_true (s_logged (&ctx, "storing in table messages as run "));

        sqlite3 *db = s_open (path);
        s_assert_query (db, "PRAGMA journal_mode", "wal\n");
        s_assert_query (db,
                        "SELECT name, type, \"notnull\", pk"
                        " FROM pragma_table_info ('messages') ORDER BY cid",
                        "id|INTEGER|0|1\n"
                        "run|INTEGER|1|0\n"
                        "seq|INTEGER|1|0\n"
                        "topic|TEXT|1|0\n"
                        "received_at|TEXT|1|0\n"
                        "msg_id|TEXT|0|0\n"
                        "body_json|TEXT|0|0\n"
                        "body_text|TEXT|0|0\n"
                        "body_bytes|BLOB|0|0\n");
        /* Every index with its uniqueness and columns. */
        s_assert_query (db,
                        "SELECT l.\"unique\", group_concat (i.name, ',')"
                        " FROM pragma_index_list ('messages') AS l,"
                        " pragma_index_info (l.name) AS i"
                        " GROUP BY l.name ORDER BY 2",
                        "1|msg_id\n"
                        "0|received_at\n"
                        "1|run,seq\n"
                        "0|topic\n");
        s_assert_query (db,
                        "SELECT name FROM sqlite_master WHERE type = 'index'"
                        " AND sql IS NOT NULL ORDER BY name",
                        "messages_received_at_idx\nmessages_topic_idx\n");
        assert_int_equal (s_query_int (db, "SELECT count(*) FROM messages"), round);
        sqlite3_close (db);
        assert_int_equal (s_send (plugin, "t", "b", 1), FANHUB_OK);
        s_plugin.desc->fini (plugin);
        pthread_mutex_destroy (&ctx.lock);
    }
    /* Each start is a run of its own. */
    sqlite3 *db = s_open (path);
    assert_int_equal (s_query_int (db, "SELECT count(DISTINCT run) FROM messages"), 2);
    assert_int_equal (s_query_int (db, "SELECT min(run) > 0 FROM messages"), 1);
    sqlite3_close (db);
}

/* The table option names the table and its indexes. */
static void
test_table_option (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_option_t items[] = {
        SCALAR ("sqlite", path, "t.yaml:5:13"),
        SCALAR ("table", "fedmsg_archive", "t.yaml:6:12"),
    };
    fanhub_option_t map = MAP (items, 2);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = NULL;
    char err[512] = "";
    assert_int_equal (s_plugin.desc->init (&fanhub_fake_host, &ctx, &map, &plugin, err, sizeof err),
                      0);
    assert_int_equal (s_send (plugin, "t", "b", 1), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    sqlite3 *db = s_open (path);
    s_assert_query (db,
                    "SELECT type, name FROM sqlite_master WHERE sql IS NOT"
                    " NULL ORDER BY name",
                    "table|fedmsg_archive\n"
                    "index|fedmsg_archive_received_at_idx\n"
                    "index|fedmsg_archive_topic_idx\n");
    s_assert_query (db, "SELECT seq, topic, body_text FROM fedmsg_archive", "1|t|b\n");
    sqlite3_close (db);
}

typedef struct {
    const char *name;
    const char *topic;
    size_t topic_size;
    const char *body;
    size_t body_size;
    uint64_t seq;
    int64_t ns;
    /* The row: received_at|msg_id|body_json|body_text|body_bytes, with
       typeof() of the three body columns. */
    const char *expected;
} row_case_t;

#define AT "2023-11-14T22:13:20.123456Z"
#define NS 1700000000123456789

static const row_case_t s_row_cases[] = {
    {"JSON object with msg_id", BYTES ("org.fedoraproject.prod.buildsys"),
     BYTES ("{\"msg_id\": \"2024-5f1c\", \"msg\": {\"x\": 1}}"), 1, NS,
     AT "|2024-5f1c|{\"msg_id\": \"2024-5f1c\", \"msg\": {\"x\": 1}}|NULL|"
        "NULL|text|null|null"},
    {"JSON object without msg_id", BYTES ("t"), BYTES ("{\"i\":1}"), 2, NS,
     AT "|NULL|{\"i\":1}|NULL|NULL|text|null|null"},
    {"msg_id not a string", BYTES ("t"), BYTES ("{\"msg_id\":7}"), 3, NS,
     AT "|NULL|{\"msg_id\":7}|NULL|NULL|text|null|null"},
    {"msg_id empty", BYTES ("t"), BYTES ("{\"msg_id\":\"\"}"), 4, NS,
     AT "|NULL|{\"msg_id\":\"\"}|NULL|NULL|text|null|null"},
    {"msg_id not at the top", BYTES ("t"), BYTES ("{\"msg\":{\"msg_id\":\"x\"}}"), 5, NS,
     AT "|NULL|{\"msg\":{\"msg_id\":\"x\"}}|NULL|NULL|text|null|null"},
    {"msg_id in an array", BYTES ("t"), BYTES ("[{\"msg_id\":\"x\"}]"), 6, NS,
     AT "|NULL|[{\"msg_id\":\"x\"}]|NULL|NULL|text|null|null"},
    {"JSON scalar", BYTES ("t"), BYTES (" 42 "), 7, NS, AT "|NULL| 42 |NULL|NULL|text|null|null"},
    {"JSON kept byte for byte", BYTES ("t"),
     BYTES ("{ \"b\":1,\n \"a\":\"caf\xc3\xa9\\u00e9\" , \"a\":2}"), 8, NS,
     AT "|NULL|{ \"b\":1,\n \"a\":\"caf\xc3\xa9\\u00e9\" , \"a\":2}|NULL|"
        "NULL|text|null|null"},
    {"msg_id with escapes", BYTES ("t"), BYTES ("{\"msg_id\":\"a\\\"b\\u00e9\"}"), 9, NS,
     AT "|a\"b\xc3\xa9|{\"msg_id\":\"a\\\"b\\u00e9\"}|NULL|NULL|text|null|"
        "null"},
    {"plain text", BYTES ("t"), BYTES ("hello \xe2\x9c\x93"), 10, NS,
     AT "|NULL|NULL|hello \xe2\x9c\x93|NULL|null|text|null"},
    {"empty body is text", BYTES ("t"), BYTES (""), 11, NS, AT "|NULL|NULL||NULL|null|text|null"},
    {"JSON then garbage is text", BYTES ("t"), BYTES ("{\"a\":1} x"), 12, NS,
     AT "|NULL|NULL|{\"a\":1} x|NULL|null|text|null"},
    {"\\u0000 in JSON is text", BYTES ("t"), BYTES ("{\"a\":\"\\u0000\"}"), 13, NS,
     AT "|NULL|NULL|{\"a\":\"\\u0000\"}|NULL|null|text|null"},
    {"not UTF-8 is bytes", BYTES ("t"), BYTES ("\xff\xfe{}"), 14, NS,
     AT "|NULL|NULL|NULL|x'fffe7b7d'|null|null|blob"},
    {"NUL byte is bytes", BYTES ("t"), BYTES ("a\0b"), 15, NS,
     AT "|NULL|NULL|NULL|x'610062'|null|null|blob"},
    {"surrogate is bytes", BYTES ("t"), BYTES ("\"\xed\xa0\x80\""), 16, NS,
     AT "|NULL|NULL|NULL|x'22eda08022'|null|null|blob"},
    {"epoch", BYTES ("t"), BYTES ("b"), 17, 0,
     "1970-01-01T00:00:00.000000Z|NULL|NULL|b|NULL|null|text|null"},
    {"999 ns truncate", BYTES ("t"), BYTES ("b"), 18, 999,
     "1970-01-01T00:00:00.000000Z|NULL|NULL|b|NULL|null|text|null"},
    {"before 1970 rounds to the past", BYTES ("t"), BYTES ("b"), 19, -1,
     "1969-12-31T23:59:59.999999Z|NULL|NULL|b|NULL|null|text|null"},
    {"seq max", BYTES ("t"), BYTES ("b"), INT64_MAX, NS, AT "|NULL|NULL|b|NULL|null|text|null"},
};

/* Every column of every row, for every kind of body. */
static void
test_rows_exact (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "7", NULL);
    size_t cases = sizeof s_row_cases / sizeof s_row_cases[0];
    for (size_t i = 0; i < cases; i++) {
        const row_case_t *c = &s_row_cases[i];
        fanhub_msg_t msg = s_msg (c->topic, c->topic_size, c->body, c->body_size, c->seq, c->ns);
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    }
    s_plugin.desc->fini (plugin);
    assert_true (s_logged (&ctx, "stored 20 messages, 0 already stored, 0 "
                                 "refused, 0 lost"));

    sqlite3 *db = s_open (path);
    sqlite3_stmt *stmt = NULL;
    assert_int_equal (sqlite3_prepare_v2 (db,
                                          "SELECT seq, topic, received_at || '|' ||"
                                          " coalesce (msg_id, 'NULL') || '|' ||"
                                          " coalesce (body_json, 'NULL') || '|' ||"
                                          " coalesce (body_text, 'NULL') || '|' ||"
                                          " CASE WHEN body_bytes IS NULL THEN 'NULL' ELSE"
                                          " 'x''' || hex (body_bytes) || '''' END"
                                          " || '|' || typeof (body_json) || '|' ||"
                                          " typeof (body_text) || '|' || typeof (body_bytes)"
                                          " FROM messages ORDER BY id",
                                          -1, &stmt, NULL),
                      SQLITE_OK);
    for (size_t i = 0; i < cases; i++) {
        const row_case_t *c = &s_row_cases[i];
        assert_int_equal (sqlite3_step (stmt), SQLITE_ROW);
        assert_int_equal (sqlite3_column_int64 (stmt, 0), (int64_t) c->seq);
        assert_int_equal (sqlite3_column_bytes (stmt, 1), c->topic_size);
        assert_memory_equal (sqlite3_column_text (stmt, 1), c->topic, c->topic_size);
        char got[4096];
        snprintf (got, sizeof got, "%s", sqlite3_column_text (stmt, 2));
        /* hex() is upper case; the table is lower case. */
        char *x = strstr (got, "|x'");
        for (char *p = x ? x + 3 : NULL; p && *p && *p != '\''; p++)
            if (*p >= 'A' && *p <= 'F')
                *p = (char) (*p - 'A' + 'a');
        if (strcmp (got, c->expected) != 0)
            print_error ("case \"%s\"\n got: %s\nwant: %s\n", c->name, got, c->expected);
        assert_string_equal (got, c->expected);
    }
    assert_int_equal (sqlite3_step (stmt), SQLITE_DONE);
    sqlite3_finalize (stmt);
    assert_int_equal (s_query_int (db, "SELECT count(DISTINCT run) FROM "
                                       "messages"),
                      1);
    sqlite3_close (db);
}

/* A topic is stored as given, NUL bytes too (SQLite text keeps them). */
static void
test_topic_bytes (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, NULL, NULL);
    fanhub_msg_t msg = s_msg (BYTES ("a\0b.caf\xc3\xa9"), BYTES ("x"), 1, 0);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    msg = s_msg (BYTES (""), BYTES ("y"), 2, 0);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    sqlite3 *db = s_open (path);
    s_assert_query (db, "SELECT seq, hex (topic) FROM messages ORDER BY id",
                    "1|6100622E636166C3A9\n2|\n");
    sqlite3_close (db);
}

/* msg_id is taken up to 1024 bytes; a longer one is not a key. */
static void
test_msg_id_length (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, NULL, NULL);
    char body[1200];
    for (int len = 1023; len <= 1025; len++) {
        int n = snprintf (body, sizeof body, "{\"msg_id\":\"%0*d\"}", len, len);
        fanhub_msg_t msg = s_msg (BYTES ("t"), body, (size_t) n, (uint64_t) len, 0);
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    }
    s_plugin.desc->fini (plugin);
    sqlite3 *db = s_open (path);
    s_assert_query (db,
                    "SELECT seq, length (msg_id), substr (msg_id, -4)"
                    " FROM messages ORDER BY seq",
                    "1023|1023|1023\n1024|1024|1024\n1025|NULL|NULL\n");
    sqlite3_close (db);
}

/* A msg_id already stored is skipped, in the same batch, in a later one
   and by a later run; a body without msg_id is never a duplicate. */
static void
test_duplicate_msg_id (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "10", NULL);
    assert_int_equal (s_send (plugin, "a", "{\"msg_id\":\"A\",\"n\":1}", 1), FANHUB_OK);
    assert_int_equal (s_send (plugin, "a", "{\"msg_id\":\"A\",\"n\":2}", 2), FANHUB_OK);
    assert_int_equal (s_send (plugin, "b", "{\"n\":3}", 3), FANHUB_OK);
    s_plugin.desc->idle (plugin);
    assert_int_equal (s_send (plugin, "a", "{\"msg_id\":\"A\",\"n\":4}", 4), FANHUB_OK);
    assert_int_equal (s_send (plugin, "b", "{\"n\":3}", 5), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    assert_true (s_logged (&ctx, "stored 3 messages, 2 already stored, 0 "
                                 "refused, 0 lost"));

    fanhub_ctx_t ctx2;
    s_ctx_init (&ctx2);
    plugin = s_start (&ctx2, path, "10", NULL);
    assert_int_equal (s_send (plugin, "a", "{\"msg_id\":\"A\",\"n\":5}", 1), FANHUB_OK);
    assert_int_equal (s_send (plugin, "b", "{\"n\":3}", 3), FANHUB_OK);
    assert_int_equal (s_send (plugin, "a", "{\"msg_id\":\"B\"}", 4), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    assert_true (s_logged (&ctx2, "stored 2 messages, 1 already stored"));

    sqlite3 *db = s_open (path);
    s_assert_query (db,
                    "SELECT seq, topic, coalesce (msg_id, '-'), body_json"
                    " FROM messages ORDER BY id",
                    "1|a|A|{\"msg_id\":\"A\",\"n\":1}\n"
                    "3|b|-|{\"n\":3}\n"
                    "5|b|-|{\"n\":3}\n"
                    "3|b|-|{\"n\":3}\n"
                    "4|a|B|{\"msg_id\":\"B\"}\n");
    sqlite3_close (db);
}

/* A PostgreSQL server that is not there is a passing state: init takes the
   options, consume answers RETRY. */
static void
test_postgres_unreachable (void **state)
{
    (void) state;
    /* A loopback port that nothing listens on. */
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    socklen_t len = sizeof addr;
    assert_int_equal (getsockname (fd, (struct sockaddr *) &addr, &len), 0);
    close (fd);
    char conninfo[256];
    snprintf (conninfo, sizeof conninfo,
              "host=127.0.0.1 port=%d user=nobody password=secret "
              "connect_timeout=5 sslmode=disable gssencmode=disable",
              ntohs (addr.sin_port));

    fanhub_option_t items[] = {SCALAR ("postgres", conninfo, "t.yaml:5:15")};
    fanhub_option_t map = MAP (items, 1);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = NULL;
    char err[512] = "";
    int rc = s_plugin.desc->init (&fanhub_fake_host, &ctx, &map, &plugin, err, sizeof err);
    if (rc)
        print_error ("init refused: %s\n", err);
    assert_int_equal (rc, 0);
    assert_true (s_logged (&ctx, "PostgreSQL: cannot connect: "));
    assert_true (s_logged (&ctx, "answering RETRY until the database is "
                                 "back"));
    assert_false (s_logged (&ctx, "secret"));
    assert_int_equal (s_send (plugin, "t", "b", 1), FANHUB_RETRY);
    s_plugin.desc->idle (plugin);
    assert_int_equal (s_send (plugin, "t", "b", 1), FANHUB_RETRY);
    s_plugin.desc->fini (plugin);
    assert_true (s_logged (&ctx, "PostgreSQL: stored 0 messages, 0 already "
                                 "stored, 0 refused, 0 lost"));
}

#define DB SCALAR ("sqlite", s_case_path, "t.yaml:5:13")
#define BATCH_ERR(got, where)                                                                      \
    "options.batch: expected an integer from 1 to 100000, got " got " (" where ")"
#define BATCH_MS_ERR(got, where)                                                                   \
    "options.batch_ms: expected a duration such as 250ms, 2s or 1m from 0 to 3600000 ms, got " got \
    " (" where ")"
#define TABLE_ERR(got)                                                                             \
    "options.table: expected 1 to 40 characters from a-z 0-9 _, not "                              \
    "starting with a digit, got \"" got "\" (t.yaml:6:12)"

/* Filled in by test_options_table before the table is read. */
static char s_case_path[512];

static const option_case_t s_option_cases[] = {
    {"sqlite alone", {DB}, 1, NULL},
    {"no options",
     {{0}},
     0,
     "options: store needs a database: set sqlite (a file) or postgres (a "
     "conninfo) (t.yaml:4:3)"},
    {"only batch",
     {SCALAR ("batch", "5", "t.yaml:6:12")},
     1,
     "options: store needs a database: set sqlite (a file) or postgres (a "
     "conninfo) (t.yaml:4:3)"},
    {"unknown key",
     {DB, SCALAR ("path", "x", "t.yaml:6:11")},
     2,
     "options.path: unknown option; store takes sqlite, postgres, password_file, "
     "password_env, table, batch and batch_ms (t.yaml:6:11)"},
    {"both databases",
     {DB, SCALAR ("postgres", "dbname=x", "t.yaml:6:15")},
     2,
     "options.postgres: give sqlite or postgres, not both (t.yaml:6:15)"},
    {"both databases, other order",
     {SCALAR ("postgres", "dbname=x", "t.yaml:5:15"), DB},
     2,
     "options.sqlite: give sqlite or postgres, not both (t.yaml:5:13)"},
    {"sqlite empty",
     {SCALAR ("sqlite", "", "t.yaml:5:13")},
     1,
     "options.sqlite: expected a file name, got \"\" (t.yaml:5:13)"},
    {"sqlite list",
     {LIST ("sqlite")},
     1,
     "options.sqlite: expected a file name, got a list (t.yaml:5:13)"},
    {"sqlite :memory:",
     {SCALAR ("sqlite", ":memory:", "t.yaml:5:13")},
     1,
     "options.sqlite: expected the path of a database file, got "
     "\":memory:\" (t.yaml:5:13)"},
    {"postgres map",
     {SUBMAP ("postgres")},
     1,
     "options.postgres: expected a string, got a map (t.yaml:6:5)"},
    {"postgres empty",
     {SCALAR ("postgres", "", "t.yaml:5:15")},
     1,
     "options.postgres: expected 1 to 4096 characters, got \"\" (t.yaml:5:15)"},
    {"postgres not a conninfo",
     {SCALAR ("postgres", "host", "t.yaml:5:15")},
     1,
     "options.postgres: not a valid conninfo: missing \"=\" after \"host\" "
     "in connection info string (t.yaml:5:15)"},
    {"postgres unknown keyword",
     {SCALAR ("postgres", "hots=db", "t.yaml:5:15")},
     1,
     "options.postgres: not a valid conninfo: invalid connection option "
     "\"hots\" (t.yaml:5:15)"},
    {"batch 1", {DB, SCALAR ("batch", "1", "t.yaml:6:12")}, 2, NULL},
    {"batch max", {DB, SCALAR ("batch", "100000", "t.yaml:6:12")}, 2, NULL},
    {"batch 0", {DB, SCALAR ("batch", "0", "t.yaml:6:12")}, 2, BATCH_ERR ("\"0\"", "t.yaml:6:12")},
    {"batch too big",
     {DB, SCALAR ("batch", "100001", "t.yaml:6:12")},
     2,
     BATCH_ERR ("\"100001\"", "t.yaml:6:12")},
    {"batch far too big",
     {DB, SCALAR ("batch", "99999999999999999999", "t.yaml:6:12")},
     2,
     BATCH_ERR ("\"99999999999999999999\"", "t.yaml:6:12")},
    {"batch negative",
     {DB, SCALAR ("batch", "-5", "t.yaml:6:12")},
     2,
     BATCH_ERR ("\"-5\"", "t.yaml:6:12")},
    {"batch word",
     {DB, SCALAR ("batch", "many", "t.yaml:6:12")},
     2,
     BATCH_ERR ("\"many\"", "t.yaml:6:12")},
    {"batch list", {DB, LIST ("batch")}, 2, BATCH_ERR ("a list", "t.yaml:5:13")},
    {"batch_ms 0", {DB, SCALAR ("batch_ms", "0", "t.yaml:7:15")}, 2, NULL},
    {"batch_ms max", {DB, SCALAR ("batch_ms", "3600000", "t.yaml:7:15")}, 2, NULL},
    {"batch_ms too big",
     {DB, SCALAR ("batch_ms", "3600001", "t.yaml:7:15")},
     2,
     BATCH_MS_ERR ("\"3600001\"", "t.yaml:7:15")},
    {"batch_ms exponent",
     {DB, SCALAR ("batch_ms", "1e3", "t.yaml:7:15")},
     2,
     BATCH_MS_ERR ("\"1e3\"", "t.yaml:7:15")},
    {"batch_ms an hour and a second, too long",
     {DB, SCALAR ("batch_ms", "3601s", "t.yaml:7:15")},
     2,
     BATCH_MS_ERR ("\"3601s\"", "t.yaml:7:15")},
    {"batch_ms empty",
     {DB, SCALAR ("batch_ms", "", "t.yaml:7:15")},
     2,
     BATCH_MS_ERR ("\"\"", "t.yaml:7:15")},
    {"batch_ms map", {DB, SUBMAP ("batch_ms")}, 2, BATCH_MS_ERR ("a map", "t.yaml:6:5")},
    {"table", {DB, SCALAR ("table", "fedmsg_2024", "t.yaml:6:12")}, 2, NULL},
    {"table upper case",
     {DB, SCALAR ("table", "Messages", "t.yaml:6:12")},
     2,
     TABLE_ERR ("Messages")},
    {"table digit first", {DB, SCALAR ("table", "1m", "t.yaml:6:12")}, 2, TABLE_ERR ("1m")},
    {"table quote", {DB, SCALAR ("table", "a\"b", "t.yaml:6:12")}, 2, TABLE_ERR ("a\"b")},
    {"table schema-qualified",
     {DB, SCALAR ("table", "public.m", "t.yaml:6:12")},
     2,
     TABLE_ERR ("public.m")},
    {"table too long",
     {DB, SCALAR ("table", "a23456789012345678901234567890123456789012", "t.yaml:6:12")},
     2,
     "options.table: expected 1 to 40 characters, got "
     "\"a23456789012345678901234567890123456789012\" (t.yaml:6:12)"},
    {"table empty",
     {DB, SCALAR ("table", "", "t.yaml:6:12")},
     2,
     "options.table: expected 1 to 40 characters, got \"\" (t.yaml:6:12)"},
};

static void
test_options_table (void **state)
{
    (void) state;
    s_temp (s_case_path, sizeof s_case_path);
    s_run_option_cases (s_plugin.desc, s_option_cases,
                        sizeof s_option_cases / sizeof s_option_cases[0], s_ctx_init);
}

/* The database file cannot be made, or holds a table of that name that is
   not ours: init refuses, naming the file and the option's place. */
static void
test_database_refused (void **state)
{
    (void) state;
    char path[512], want[1024];
    snprintf (path, sizeof path, "%s/nonexistent/x.sqlite", s_plugin.dir);
    snprintf (want, sizeof want,
              "options.sqlite: %s: cannot open: unable to open database file "
              "(t.yaml:5:13)",
              path);
    fanhub_option_t items[] = {SCALAR ("sqlite", path, "t.yaml:5:13")};
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    s_refused (&ctx, items, 1, want);

    s_temp (path, sizeof path);
    sqlite3 *db = NULL;
    assert_int_equal (sqlite3_open (path, &db), SQLITE_OK);
    assert_int_equal (sqlite3_exec (db, "CREATE TABLE messages (a, b)", NULL, NULL, NULL),
                      SQLITE_OK);
    sqlite3_close (db);
    snprintf (want, sizeof want,
              "options.sqlite: %s: cannot create the schema: no such column: "
              "topic (t.yaml:5:13)",
              path);
    items[0].text = path;
    s_refused (&ctx, items, 1, want);
}

#define THREADS 4
#define PER_THREAD 2500

typedef struct {
    void *plugin;
    int index;
} worker_t;

static void *
s_worker (void *arg)
{
    worker_t *w = (worker_t *) arg;
    char body[64];
    for (int i = 0; i < PER_THREAD; i++) {
        uint64_t seq = (uint64_t) w->index * PER_THREAD + (uint64_t) i + 1;
        snprintf (body, sizeof body, "{\"msg_id\":\"id-%llu\"}", (unsigned long long) seq);
        if (s_send (w->plugin, "org.test.threads", body, seq) != FANHUB_OK)
            return arg;
        if (i % 500 == 0)
            s_plugin.desc->idle (w->plugin);
    }
    return NULL;
}

/* Several threads at once (the plugin says it is thread-safe): every
   message stored once. */
static void
test_threads (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "100", NULL);
    pthread_t threads[THREADS];
    worker_t workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker_t){plugin, i};
        assert_int_equal (pthread_create (&threads[i], NULL, s_worker, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *failed;
        pthread_join (threads[i], &failed);
        assert_null (failed);
    }
    s_plugin.desc->fini (plugin);
    sqlite3 *db = s_open (path);
    s_assert_query (db,
                    "SELECT count(*), count(DISTINCT seq), min(seq), max(seq),"
                    " sum(msg_id = 'id-' || seq) FROM messages",
                    "10000|10000|1|10000|10000\n");
    sqlite3_close (db);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_descriptor),       cmocka_unit_test (test_schema),
        cmocka_unit_test (test_table_option),     cmocka_unit_test (test_rows_exact),
        cmocka_unit_test (test_topic_bytes),      cmocka_unit_test (test_msg_id_length),
        cmocka_unit_test (test_duplicate_msg_id), cmocka_unit_test (test_postgres_unreachable),
        cmocka_unit_test (test_options_table),    cmocka_unit_test (test_database_refused),
        cmocka_unit_test (test_threads),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
