/*  test_log_plugin - the shipped log consumer, driven through a fake host:
    when and where its lines go (buffering, flushing, the file made and
    reopened, stdout), its options, write errors, threads. What a line
    says is test_log_plugin_format.c.

    The test loads log.so with dlopen like the hub does, but hands it a
    host table of its own: messages and options are plain structs here.
    That is what the host-table ABI is for; nothing of the hub is used.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_dir.h"

#include <fanhub/consumer.h>
#include <fanhub/sdk.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fanhub/testing.h>

#include "log_kit.h"

/* -------------------------------------------------------------------------
   Tests */

static void
test_descriptor (void **state)
{
    (void) state;
    s_assert_descriptor ("log");
    assert_non_null (s_plugin.desc->idle);
    assert_non_null (s_plugin.desc->reopen);
}

static void
test_buffered_until_idle (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "3600000");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    assert_int_equal (s_file_size (path), 0);
    s_plugin.desc->idle (plugin);
    off_t one = s_file_size (path);
    assert_true (one > 0);
    msg.seq = 2;
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    assert_int_equal (s_file_size (path), one);
    s_plugin.desc->fini (plugin);
    assert_int_equal (s_file_size (path), 2 * one);
}

static void
test_flush_after_interval (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "1");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    nanosleep (&(struct timespec){0, 5000000}, NULL);
    msg.seq = 2;
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    /* More than flush_ms since the last flush: both are on disk. */
    size_t size;
    char *got = s_slurp (path, &size);
    assert_int_equal (s_count_lines (got, size), 2);
    free (got);
    s_plugin.desc->fini (plugin);
}

static void
test_appends_and_creates_0644 (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, NULL);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0644);
    s_plugin.desc->fini (plugin);

    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs ("old line\n", f);
    fclose (f);
    plugin = s_start (&ctx, path, NULL);
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    char *got = s_slurp (path, NULL);
    assert_string_equal (got, "old line\n{\"seq\":1,\"received_at\":"
                              "\"1970-01-01T00:00:00.000000Z\",\"topic\":\"t\","
                              "\"body\":\"b\"}\n");
    free (got);
}

/* reopen (ABI 1.3), as logrotate's create mode needs it: after a rename,
   every later line, the buffered ones included, goes to the new file at
   path, and none to the renamed one; with the file missing, it is made. */
static void
test_reopen_after_rename (void **state)
{
    (void) state;
    assert_non_null (s_plugin.desc->reopen);
    char path[512], rotated[600];
    s_temp (path, sizeof path);
    snprintf (rotated, sizeof rotated, "%s.1", path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "3600000");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->idle (plugin);
    off_t one = s_file_size (path);
    assert_true (one > 0);
    msg.seq = 2; /* buffered when the file is renamed */
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    assert_int_equal (rename (path, rotated), 0);
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL, 0640); /* logrotate's create */
    assert_true (fd >= 0);
    close (fd);
    s_plugin.desc->reopen (plugin);
    msg.seq = 3;
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->idle (plugin);
    assert_int_equal (s_file_size (rotated), one);
    assert_int_equal (s_file_size (path), 2 * one);
    /* Renamed and not created again: reopen makes it. */
    assert_int_equal (rename (path, rotated), 0);
    s_plugin.desc->reopen (plugin);
    msg.seq = 4;
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    assert_int_equal (s_file_size (rotated), 2 * one);
    char *got = s_slurp (path, NULL);
    assert_non_null (strstr (got, "{\"seq\":4,"));
    free (got);
    assert_int_equal (ctx.lines, 0);
}

/* A path that cannot be opened again: logged, lines go on to the file
   that is open. */
static void
test_reopen_failure (void **state)
{
    (void) state;
    char dir[512], path[600];
    s_temp (dir, sizeof dir);
    assert_int_equal (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/out", dir);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "0");
    assert_int_equal (unlink (path), 0);
    assert_int_equal (rmdir (dir), 0);
    s_plugin.desc->reopen (plugin);
    assert_int_equal (ctx.lines, 1);
    assert_non_null (strstr (ctx.last, ": cannot reopen: No such file or directory; writing on "
                                       "to the file opened before"));
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);
}

/* "-" and the default are stdout, which fini flushes but leaves open. */
static void
test_stdout (void **state)
{
    (void) state;
    for (int round = 0; round < 2; round++) {
        char path[512];
        s_temp (path, sizeof path);
        fflush (stdout);
        int saved = dup (STDOUT_FILENO);
        int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true (saved >= 0 && fd >= 0);
        dup2 (fd, STDOUT_FILENO);
        close (fd);

        fanhub_ctx_t ctx;
        fanhub_fake_ctx_init (&ctx);
        void *plugin = s_start (&ctx, round == 0 ? "-" : NULL, NULL);
        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
        int rc = s_plugin.desc->consume (plugin, &msg);
        s_plugin.desc->fini (plugin);
        int still_open = fcntl (STDOUT_FILENO, F_GETFD);

        dup2 (saved, STDOUT_FILENO);
        close (saved);
        assert_int_equal (rc, FANHUB_OK);
        assert_true (still_open >= 0);
        char *got = s_slurp (path, NULL);
        assert_string_equal (got, "{\"seq\":1,\"received_at\":"
                                  "\"1970-01-01T00:00:00.000000Z\",\"topic\":\"t\","
                                  "\"body\":\"b\"}\n");
        free (got);
    }
}

