/*  test_crashlog - the crash record of a consumer's state directory.

    Records appended as the crash handler appends them are read back at
    the next open, counted per message (seq and identity), with the last
    signal; lines that are not records are skipped; with nothing spooled
    (keep false) the file is emptied; an unopenable file is an error that
    names it. Hostile records (issue 39, item 3): a FIFO is refused without
    a hang, a symbolic link is refused and its target left as it was, a
    file of another user is refused, zeros and garbage before, between or
    glued to records are skipped and every record after them found, with
    one warning for all of it.
*/
#include "crashlog.h"

#include "crc32c.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
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

/* Runs fh_crashlog_open with stderr in a file: the lines it logged. */
static fh_crashlog_t *
s_open_counting (const char *dir, bool keep, char *err, size_t errlen, size_t *lines)
{
    char path[512];
    snprintf (path, sizeof path, "%s/stderr.txt", dir);
    fflush (stderr);
    int saved = dup (2), fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true (saved >= 0 && fd >= 0);
    dup2 (fd, 2);
    close (fd);
    alarm (20); /* a hang is a failure, not a stuck test run */
    fh_crashlog_t *log = fh_crashlog_open (dir, keep, err, errlen);
    alarm (0);
    fflush (stderr);
    dup2 (saved, 2);
    close (saved);
    FILE *in = fopen (path, "r");
    assert_non_null (in);
    *lines = 0;
    for (int c; (c = fgetc (in)) != EOF;)
        *lines += c == '\n';
    fclose (in);
    unlink (path);
    return log;
}

static void
test_fifo_refused_without_hang (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[512];
    size_t lines;
    snprintf (path, sizeof path, "%s/crashes", f->root);
    assert_int_equal (mkfifo (path, 0600), 0);
    for (int keep = 1; keep >= 0; keep--) {
        assert_null (s_open_counting (f->root, keep, err, sizeof err, &lines));
        assert_non_null (strstr (err, path));
        assert_non_null (strstr (err, "a FIFO"));
    }
}

static void
test_symlink_refused_target_untouched (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], target[256], err[512];
    size_t lines;
    snprintf (path, sizeof path, "%s/crashes", f->root);
    snprintf (target, sizeof target, "%s/precious", f->root);
    FILE *out = fopen (target, "w");
    assert_non_null (out);
    fputs ("fanhub-crash 1 5 0000000a 11\nprecious\n", out);
    fclose (out);
    assert_int_equal (symlink (target, path), 0);
    for (int keep = 1; keep >= 0; keep--) { /* keep false would have emptied it */
        assert_null (s_open_counting (f->root, keep, err, sizeof err, &lines));
        assert_non_null (strstr (err, "symbolic link"));
        assert_string_equal (s_read (target), "fanhub-crash 1 5 0000000a 11\nprecious\n");
    }
    /* Nor a dangling one (no file created through it). */
    assert_int_equal (unlink (path), 0);
    snprintf (target, sizeof target, "%s/nothing", f->root);
    assert_int_equal (symlink (target, path), 0);
    assert_null (s_open_counting (f->root, true, err, sizeof err, &lines));
    assert_int_equal (access (target, F_OK), -1);
}

static void
test_other_owner_refused (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[512];
    size_t lines;
    if (geteuid () != 0)
        skip (); /* only root can give a file away */
    snprintf (path, sizeof path, "%s/crashes", f->root);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    fputs ("fanhub-crash 1 5 0000000a 11\n", out);
    fclose (out);
    assert_int_equal (chown (path, 65534, 65534), 0);
    assert_null (s_open_counting (f->root, false, err, sizeof err, &lines));
    assert_non_null (strstr (err, "owned by uid 65534"));
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_size, 29); /* not emptied */
}

static void
test_garbage_and_zeros_resynchronised (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[512];
    size_t lines;
    snprintf (path, sizeof path, "%s/crashes", f->root);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    static const char zeros[40];
    fwrite (zeros, 1, sizeof zeros, out); /* a machine crash's unwritten blocks */
    fputs ("fanhub-crash 1 8 0badcafe 11\n"
           "fanhub-crash 1 8 0badcafe 11\n",
           out);
    fwrite (zeros, 1, 7, out);
    fputs ("fanhub-crash 1 9 0000", out); /* torn, the next glued to it */
    fputs ("fanhub-crash 1 8 0badcafe 6\n", out);
    fputs ("\xff\xfe junk fanhub-crash 1 3 00000001 7", out);
    fclose (out);
    fh_crashlog_t *log = s_open_counting (f->root, true, err, sizeof err, &lines);
    assert_non_null (log);
    assert_int_equal (lines, 1); /* one warning for all the skipped bytes */
    int sig = 0;
    assert_int_equal (fh_crashlog_messages (log), 2);
    assert_int_equal (fh_crashlog_crashes (log, 8, 0x0badcafe, &sig), 3);
    assert_int_equal (sig, SIGABRT);
    assert_int_equal (fh_crashlog_crashes (log, 3, 1, &sig), 1);
    assert_int_equal (fh_crashlog_crashes (log, 9, 0, NULL), 0);
    fh_crashlog_close (&log);
    /* Only zeros: an empty record, one warning. */
    out = fopen (path, "w");
    fwrite (zeros, 1, sizeof zeros, out);
    fclose (out);
    log = s_open_counting (f->root, true, err, sizeof err, &lines);
    assert_non_null (log);
    assert_int_equal (lines, 1);
    assert_int_equal (fh_crashlog_messages (log), 0);
    fh_crashlog_close (&log);
}

static void
test_big_record_read_quietly (void **state)
{
    test_dir_fixture_t *f = *state;
    char path[256], err[512];
    size_t lines;
    snprintf (path, sizeof path, "%s/crashes", f->root);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    size_t written = 0, records = 0;
    while (written < 15u * 1024 * 1024) {
        int n = fprintf (out, "fanhub-crash 1 %zu %08zx 11\n", 1000000 + records, records);
        written += (size_t) n;
        records++;
    }
    fclose (out);
    fh_crashlog_t *log = s_open_counting (f->root, true, err, sizeof err, &lines);
    assert_non_null (log);
    assert_int_equal (lines, 0);
    assert_int_equal (fh_crashlog_messages (log), records);
    assert_int_equal (
        fh_crashlog_crashes (log, 1000000 + records - 1, (uint32_t) (records - 1), NULL), 1);
    fh_crashlog_close (&log);
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
        cmocka_unit_test_setup_teardown (test_fifo_refused_without_hang, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_symlink_refused_target_untouched, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_other_owner_refused, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_garbage_and_zeros_resynchronised, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_big_record_read_quietly, s_setup, test_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
