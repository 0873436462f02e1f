/*  test_value - the one grammar of scalar values (hub/util/value.h). */
#include "value.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <limits.h>
#include <stdio.h>

static void
test_bool (void **state)
{
    (void) state;
    bool b = false;
    assert_true (fh_value_bool ("true", &b) && b);
    assert_true (fh_value_bool ("false", &b) && !b);
    const char *refused[] = {"True", "yes", "1", "", "truex", NULL};
    for (size_t i = 0; refused[i]; i++)
        assert_false (fh_value_bool (refused[i], &b));
    assert_false (fh_value_bool (NULL, &b));
}

static void
test_integer (void **state)
{
    (void) state;
    long long v = 0;
    assert_true (fh_value_integer ("0", false, &v) && v == 0);
    assert_true (fh_value_integer ("010", false, &v) && v == 10); /* not octal */
    assert_true (fh_value_integer ("-7", true, &v) && v == -7);
    assert_false (fh_value_integer ("-7", false, &v));
    assert_true (fh_value_integer ("9223372036854775807", false, &v) && v == LLONG_MAX);
    const char *refused[]
        = {"", "-", "+1", "1e3", "0x10", "1_000", " 1", "1 ", "9223372036854775808", NULL};
    for (size_t i = 0; refused[i]; i++)
        if (fh_value_integer (refused[i], true, &v))
            fail_msg ("'%s' taken as %lld", refused[i], v);
}

static void
test_duration (void **state)
{
    (void) state;
    static const struct {
        const char *text;
        long long bare_ms, ms;
        bool below;
    } taken[] = {
        {"250ms", 1000, 250, false},  {"2s", 1, 2000, false},
        {"1.5s", 1000, 1500, false},  {"1m", 1000, 60000, false},
        {"1.25m", 1, 75000, false},   {"1h", 1000, 3600000, false},
        {"0.001h", 1, 3600, false},   {"2.5", 1000, 2500, false},
        {"250", 1, 250, false},       {"0", 1000, 0, false},
        {"1.0019", 1000, 1001, true}, {"1.0010", 1000, 1001, false},
        {"1.5ms", 1000, 1, true},     {"3600.000000", 1000, 3600000, false},
    };
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        long long ms = -1;
        bool below = !taken[i].below;
        if (!fh_value_duration_ms (taken[i].text, taken[i].bare_ms, &ms, &below)
            || ms != taken[i].ms || below != taken[i].below)
            fail_msg ("'%s' (bare %lld ms): %lld ms, below %d; expected %lld, %d", taken[i].text,
                      taken[i].bare_ms, ms, below, taken[i].ms, taken[i].below);
    }
    const char *refused[] = {"",
                             "s",
                             "-1s",
                             "2.",
                             ".5",
                             "1e3",
                             "10d",
                             "10 s",
                             "1S",
                             "1sec",
                             "99999999999999999999999",
                             "9223372036854775807h",
                             "9223372036854775.999s", /* the fraction overflows */
                             NULL};
    for (size_t i = 0; refused[i]; i++) {
        long long ms;
        if (fh_value_duration_ms (refused[i], 1000, &ms, NULL))
            fail_msg ("'%s' taken as %lld ms", refused[i], ms);
    }
}

static void
test_size (void **state)
{
    (void) state;
    static const struct {
        const char *text;
        long long bytes;
    } taken[] = {
        {"4096", 4096},    {"0", 0},        {"1B", 1},         {"64KiB", 65536},  {"64K", 65536},
        {"1MiB", 1 << 20}, {"2M", 2 << 20}, {"1GiB", 1 << 30}, {"3G", 3LL << 30},
    };
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        long long bytes = -1;
        if (!fh_value_size (taken[i].text, &bytes) || bytes != taken[i].bytes)
            fail_msg ("'%s': %lld bytes, expected %lld", taken[i].text, bytes, taken[i].bytes);
    }
    const char *refused[]
        = {"", "KiB", "-1", "1.5MiB", "1kb", "1 KiB", "1T", "9223372036854775807K", NULL};
    for (size_t i = 0; refused[i]; i++) {
        long long bytes;
        if (fh_value_size (refused[i], &bytes))
            fail_msg ("'%s' taken as %lld bytes", refused[i], bytes);
    }
}

static void
test_number (void **state)
{
    (void) state;
    static const struct {
        const char *text;
        double value;
    } taken[] = {{"0", 0}, {"10", 10}, {"0.5", 0.5}, {"1e3", 1000}, {"-2", -2}};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        double value = -1;
        if (!fh_value_number (taken[i].text, &value) || value != taken[i].value)
            fail_msg ("'%s': %g, expected %g", taken[i].text, value, taken[i].value);
    }
    const char *refused[] = {"", "fast", "1x", "inf", "nan", "1e999", NULL};
    for (size_t i = 0; refused[i]; i++) {
        double value;
        if (fh_value_number (refused[i], &value))
            fail_msg ("'%s' taken as %g", refused[i], value);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_bool),     cmocka_unit_test (test_integer),
        cmocka_unit_test (test_duration), cmocka_unit_test (test_size),
        cmocka_unit_test (test_number),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
