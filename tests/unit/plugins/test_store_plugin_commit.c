/*  test_store_plugin_commit - when the shipped store consumer's rows
    become visible: batches committed when full, when idle, at fini and
    after batch_ms; while another writer holds the database (RETRY, and
    nothing lost); and an asynchronous host (ABI 1.1), where a message
    is PENDING until its batch is committed.

    What the plugin wrote is read back with a separate SQLite connection.
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

/* ABI 1.1: a host with host->complete. The ticket of a message is its
   seq + 1000; completions are recorded in order. */
static struct {
    pthread_mutex_t lock;
    fanhub_ticket_t tickets[64];
    fanhub_result_t results[64];
    size_t count;
} s_completions = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0};

static fanhub_ticket_t
s_host_msg_ticket (const fanhub_msg_t *msg)
{
    return msg->seq + 1000;
}

static void
s_host_complete (fanhub_ctx_t *ctx, fanhub_ticket_t ticket, fanhub_result_t result)
{
    (void) ctx;
    pthread_mutex_lock (&s_completions.lock);
    if (s_completions.count < 64) {
        s_completions.tickets[s_completions.count] = ticket;
        s_completions.results[s_completions.count] = result;
        s_completions.count++;
    }
    pthread_mutex_unlock (&s_completions.lock);
}

/* The fake host with tickets and completions recorded (the async case). */
static fanhub_host_t
s_host_async (void)
{
    fanhub_host_t host = fanhub_fake_host;
    host.msg_ticket = s_host_msg_ticket;
    host.complete = s_host_complete;
    return host;
}

/* A batch is committed when it is full, when the queue runs empty (idle)
   and at fini; not before. */
static void
test_batch_commits (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "3", "3600000");
    assert_int_equal (s_send (plugin, "t", "1", 1), FANHUB_OK);
    assert_int_equal (s_send (plugin, "t", "2", 2), FANHUB_OK);
    assert_int_equal (s_rows (path), 0);
    assert_int_equal (s_send (plugin, "t", "3", 3), FANHUB_OK);
    assert_int_equal (s_rows (path), 3); /* full */
    assert_int_equal (s_send (plugin, "t", "4", 4), FANHUB_OK);
    assert_int_equal (s_rows (path), 3);
    s_plugin.desc->idle (plugin);
    assert_int_equal (s_rows (path), 4); /* idle */
    s_plugin.desc->idle (plugin);
    assert_int_equal (s_rows (path), 4);
    assert_int_equal (s_send (plugin, "t", "5", 5), FANHUB_OK);
    assert_int_equal (s_send (plugin, "t", "6", 6), FANHUB_OK);
    assert_int_equal (s_rows (path), 4);
    s_plugin.desc->fini (plugin);
    assert_int_equal (s_rows (path), 6); /* fini */
    sqlite3 *db = s_open (path);
    /* "1" is JSON: a number. */
    s_assert_query (db, "SELECT seq, body_json FROM messages ORDER BY id",
                    "1|1\n2|2\n3|3\n4|4\n5|5\n6|6\n");
    sqlite3_close (db);
    assert_true (s_logged (&ctx, "stored 6 messages, 0 already stored"));
}

/* batch 1 and batch_ms 0 both commit inside every consume. */
static void
test_batch_every_message (void **state)
{
    (void) state;
    static const char *const settings[][2] = {{"1", NULL}, {NULL, "0"}};
    for (size_t round = 0; round < 2; round++) {
        char path[512];
        s_temp (path, sizeof path);
        fanhub_ctx_t ctx;
        s_ctx_init (&ctx);
        void *plugin = s_start (&ctx, path, settings[round][0], settings[round][1]);
        for (uint64_t i = 1; i <= 3; i++) {
            assert_int_equal (s_send (plugin, "t", "b", i), FANHUB_OK);
            assert_int_equal (s_rows (path), (long long) i);
        }
        s_plugin.desc->fini (plugin);
    }
}

static int64_t
s_mono_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* batch_ms: the consume that comes after the batch's first row is that
   old commits the batch. The wait is for the clock to move past 1 ms; no
   outcome depends on how long it takes. */
static void
test_batch_ms (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "1000", "1");
    int64_t start = s_mono_ns ();
    assert_int_equal (s_send (plugin, "t", "1", 1), FANHUB_OK);
    if (s_mono_ns () - start < 1000000)
        assert_int_equal (s_rows (path), 0);
    while (s_mono_ns () - start < 2000000)
        ;
    assert_int_equal (s_send (plugin, "t", "2", 2), FANHUB_OK);
    assert_int_equal (s_rows (path), 2);
    s_plugin.desc->fini (plugin);
}

/* Another writer holds the database: the write that the full batch starts
   fails after the busy timeout. The batch is kept, the message that
   filled it is answered RETRY, and so is every message until the
   database is free again; then everything is stored, once. */
