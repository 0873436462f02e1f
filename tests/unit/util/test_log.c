/*  test_log - hub/util/log.c's fh_log_limited: one line per interval for a
    recurring problem, and the next line says how many were held back.
    Time is not waited for: the limiter's next_ns is moved instead. A line
    cut for length (on stderr at 2 KiB, in the status page's recent lines
    at 255 bytes) is cut between UTF-8 characters (issue 39, item 10). */
#include "log.h"

#include "fanhub/sdk.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What fh_log wrote to stderr while fn ran with the limiter. */
static void
s_capture (void (*fn) (fh_ratelimit_t *), fh_ratelimit_t *limit, char *out, size_t size)
{
    fflush (stderr);
    char path[512];
    int fd = mkstemp (test_tmp_template (path, sizeof path, "fanhub-test-log"));
    assert_true (fd >= 0);
    int saved = dup (STDERR_FILENO);
    assert_true (saved >= 0);
    assert_true (dup2 (fd, STDERR_FILENO) >= 0);
    fn (limit);
    fflush (stderr);
    assert_true (dup2 (saved, STDERR_FILENO) >= 0);
    close (saved);
    ssize_t got = pread (fd, out, size - 1, 0);
    assert_true (got >= 0);
    out[got] = '\0';
    close (fd);
    unlink (path);
}

static void
s_three (fh_ratelimit_t *limit)
{
    for (int i = 1; i <= 3; i++)
        fh_log_limited (limit, FANHUB_LOG_WARNING, "spool %d: cannot write", i);
}

static void
s_one (fh_ratelimit_t *limit)
{
    fh_log_limited (limit, FANHUB_LOG_ERROR, "spool %d: cannot write", 4);
}

static void
test_log_limited (void **state)
{
    (void) state;
    unsetenv ("JOURNAL_STREAM");
    fh_ratelimit_t limit = {0};
    char text[4096];
    s_capture (s_three, &limit, text, sizeof text);
    assert_string_equal (text, "fanhub: warning: spool 1: cannot write\n");
    assert_int_equal (limit.suppressed, 2);
    /* Within the interval: nothing. */
    s_capture (s_one, &limit, text, sizeof text);
    assert_string_equal (text, "");
    /* The interval has passed: the count of those held back. */
    limit.next_ns = 0;
    s_capture (s_one, &limit, text, sizeof text);
    assert_string_equal (text, "fanhub: error: spool 4: cannot write (3 more like it not shown)\n");
    assert_int_equal (limit.suppressed, 0);
    /* None held back: the plain line. */
    limit.next_ns = 0;
    s_capture (s_one, &limit, text, sizeof text);
    assert_string_equal (text, "fanhub: error: spool 4: cannot write\n");
}

static void
s_long (fh_ratelimit_t *limit)
{
    (void) limit;
    char pad[3000];
    memset (pad, 'a', sizeof pad);
    pad[254] = '\0'; /* "é" at bytes 254-255 of the text: a 255-byte cut splits it */
    fh_log (FANHUB_LOG_WARNING, "%s\xc3\xa9 end", pad);
    pad[254] = 'a';
    /* "fanhub: warning: " is 17 bytes; the body's room 2048 - 17 - 1 keeps
       2029 bytes: a "€" from body byte 2028 is split. */
    pad[2028] = '\0';
    fh_log (FANHUB_LOG_WARNING, "%s\xe2\x82\xac tail", pad);
}

static void
test_cut_between_characters (void **state)
{
    (void) state;
    unsetenv ("JOURNAL_STREAM");
    char text[8192];
    s_capture (s_long, NULL, text, sizeof text);
    assert_true (fanhub_utf8_valid (text, strlen (text)));
    char *second = strchr (text, '\n') + 1;
    assert_int_equal (strlen (second), 17 + 2028 + 1); /* the € went whole, then \n */
    fh_log_line_t lines[FH_LOG_RECENT];
    size_t n = fh_log_recent (lines, FH_LOG_RECENT);
    assert_true (n >= 2);
    assert_int_equal (strlen (lines[n - 2].text), 254); /* the é went whole */
    assert_true (fanhub_utf8_valid (lines[n - 2].text, 254));
    assert_true (fanhub_utf8_valid (lines[n - 1].text, strlen (lines[n - 1].text)));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_log_limited),
        cmocka_unit_test (test_cut_between_characters),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
