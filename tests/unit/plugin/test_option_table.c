/*  test_option_table - options read against a plugin's option table
    (hub/plugin/option_table.c, ABI 1.2): the cases a plugin's own tests do not
    reach (units, bounds, defaults, a wrong table, the printed table).
    The integration test test_option_tables covers the messages in
    `fanhub check`. */
#include "host.h"
#include "option_table.h"
#include "option_value.h"
#include "options.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

typedef struct {
    int64_t wait_ms;
    uint64_t size;
    uint64_t count;
    double ratio;
    bool flag;
    const char *name;
} values_t;

static const char *const s_none[] = {NULL};

#define OPT(name, type, field, def, lo, hi)                                                        \
    {                                                                                              \
        name, type, offsetof (values_t, field), def, lo, hi, NULL, 0, NULL                         \
    }
static const fanhub_opt_t s_table[] = {
    OPT ("wait", FANHUB_OPT_DURATION, wait_ms, "1h", 0, 0),
    OPT ("size", FANHUB_OPT_SIZE, size, "1G", 0, 0),
    OPT ("count", FANHUB_OPT_UINT, count, NULL, 0, 0),
    OPT ("ratio", FANHUB_OPT_DOUBLE, ratio, "2.5", 0, 0),
    OPT ("flag", FANHUB_OPT_BOOL, flag, "true", 0, 0),
    OPT ("name", FANHUB_OPT_STRING, name, "x", 0, 0),
    FANHUB_OPT_END,
};

/* Reads {key: text} (or {} when key is NULL) against table; err gets the
   message. */
static int
s_read (const fanhub_opt_t *table, const char *key, const char *text, values_t *out, char *err,
        size_t errlen)
{
    fanhub_option_t *map = fh_option_new (FANHUB_OPTION_MAP, NULL, "t:1:1");
    if (key)
        assert_int_equal (
            fh_option_append (map, key, fh_option_new (FANHUB_OPTION_SCALAR, text, "t:1:5")), 0);
    memset (out, 0, sizeof *out);
    err[0] = '\0';
    int rc = fh_option_table_read (&fh_host, "p", table, map, out, sizeof *out, err, errlen);
    fh_option_destroy (&map);
    return rc;
}

