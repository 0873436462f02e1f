/*  test_option_types - the option types of ABI 1.4 (hub/plugin/option_table.c):
    lists of maps, maps with keys of their own and free ones, string-or-list,
    endpoints, secrets and alternatives. Each is read from YAML text (so
    every node has its FILE:LINE:COL), accepted in its good forms and
    refused, with the place, in every wrong one. A secret read before a
    later refusal is freed (ASan's leak check sees it). */
#include "host.h"
#include "option_table.h"
#include "options.h"
#include "options_yaml.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct {
    const fanhub_option_t *maps, *map, *free_map, *sol, *eps;
    const char *map_a, *ep, *one, *two;
    int64_t map_n;
    char *pw;
} values_t;

#define OPT(name, type, field, def, flags)                                                         \
    {                                                                                              \
        name, type, offsetof (values_t, field), def, 0, 0, NULL, flags, NULL                       \
    }
static const fanhub_opt_t s_table[] = {
    OPT ("maps", FANHUB_OPT_MAPS, maps, NULL, 0),
    OPT ("map", FANHUB_OPT_MAP, map, NULL, 0),
    OPT ("map.a", FANHUB_OPT_STRING, map_a, NULL, FANHUB_OPT_REQUIRED),
    OPT ("map.n", FANHUB_OPT_INT, map_n, "7", 0),
    OPT ("free", FANHUB_OPT_MAP, free_map, NULL, 0),
    OPT ("sol", FANHUB_OPT_STRING_OR_LIST, sol, NULL, 0),
    OPT ("ep", FANHUB_OPT_ENDPOINT, ep, NULL, 0),
    OPT ("eps", FANHUB_OPT_ENDPOINTS, eps, NULL, FANHUB_OPT_BIND),
    OPT ("pw", FANHUB_OPT_SECRET, pw, NULL, 0),
    OPT ("one", FANHUB_OPT_STRING, one, NULL, 0),
    OPT ("two", FANHUB_OPT_STRING, two, NULL, FANHUB_OPT_ALTERNATIVE),
    FANHUB_OPT_END,
};

static char s_tight[64], s_loose[64]; /* secret files, mode 0600 and 0644 */

/* Reads YAML text against the table into v; err gets the message. The
   tree is gone on return: only scalars copied out may be looked at. */
static int
s_read (const char *yaml, values_t *v, char *err, size_t errlen)
{
    char text[512];
    const char *at = strstr (yaml, "TIGHT"); /* the 0600 file's path */
    if (at)
        snprintf (text, sizeof text, "%.*s%s%s", (int) (at - yaml), yaml, s_tight, at + 5);
    else
        snprintf (text, sizeof text, "%s", yaml);
    fanhub_option_t *map = fh_options_yaml_load_string (text, strlen (text), "t", err, errlen);
    assert_non_null (map);
    memset (v, 0, sizeof *v);
    err[0] = '\0';
    int rc = fh_option_table_read (&fh_host, "p", s_table, map, v, sizeof *v, err, errlen);
    if (rc == 0) {
        /* Still of the tree: checked here. */
        if (v->map_a)
            assert_string_equal (v->map_a, "x");
        if (v->sol)
            assert_true (fanhub_option_items (&fh_host, v->sol) >= 1);
    }
    else
        assert_null (v->pw); /* a secret read before the refusal is freed */
    fh_option_destroy (&map);
    return rc;
}

static int
s_setup (void **state)
{
    (void) state;
    snprintf (s_tight, sizeof s_tight, "/tmp/fh-opt-tight-%d", (int) getpid ());
    snprintf (s_loose, sizeof s_loose, "/tmp/fh-opt-loose-%d", (int) getpid ());
    const char *paths[] = {s_tight, s_loose};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen (paths[i], "w");
        if (!f)
            return -1;
        fputs ("s3cret\nsecond line\n", f);
        fclose (f);
        chmod (paths[i], i == 0 ? 0600 : 0644);
    }
    setenv ("FH_OPT_TEST_SECRET", "from-env", 1);
    unsetenv ("FH_OPT_TEST_UNSET");
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    unlink (s_tight);
    unlink (s_loose);
    return 0;
}

