/*  Tests of fh_clock_parse_rfc3339: the one reader of RFC 3339 times
    (fanhub replay's `at`, fedora-messaging's sent-at header). */
#include "clock.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static int64_t
s_parsed (const char *text)
{
    int64_t ns = -12345;
    assert_true (fh_clock_parse_rfc3339 (text, &ns));
    return ns;
}

static void
s_refused (const char *text)
{
    int64_t ns = -12345;
    assert_false (fh_clock_parse_rfc3339 (text, &ns));
    assert_int_equal (ns, -12345); /* untouched */
}

static void
test_zones_and_fractions (void **state)
{
    (void) state;
    const int64_t s = INT64_C (1000000000);
    assert_int_equal (s_parsed ("1970-01-01T00:00:00Z"), 0);
    /* fedora-messaging's sent-at, and the same moment in other zones */
    assert_int_equal (s_parsed ("2024-06-21T12:52:29+00:00"), INT64_C (1718974349) * s);
    assert_int_equal (s_parsed ("2024-06-21T14:52:29+02:00"), INT64_C (1718974349) * s);
    assert_int_equal (s_parsed ("2024-06-21T07:22:29-05:30"), INT64_C (1718974349) * s);
    assert_int_equal (s_parsed ("2024-06-21t12:52:29z"), INT64_C (1718974349) * s);
    assert_int_equal (s_parsed ("2024-06-21 12:52:29Z"), INT64_C (1718974349) * s);
    assert_int_equal (s_parsed ("2024-06-21T12:52:29.123456+00:00"),
                      INT64_C (1718974349) * s + 123456000);
    /* Digits below the nanosecond are dropped, not rounded. */
    assert_int_equal (s_parsed ("1970-01-01T00:00:01.0000000019Z"), s + 1);
    assert_int_equal (s_parsed ("1969-12-31T23:59:59Z"), -s);
    assert_int_equal (s_parsed ("2000-02-29T00:00:00Z"), INT64_C (951782400) * s);
}

static void
test_what_is_not_a_time (void **state)
{
    (void) state;
    s_refused ("");
    s_refused ("2024-06-21T12:52:29"); /* no zone: which one is unknown */
    s_refused ("2024-06-21T12:52:29+0000");
    s_refused ("2024-06-21T12:52:29Z trailing");
    s_refused ("2024-06-21T12:52:29.Z");
    s_refused ("2024-13-01T00:00:00Z");
    s_refused ("2023-02-29T00:00:00Z");
    s_refused ("1900-02-29T00:00:00Z");
    s_refused ("2024-04-31T00:00:00Z");
    s_refused ("2024-06-21T24:00:00Z");
    s_refused ("2024-06-21T12:60:00Z");
    s_refused ("2024-06-21T12:52:29+24:00");
    s_refused ("24-06-21T12:52:29Z");
    s_refused ("2262-04-12T00:00:00Z"); /* past int64_t nanoseconds */
    s_refused ("1677-09-20T00:00:00Z");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_zones_and_fractions),
        cmocka_unit_test (test_what_is_not_a_time),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