static void
test_defaults_and_units (void **state)
{
    (void) state;
    values_t v;
    char err[512];
    assert_int_equal (
        fh_option_table_read (&fh_host, "p", s_table, NULL, &v, sizeof v, err, sizeof err), 0);
    assert_int_equal (v.wait_ms, 3600000);
    assert_int_equal (v.size, 1073741824);
    assert_true (v.ratio == 2.5 && v.flag && strcmp (v.name, "x") == 0);
    static const struct {
        const char *key, *text;
        uint64_t want;
    } ok[] = {
        {"wait", "250", 250},      {"wait", "250ms", 250},       {"wait", "2s", 2000},
        {"wait", "3m", 180000},    {"size", "10", 10},           {"size", "10B", 10},
        {"size", "2K", 2048},      {"size", "2KiB", 2048},       {"size", "3M", 3145728},
        {"size", "3MiB", 3145728}, {"size", "1GiB", 1073741824}, {"count", "0", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal (s_read (s_table, ok[i].key, ok[i].text, &v, err, sizeof err), 0);
        uint64_t got = ok[i].key[0] == 'w'   ? (uint64_t) v.wait_ms
                       : ok[i].key[0] == 's' ? v.size
                                             : v.count;
        assert_int_equal (got, ok[i].want);
    }
}

static void
test_refusals (void **state)
{
    (void) state;
    static const struct {
        const char *key, *text, *want;
    } bad[] = {
        {"wait", "2d",
         "options.wait: expected a duration such as 250ms, 2s or 1m, got \"2d\" "
         "(t:1:5)"},
        {"wait", "999999999999999999h",
         "options.wait: expected a duration such as 250ms, 2s "
         "or 1m, got \"999999999999999999h\" (t:1:5)"},
        {"wait", "-1s",
         "options.wait: expected a duration such as 250ms, 2s or 1m, got "
         "\"-1s\" (t:1:5)"},
        {"size", "1T",
         "options.size: expected a size such as 4096, 64KiB or 1MiB from 0 up, "
         "got \"1T\" (t:1:5)"},
        {"count", "-1", "options.count: expected an integer from 0 up, got \"-1\" (t:1:5)"},
        {"count", "1ms", "options.count: expected an integer from 0 up, got \"1ms\" (t:1:5)"},
        {"ratio", "nan", "options.ratio: expected a number, got \"nan\" (t:1:5)"},
        {"ratio", "inf", "options.ratio: expected a number, got \"inf\" (t:1:5)"},
        {"ratio", "1e999", "options.ratio: expected a number, got \"1e999\" (t:1:5)"},
        {"ratio", "", "options.ratio: expected a number, got \"\" (t:1:5)"},
        {"flag", "True", "options.flag: expected true or false, got \"True\" (t:1:5)"},
        {"other", "1",
         "options.other: unknown option; p takes wait, size, count, ratio, "
         "flag and name (t:1:5)"},
    };
    values_t v;
    char err[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal (s_read (s_table, bad[i].key, bad[i].text, &v, err, sizeof err), -1);
        assert_string_equal (err, bad[i].want);
    }
    /* An empty table takes nothing; an enum without values takes nothing. */
    static const fanhub_opt_t empty[] = {FANHUB_OPT_END};
    assert_int_equal (s_read (empty, "a", "1", &v, err, sizeof err), -1);
    assert_string_equal (err, "options.a: unknown option; p takes no options (t:1:5)");
    const fanhub_opt_t no_values[]
        = {{"e", FANHUB_OPT_ENUM, offsetof (values_t, count), NULL, 0, 0, s_none, 0, NULL},
           FANHUB_OPT_END};
    assert_int_equal (s_read (no_values, "e", "x", &v, err, sizeof err), -1);
    assert_string_equal (err, "options.e: expected , got \"x\" (t:1:5)");
    /* REQUIRED without a help text. */
    const fanhub_opt_t required[] = {{"r", FANHUB_OPT_BOOL, offsetof (values_t, flag), NULL, 0, 0,
                                      NULL, FANHUB_OPT_REQUIRED, NULL},
                                     FANHUB_OPT_END};
    assert_int_equal (s_read (required, NULL, NULL, &v, err, sizeof err), -1);
    assert_string_equal (err, "options.r: missing: required (t:1:1)");
}

/* The hub's FH_OPT_SECONDS (its configuration's seconds keys) means
   nothing in a plugin's table: a bare duration stays milliseconds. */
static void
test_hub_flag_ignored (void **state)
{
    (void) state;
    const fanhub_opt_t table[] = {{"wait", FANHUB_OPT_DURATION, offsetof (values_t, wait_ms), NULL,
                                   0, 10, NULL, FH_OPT_SECONDS, NULL},
                                  FANHUB_OPT_END};
    values_t v;
    char err[256];
    assert_int_equal (s_read (table, "wait", "2", &v, err, sizeof err), 0);
    assert_int_equal (v.wait_ms, 2);
    assert_int_equal (s_read (table, "wait", "11", &v, err, sizeof err), -1);
    assert_string_equal (err, "options.wait: expected a duration such as 250ms, 2s or 1m from 0 "
                              "to 10 ms, got \"11\" (t:1:5)");
}

static void
test_wrong_tables (void **state)
{
    (void) state;
    values_t v;
    char err[512];
    const fanhub_opt_t too_far[]
        = {{"x", FANHUB_OPT_INT, sizeof (values_t) - 4, NULL, 0, 0, NULL, 0, NULL}, FANHUB_OPT_END};
    assert_int_equal (s_read (too_far, NULL, NULL, &v, err, sizeof err), -1);
    assert_non_null (strstr (err, "plugin p: its option table is wrong at x (type 3, offset"));
    const fanhub_opt_t bad_type[]
        = {{"x", (fanhub_opt_type_t) 99, 0, NULL, 0, 0, NULL, 0, NULL}, FANHUB_OPT_END};
    assert_int_equal (s_read (bad_type, NULL, NULL, &v, err, sizeof err), -1);
    assert_non_null (strstr (err, "its option table is wrong at x (type 99"));
    const fanhub_opt_t any_default[]
        = {{"x", FANHUB_OPT_ANY, 0, "1", 0, 0, NULL, 0, NULL}, FANHUB_OPT_END};
    assert_int_equal (s_read (any_default, NULL, NULL, &v, err, sizeof err), -1);
    assert_non_null (strstr (err, "its option table is wrong at x"));
    const fanhub_opt_t bad_default[]
        = {{"x", FANHUB_OPT_INT, offsetof (values_t, wait_ms), "ten", 0, 0, NULL, 0, NULL},
           FANHUB_OPT_END};
    assert_int_equal (s_read (bad_default, NULL, NULL, &v, err, sizeof err), -1);
    assert_string_equal (err, "options.x: expected an integer, got \"ten\" "
                              "(the plugin's default)");
}

static void
test_print (void **state)
{
    (void) state;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    assert_non_null (out);
    static const fanhub_opt_t empty[] = {FANHUB_OPT_END};
    fh_option_table_print (out, empty);
    fh_option_table_print (out, s_table);
    fclose (out);
    assert_non_null (strstr (text, "(takes no options)\nOPTION "));
    assert_non_null (strstr (text, "\nwait                 duration  1h         -  "));
    assert_non_null (strstr (text, "\ncount                unsigned  -          -  "));
    assert_string_equal (fh_option_type_name ((fanhub_opt_type_t) 0), "?");
    free (text);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_defaults_and_units),
        cmocka_unit_test (test_refusals),
        cmocka_unit_test (test_hub_flag_ignored),
        cmocka_unit_test (test_wrong_tables),
        cmocka_unit_test (test_print),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