static void
test_accepted (void **state)
{
    (void) state;
    values_t v;
    char err[512];
    static const char *const ok[] = {
        "{maps: [{a: 1}, {b: [2]}]}",
        "{map: {a: x}}",
        "{free: {x: [1], y: {z: 1}}}",
        "{sol: abc}",
        "{sol: [a, b]}",
        "{ep: 'tcp://127.0.0.1:5555'}",
        "{eps: 'tcp://*:5555'}",
        "{eps: ['tcp://127.0.0.1:*', 'ipc:///tmp/x', 'inproc://y']}",
        "{one: a}",
        "{two: b}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (s_read (ok[i], &v, err, sizeof err) != 0)
            fail_msg ("%s: %s", ok[i], err);
    /* The keys of a map have their defaults, given or not. */
    assert_int_equal (s_read ("{}", &v, err, sizeof err), 0);
    assert_int_equal (v.map_n, 7);
    assert_null (v.map);
    assert_int_equal (s_read ("{map: {a: x, n: 3}}", &v, err, sizeof err), 0);
    assert_int_equal (v.map_n, 3);
    /* A secret: the file's first line, or the variable; the plugin's. */
    assert_int_equal (s_read ("{pw_file: TIGHT}", &v, err, sizeof err), 0);
    assert_string_equal (v.pw, "s3cret");
    free (v.pw);
    assert_int_equal (s_read ("{pw_env: FH_OPT_TEST_SECRET}", &v, err, sizeof err), 0);
    assert_string_equal (v.pw, "from-env");
    free (v.pw);
}

static void
test_refused (void **state)
{
    (void) state;
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"{maps: {a: 1}}", "options.maps: expected a list of maps, got a map (t:1:8)"},
        {"{maps: [a]}", "options.maps[0]: expected a map, got a scalar (t:1:9)"},
        {"{map: [a]}", "options.map: expected a map {a, n}, got a list (t:1:7)"},
        {"{map: {n: 1}}", "options.map.a: missing: required (t:1:7)"},
        {"{map: {a: x, b: 1}}", "options.map.b: unknown key; map takes a and n (t:1:17)"},
        {"{map: {a: x, n: many}}", "options.map.n: expected an integer, got \"many\" (t:1:17)"},
        {"{free: x}", "options.free: expected a map, got \"x\" (t:1:8)"},
        {"{sol: {a: 1}}", "options.sol: expected a string or a list of strings, got a map (t:1:7)"},
        {"{sol: []}", "options.sol: expected at least one string, got an empty list (t:1:7)"},
        {"{sol: [a, [b]]}", "options.sol[1]: expected a string, got a list (t:1:11)"},
        {"{ep: [a]}",
         "options.ep: expected an endpoint such as tcp://127.0.0.1:9941, got a list (t:1:6)"},
        {"{ep: 'tcp://127.0.0.1'}",
         "options.ep: expected a ZeroMQ endpoint, got \"tcp://127.0.0.1\": expected "
         "tcp://HOST:PORT (t:1:6)"},
        {"{eps: {a: 1}}",
         "options.eps: expected an endpoint or a list of endpoints, got a map (t:1:7)"},
        {"{eps: []}", "options.eps: expected at least one endpoint, got an empty list (t:1:7)"},
        {"{eps: ['tcp://*:1', foo]}",
         "options.eps[1]: expected a ZeroMQ endpoint, got \"foo\": expected TRANSPORT://ADDRESS "
         "(tcp://HOST:PORT, ipc://PATH or inproc://NAME) (t:1:21)"},
        {"{pw_file: [a]}", "options.pw_file: expected a file name, got a list (t:1:11)"},
        {"{pw_env: ''}", "options.pw_env: must not be empty (t:1:10)"},
        {"{pw_env: FH_OPT_TEST_UNSET}",
         "options.pw_env: the environment variable FH_OPT_TEST_UNSET is not set, or empty "
         "(t:1:10)"},
        {"{pw_file: /nonexistent/pw}",
         "options.pw_file: /nonexistent/pw: No such file or directory (t:1:11)"},
        {"{pw_file: TIGHT, pw_env: FH_OPT_TEST_SECRET}",
         "options.pw_env: give pw_file or pw_env, not both (t:1:"},
        {"{pw_env: FH_OPT_TEST_SECRET, one: a, two: b}",
         "options.two: give one or two, not both (t:1:43)"},
        {"{two: b, one: a}", "options.one: give one or two, not both (t:1:15)"},
        {"{pw: x}",
         "options.pw: unknown option; p takes maps, map, free, sol, ep, eps, pw_file, pw_env, "
         "one and two (t:1:6)"},
    };
    values_t v;
    char err[512];
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (s_read (cases[i].yaml, &v, err, sizeof err) != -1
            || strncmp (err, cases[i].want, strlen (cases[i].want)) != 0) {
            print_error ("%s:\n got: %s\nwant: %s\n", cases[i].yaml, err, cases[i].want);
            failed++;
        }
    }
    assert_int_equal (failed, 0);
    /* A secret file others may read: refused, with the place, the
       secret not in the message. */
    char loose[128];
    snprintf (loose, sizeof loose, "{pw_file: %s}", s_loose);
    assert_int_equal (s_read (loose, &v, err, sizeof err), -1);
    assert_non_null (strstr (err, "other users may read or change it; refusing it"));
    assert_non_null (strstr (err, "(t:1:11)"));
    assert_null (strstr (err, "s3cret"));
    /* A connect endpoint may not be a wildcard. */
    assert_int_equal (s_read ("{ep: 'tcp://*:5555'}", &v, err, sizeof err), -1);
    assert_non_null (strstr (err, "options.ep: expected a ZeroMQ endpoint, got \"tcp://*:5555\""));
}