#define FLUSH_ERR(got, where)                                                                      \
    "options.flush_ms: expected a duration such as 250ms, 2s or 1m from 0 to 3600000 ms, got " got \
    " (" where ")"

static const option_case_t s_option_cases[] = {
    {"no options", {{0}}, 0, NULL},
    {"unknown key",
     {SCALAR ("colour", "red", "t.yaml:6:11")},
     1,
     "options.colour: unknown option; log takes path and flush_ms "
     "(t.yaml:6:11)"},
    {"unknown key after good ones",
     {SCALAR ("flush_ms", "5", "t.yaml:5:13"), SCALAR ("flush", "5", "t.yaml:6:10")},
     2,
     "options.flush: unknown option; log takes path and flush_ms "
     "(t.yaml:6:10)"},
    {"flush_ms 0", {SCALAR ("flush_ms", "0", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms max", {SCALAR ("flush_ms", "3600000", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms leading zero", {SCALAR ("flush_ms", "0100", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms a duration", {SCALAR ("flush_ms", "2s", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms an hour", {SCALAR ("flush_ms", "1h", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms word",
     {SCALAR ("flush_ms", "abc", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"abc\"", "t.yaml:5:13")},
    {"flush_ms negative",
     {SCALAR ("flush_ms", "-1", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"-1\"", "t.yaml:5:13")},
    {"flush_ms too big",
     {SCALAR ("flush_ms", "3600001", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"3600001\"", "t.yaml:5:13")},
    {"flush_ms far too big",
     {SCALAR ("flush_ms", "99999999999999999999", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"99999999999999999999\"", "t.yaml:5:13")},
    /* The hub's duration grammar: below a millisecond is dropped. */
    {"flush_ms fraction", {SCALAR ("flush_ms", "1.5", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms hex",
     {SCALAR ("flush_ms", "0x10", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"0x10\"", "t.yaml:5:13")},
    {"flush_ms empty",
     {SCALAR ("flush_ms", "", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"\"", "t.yaml:5:13")},
    {"flush_ms space",
     {SCALAR ("flush_ms", " 5", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\" 5\"", "t.yaml:5:13")},
    {"flush_ms list", {LIST ("flush_ms")}, 1, FLUSH_ERR ("a list", "t.yaml:5:13")},
    {"flush_ms map", {SUBMAP ("flush_ms")}, 1, FLUSH_ERR ("a map", "t.yaml:6:5")},
    {"path list",
     {LIST ("path")},
     1,
     "options.path: expected a file name, got a list "
     "(t.yaml:5:13)"},
    {"path map",
     {SUBMAP ("path")},
     1,
     "options.path: expected a file name, got a map (t.yaml:6:5)"},
    {"path empty",
     {SCALAR ("path", "", "t.yaml:5:13")},
     1,
     "options.path: expected a file name, got \"\" (t.yaml:5:13)"},
    {"path is a directory",
     {SCALAR ("path", "/", "t.yaml:5:13")},
     1,
     "options.path: /: cannot open: Is a directory (t.yaml:5:13)"},
};

static void
test_options_table (void **state)
{
    (void) state;
    s_run_option_cases (s_plugin.desc, s_option_cases,
                        sizeof s_option_cases / sizeof s_option_cases[0], fanhub_fake_ctx_init);
}

static void
test_unopenable_path (void **state)
{
    (void) state;
    char path[512], want[1024];
    snprintf (path, sizeof path, "%s/nonexistent/x", s_plugin.dir);
    snprintf (want, sizeof want,
              "options.path: %s: cannot open: No such file or directory "
              "(t.yaml:5:13)",
              path);
    fanhub_option_t items[] = {SCALAR ("path", path, "t.yaml:5:13")};
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    s_refused (&ctx, items, 1, want);
}

/* /dev/full refuses every write: each message fails, the error is logged
   once for the streak. */
static void
test_write_error_logged_once (void **state)
{
    (void) state;
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, "/dev/full", "0");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_int_equal (ctx.lines, 1);
    assert_string_equal (ctx.last, "/dev/full: cannot write: No space left on device; "
                                   "messages fail until it can (logged once)");
    s_plugin.desc->fini (plugin);
    assert_int_equal (ctx.lines, 1); /* nothing was left to lose */

    /* Buffered: the message is accepted, the flush fails and the loss at
       shutdown is reported. */
    fanhub_ctx_t ctx2 = {0};
    plugin = s_start (&ctx2, "/dev/full", "3600000");
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->idle (plugin);
    s_plugin.desc->idle (plugin);
    assert_int_equal (ctx2.lines, 1);
    s_plugin.desc->fini (plugin);
    assert_int_equal (ctx2.lines, 2);
    assert_non_null (strstr (ctx2.last, "buffered bytes lost at shutdown"));
}

/* With a file size limit a write can stop part way (the line is torn and
   gets its newline before the next) or fail outright (the line is taken
   back whole); when writing works again the plugin says so. */
static void
test_write_error_recovery (void **state)
{
    (void) state;
    static const char line1[] = "{\"seq\":1,\"received_at\":\"1970-01-01T00:00:00.000000Z\","
                                "\"topic\":\"t\",\"body\":\"b\"}\n";
    size_t len = sizeof line1 - 1;
    struct rlimit saved;
    assert_int_equal (getrlimit (RLIMIT_FSIZE, &saved), 0);
    void (*old) (int) = signal (SIGXFSZ, SIG_IGN);

    for (int torn = 0; torn < 2; torn++) {
        char path[512];
        s_temp (path, sizeof path);
        fanhub_ctx_t ctx;
        fanhub_fake_ctx_init (&ctx);
        void *plugin = s_start (&ctx, path, "0");
        struct rlimit limit = saved;
        limit.rlim_cur = torn ? len + 10 : len;
        assert_int_equal (setrlimit (RLIMIT_FSIZE, &limit), 0);

        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
        int rc1 = s_plugin.desc->consume (plugin, &msg);
        msg.seq = 2;
        int rc2 = s_plugin.desc->consume (plugin, &msg);
        assert_int_equal (setrlimit (RLIMIT_FSIZE, &saved), 0);
        msg.seq = 3;
        int rc3 = s_plugin.desc->consume (plugin, &msg);
        s_plugin.desc->fini (plugin);

        assert_int_equal (rc1, FANHUB_OK);
        assert_int_equal (rc2, FANHUB_FAIL);
        assert_int_equal (rc3, FANHUB_OK);
        assert_int_equal (ctx.lines, 2);
        char want[1024];
        snprintf (want, sizeof want, "%s: writing again; 1 messages failed meanwhile", path);
        assert_string_equal (ctx.last, want);

        /* Lines 2 and 3 differ from line 1 in their seq digit only. */
        char line2[sizeof line1], line3[sizeof line1];
        memcpy (line2, line1, sizeof line1);
        memcpy (line3, line1, sizeof line1);
        line2[7] = '2';
        line3[7] = '3';
        char expect[512];
        if (torn)
            snprintf (expect, sizeof expect, "%s%.10s\n%s", line1, line2, line3);
        else
            snprintf (expect, sizeof expect, "%s%s", line1, line3);
        char *got = s_slurp (path, NULL);
        assert_string_equal (got, expect);
        free (got);
    }
    signal (SIGXFSZ, old);
}

#define THREADS 4
#define PER_THREAD 5000

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
        int n = snprintf (body, sizeof body, "body \"%llu\"\n", (unsigned long long) seq);
        fanhub_msg_t msg
            = s_msg (BYTES ("org.test.threads"), body, (size_t) n, seq, (int64_t) seq * 1000);
        if (s_plugin.desc->consume (w->plugin, &msg) != FANHUB_OK)
            return arg;
        if (i % 1000 == 0)
            s_plugin.desc->idle (w->plugin);
    }
    return NULL;
}

/* Several threads at once (the plugin says it is thread-safe): every line
   whole, every message once. */
static void
test_threads (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "1");
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

    size_t size;
    char *got = s_slurp (path, &size);
    assert_int_equal (s_count_lines (got, size), THREADS * PER_THREAD);
    bool *seen = calloc (THREADS * PER_THREAD + 1, sizeof *seen);
    char *p = got;
    while (p < got + size) {
        char *nl = memchr (p, '\n', size - (size_t) (p - got));
        assert_non_null (nl);
        jline_t line;
        assert_int_equal (s_jline (p, (size_t) (nl - p), &line), 0);
        assert_true (line.seq >= 1 && line.seq <= THREADS * PER_THREAD);
        assert_false (seen[line.seq]);
        seen[line.seq] = true;
        char body[64];
        int n = snprintf (body, sizeof body, "body \"%llu\"\n", (unsigned long long) line.seq);
        assert_int_equal (line.body.size, (size_t) n);
        assert_memory_equal (line.body.data, body, (size_t) n);
        s_jline_free (&line);
        p = nl + 1;
    }
    free (seen);
    free (got);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_descriptor),
        cmocka_unit_test (test_buffered_until_idle),
        cmocka_unit_test (test_flush_after_interval),
        cmocka_unit_test (test_appends_and_creates_0644),
        cmocka_unit_test (test_stdout),
        cmocka_unit_test (test_reopen_after_rename),
        cmocka_unit_test (test_reopen_failure),
        cmocka_unit_test (test_options_table),
        cmocka_unit_test (test_unopenable_path),
        cmocka_unit_test (test_write_error_logged_once),
        cmocka_unit_test (test_write_error_recovery),
        cmocka_unit_test (test_threads),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
