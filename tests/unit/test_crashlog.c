/*  test_crashlog - the crash record of a consumer's state directory.

    Records appended as the crash handler appends them are read back at
    the next open, counted per message (seq and identity), with the last
    signal; lines that are not records are skipped; with nothing spooled
    (keep false) the file is emptied; an unopenable file is an error that
    names it.
*/
#include "crashlog.h"

#include "crc32c.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "test_dir.h"

static int
s_setup (void **state)
{
    return test_dir_setup (state, "test_crashlog", "unused");
}

static char *
s_read (const char *path)
{
    static char text[4096];
    FILE *f = fopen (path, "r");
    assert_non_null (f);
    size_t n = fread (text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose (f);
    return text;
}

static void
test_records_counted_per_message (void **state)
{
    test_dir_fixture_t *f = *state;
    char err[256];
    fh_crashlog_t *log = fh_crashlog_open (f->root, true, err, sizeof err);
    assert_non_null (log);
    assert_int_equal (fh_crashlog_messages (log), 0);
    int fd = fh_crashlog_fd (log);
    assert_int_equal (fh_crashlog_append (fd, 17, 0xdeadbeef, SIGSEGV), 0);
    assert_int_equal (fh_crashlog_append (fd, 3, 0x00000001, SIGBUS), 0);
    assert_int_equal (fh_crashlog_append (fd, 17, 0xdeadbeef, SIGABRT), 0);
    assert_int_equal (fh_crashlog_append (fd, 17, 0x12345678, SIGSEGV), 0);
    assert_int_equal (fh_crashlog_append (fd, UINT64_MAX, 0, SIGFPE), 0);
    /* Not known until the next open: the handler's writes are for it. */
    assert_int_equal (fh_crashlog_crashes (log, 17, 0xdeadbeef, NULL), 0);
    char path[256];
    snprintf (path, sizeof path, "%s/crashes", f->root);
    assert_string_equal (s_read (path), "fanhub-crash 1 17 deadbeef 11\n"
                                        "fanhub-crash 1 3 00000001 7\n"
                                        "fanhub-crash 1 17 deadbeef 6\n"
                                        "fanhub-crash 1 17 12345678 11\n"
                                        "fanhub-crash 1 18446744073709551615 00000000 8\n");
    fh_crashlog_close (&log);
    fh_crashlog_close (&log); /* safe twice */

    log = fh_crashlog_open (f->root, true, err, sizeof err);
    assert_non_null (log);
    assert_int_equal (fh_crashlog_messages (log), 4);
    int sig = 0;
    assert_int_equal (fh_crashlog_crashes (log, 17, 0xdeadbeef, &sig), 2);
    assert_int_equal (sig, SIGABRT); /* the last one's */
    assert_int_equal (fh_crashlog_crashes (log, 17, 0x12345678, &sig), 1);
    assert_int_equal (sig, SIGSEGV);
    assert_int_equal (fh_crashlog_crashes (log, 3, 1, NULL), 1);
    assert_int_equal (fh_crashlog_crashes (log, UINT64_MAX, 0, &sig), 1);
    assert_int_equal (sig, SIGFPE);
    /* Another message numbered the same is not the one that crashed. */
    assert_int_equal (fh_crashlog_crashes (log, 17, 0, NULL), 0);
    assert_int_equal (fh_crashlog_crashes (log, 4, 1, NULL), 0);
    uint64_t seq;
    uint32_t crashes;
    fh_crashlog_at (log, 0, &seq, &crashes, &sig);
    assert_true (seq == 3 && crashes == 1 && sig == SIGBUS);
    fh_crashlog_close (&log);
}

static void
test_torn_lines_skipped (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[256];
    snprintf (path, sizeof path, "%s/crashes", f->root);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    fputs ("fanhub-crash 1 5 0000000a 11\n"
           "fanhub-crash 1 5 0000\n"          /* torn */
           "fanhub-crash 2 5 0000000a 11\n"   /* another version */
           "fanhub-crash 1 5 0000000a 11 x\n" /* trailing bytes */
           "garbage\n"
           "fanhub-crash 1 5 0000000a 6", /* no newline: still whole */
           out);
    fclose (out);
    fh_crashlog_t *log = fh_crashlog_open (f->root, true, err, sizeof err);
    assert_non_null (log);
    int sig = 0;
    assert_int_equal (fh_crashlog_messages (log), 1);
    assert_int_equal (fh_crashlog_crashes (log, 5, 10, &sig), 2);
    assert_int_equal (sig, SIGABRT);
    fh_crashlog_close (&log);
}

static void
test_too_big_is_emptied (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[256];
    snprintf (path, sizeof path, "%s/crashes", f->root);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    for (int i = 0; i < 16 * 1024 * 1024 / 32 + 1; i++)
        fputs ("fanhub-crash 1 5 0000000a 11    ", out); /* 32 bytes */
    fclose (out);
    fh_crashlog_t *log = fh_crashlog_open (f->root, true, err, sizeof err);
    assert_non_null (log); /* a warning, not a failed start */
    assert_int_equal (fh_crashlog_messages (log), 0);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_size, 0);
    fh_crashlog_close (&log);
}