static void
test_check_frees_the_secret (void **state)
{
    (void) state;
    char err[512];
    const char *text = "{pw_env: FH_OPT_TEST_SECRET}";
    fanhub_option_t *map = fh_options_yaml_load_string (text, strlen (text), "t", err, sizeof err);
    assert_non_null (map);
    /* What the host does before init: read into scratch, secret freed. */
    assert_int_equal (fh_option_table_check (&fh_host, "p", s_table, map, err, sizeof err), 0);
    fh_option_destroy (&map);
}

static void
test_wrong_tables (void **state)
{
    (void) state;
    values_t v;
    char err[512];
    const fanhub_opt_t secret_default[]
        = {OPT ("pw", FANHUB_OPT_SECRET, pw, "x", 0), FANHUB_OPT_END};
    assert_int_equal (
        fh_option_table_read (&fh_host, "p", secret_default, NULL, &v, sizeof v, err, sizeof err),
        -1);
    assert_non_null (strstr (err, "plugin p: its option table is wrong at pw"));
    const fanhub_opt_t map_default[] = {OPT ("m", FANHUB_OPT_MAP, map, "{}", 0), FANHUB_OPT_END};
    assert_int_equal (
        fh_option_table_read (&fh_host, "p", map_default, NULL, &v, sizeof v, err, sizeof err), -1);
    assert_non_null (strstr (err, "its option table is wrong at m"));
}

static void
test_print (void **state)
{
    (void) state;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    assert_non_null (out);
    fh_option_table_print (out, s_table);
    fclose (out);
    assert_non_null (strstr (text, "\npw_file|_env         secret "));
    assert_non_null (strstr (text, "\nmap.n                integer   7 "));
    assert_non_null (strstr (text, "\neps                  endpoints "));
    free (text);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_accepted),
        cmocka_unit_test (test_refused),
        cmocka_unit_test (test_check_frees_the_secret),
        cmocka_unit_test (test_wrong_tables),
        cmocka_unit_test (test_print),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