static void
test_retry_while_locked (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "2", "3600000");
    assert_int_equal (s_send (plugin, "t", "1", 1), FANHUB_OK);

    sqlite3 *holder = s_open (path);
    assert_int_equal (sqlite3_exec (holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal (s_send (plugin, "t", "2", 2), FANHUB_RETRY);
    assert_true (s_logged (&ctx, ": BEGIN: database is locked; keeping 1 "
                                 "messages to write again, and answering "
                                 "RETRY until the database is back"));
    assert_int_equal (s_send (plugin, "t", "3", 3), FANHUB_RETRY);
    s_plugin.desc->idle (plugin);
    assert_int_equal (sqlite3_exec (holder, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close (holder);

    /* The backoff decides when the plugin tries again; the hub would
       offer the message again until it is taken. */
    int64_t deadline = s_mono_ns () + 30 * 1000000000LL;
    int rc;
    while ((rc = s_send (plugin, "t", "2", 2)) == FANHUB_RETRY && s_mono_ns () < deadline)
        usleep (1000);
    assert_int_equal (rc, FANHUB_OK);
    assert_true (s_logged (&ctx, "available again; wrote the 1 kept "
                                 "messages, answered RETRY to "));
    /* The kept batch was written first; 2 opened a new one, which 3
       fills. */
    assert_int_equal (s_rows (path), 1);
    assert_int_equal (s_send (plugin, "t", "3", 3), FANHUB_OK);
    assert_int_equal (s_rows (path), 3);
    s_plugin.desc->fini (plugin);
    sqlite3 *db = s_open (path);
    s_assert_query (db, "SELECT seq, body_json FROM messages ORDER BY id", "1|1\n2|2\n3|3\n");
    sqlite3_close (db);
    assert_true (s_logged (&ctx, "stored 3 messages, 0 already stored, 0 "
                                 "refused, 0 lost"));
}

/* A database still held at fini: the open batch is lost, and said so. */
static void
test_fini_while_locked (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "10", "3600000");
    for (uint64_t i = 4; i <= 6; i++)
        assert_int_equal (s_send (plugin, "t", "b", i), FANHUB_OK);
    sqlite3 *holder = s_open (path);
    assert_int_equal (sqlite3_exec (holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    s_plugin.desc->fini (plugin);
    sqlite3_exec (holder, "COMMIT", NULL, NULL, NULL);
    sqlite3_close (holder);
    char want[1024];
    snprintf (want, sizeof want,
              "%s: 3 messages (seq 4 to 6) not stored at shutdown: BEGIN: "
              "database is locked; 0 of them were never answered OK (the hub "
              "keeps those), 3 are lost",
              path);
    assert_true (s_logged (&ctx, want));
    assert_true (s_logged (&ctx, "stored 0 messages, 0 already stored, 0 "
                                 "refused, 3 lost"));
    assert_int_equal (s_rows (path), 0);
}

/* ABI 1.1: a row is PENDING until its batch is committed, then completed
   OK; a batch that cannot be written at fini stays the hub's (not lost). */
static void
test_pending_until_commit (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    fanhub_option_t items[] = {SCALAR ("sqlite", path, "t.yaml:5:13"),
                               SCALAR ("batch", "10", "t.yaml:6:12"),
                               SCALAR ("batch_ms", "3600000", "t.yaml:7:15")};
    fanhub_option_t map = MAP (items, 3);
    void *plugin = NULL;
    char err[512] = "";
    const fanhub_host_t host = s_host_async ();
    assert_int_equal (s_plugin.desc->init (&host, &ctx, &map, &plugin, err, sizeof err), 0);
    s_completions.count = 0;
    for (uint64_t i = 1; i <= 3; i++)
        assert_int_equal (s_send (plugin, "t", "b", i), FANHUB_PENDING);
    /* Not committed: not done. */
    assert_int_equal (s_completions.count, 0);
    assert_int_equal (s_rows (path), 0);
    s_plugin.desc->idle (plugin);
    assert_int_equal (s_rows (path), 3);
    assert_int_equal (s_completions.count, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal (s_completions.tickets[i], 1001 + i);
        assert_int_equal (s_completions.results[i], FANHUB_OK);
    }
    /* The tenth row fills the batch: the commit completes all ten, the
       one consume is handling included. */
    s_completions.count = 0;
    for (uint64_t i = 4; i <= 13; i++)
        assert_int_equal (s_send (plugin, "t", "b", i), FANHUB_PENDING);
    assert_int_equal (s_completions.count, 10);
    assert_int_equal (s_completions.tickets[9], 1013);
    assert_int_equal (s_rows (path), 13);
    /* Held at fini: never answered OK, so the hub keeps them. */
    s_completions.count = 0;
    for (uint64_t i = 14; i <= 15; i++)
        assert_int_equal (s_send (plugin, "t", "b", i), FANHUB_PENDING);
    sqlite3 *holder = s_open (path);
    assert_int_equal (sqlite3_exec (holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    s_plugin.desc->fini (plugin);
    sqlite3_exec (holder, "COMMIT", NULL, NULL, NULL);
    sqlite3_close (holder);
    assert_int_equal (s_completions.count, 0);
    assert_true (s_logged (&ctx, "2 of them were never answered OK (the hub keeps those), "
                                 "0 are lost"));
    assert_true (s_logged (&ctx, "stored 13 messages, 0 already stored, 0 refused, 0 lost"));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_batch_commits),     cmocka_unit_test (test_batch_every_message),
        cmocka_unit_test (test_batch_ms),          cmocka_unit_test (test_retry_while_locked),
        cmocka_unit_test (test_fini_while_locked), cmocka_unit_test (test_pending_until_commit),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