static void
test_emptied_without_spool (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[256];
    fh_crashlog_t *log = fh_crashlog_open (f->root, true, err, sizeof err);
    assert_non_null (log);
    assert_int_equal (fh_crashlog_append (fh_crashlog_fd (log), 9, 9, SIGSEGV), 0);
    fh_crashlog_close (&log);
    log = fh_crashlog_open (f->root, false, err, sizeof err);
    assert_non_null (log);
    assert_int_equal (fh_crashlog_messages (log), 0);
    snprintf (path, sizeof path, "%s/crashes", f->root);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_size, 0);
    /* Appends still work after emptying. */
    assert_int_equal (fh_crashlog_append (fh_crashlog_fd (log), 1, 2, SIGSEGV), 0);
    assert_string_equal (s_read (path), "fanhub-crash 1 1 00000002 11\n");
    fh_crashlog_close (&log);
}

static void
test_open_errors (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[256];
    /* The record's name taken by a directory. */
    snprintf (path, sizeof path, "%s/crashes", f->root);
    assert_int_equal (mkdir (path, 0700), 0);
    assert_null (fh_crashlog_open (f->root, true, err, sizeof err));
    assert_non_null (strstr (err, path));
    assert_non_null (strstr (err, "cannot open"));
    /* A directory that is not there. */
    assert_null (fh_crashlog_open (f->dir, true, err, sizeof err));
    assert_non_null (strstr (err, f->dir));
    /* A write on a closed descriptor fails, as the handler then says. */
    assert_int_equal (fh_crashlog_append (-1, 1, 1, SIGSEGV), -1);
}

static void
test_identity_and_names (void **state)
{
    (void) state;
    fanhub_bytes_t topic = {"org.a", 5}, body = {"{}", 2};
    assert_int_equal (fh_crashlog_identity (topic, body), fh_crc32c (0, "org.a{}", 7));
    fanhub_bytes_t other = {"{ }", 3};
    assert_int_not_equal (fh_crashlog_identity (topic, body), fh_crashlog_identity (topic, other));
    assert_string_equal (fh_crashlog_signal_name (SIGSEGV), "SIGSEGV");
    assert_string_equal (fh_crashlog_signal_name (SIGBUS), "SIGBUS");
    assert_string_equal (fh_crashlog_signal_name (SIGILL), "SIGILL");
    assert_string_equal (fh_crashlog_signal_name (SIGFPE), "SIGFPE");
    assert_string_equal (fh_crashlog_signal_name (SIGABRT), "SIGABRT");
    assert_string_equal (fh_crashlog_signal_name (SIGTERM), "a fatal signal");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_records_counted_per_message, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_torn_lines_skipped, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_too_big_is_emptied, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_emptied_without_spool, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_open_errors, s_setup, test_dir_teardown),
        cmocka_unit_test (test_identity_and_names),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
