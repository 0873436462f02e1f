/*  test_options_yaml - a plugin's options read from a file of their own
    (hub/plugin/options_yaml.c), through the configuration's YAML loader
    (hub/config/config_yaml.c): the same rules and limits as a consumer's
    options: in the configuration. */
#include "options_yaml.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_dir.h"

static fanhub_option_t *
s_load (const char *text, char *err, size_t errlen)
{
    return fh_options_yaml_load_string (text, strlen (text), "o.yaml", err, errlen);
}

static void
test_a_map_with_places (void **state)
{
    (void) state;
    char err[512];
    fanhub_option_t *options
        = s_load ("path: &p \"-\"\nlist: [1, {k: v}]\nagain: *p\n", err, sizeof err);
    if (!options)
        fail_msg ("%s", err);
    assert_int_equal (fh_option_kind (options), FANHUB_OPTION_MAP);
    assert_int_equal (fh_option_count (options), 3);
    assert_string_equal (fh_option_scalar (fh_option_get (options, "path")), "-");
    assert_string_equal (fh_option_where (fh_option_get (options, "path")), "o.yaml:1:7");
    assert_string_equal (fh_option_scalar (fh_option_get (options, "again")), "-");
    const fanhub_option_t *list = fh_option_get (options, "list");
    assert_int_equal (fh_option_count (list), 2);
    assert_string_equal (fh_option_where (fh_option_at (list, 1, NULL)), "o.yaml:2:11");
    fh_option_destroy (&options);
    fh_option_destroy (&options);
}

static void
test_nothing_is_an_empty_map (void **state)
{
    (void) state;
    static const char *const empties[] = {"", "# only a comment\n", "~\n", "---\n"};
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
        char err[512] = "";
        fanhub_option_t *options = s_load (empties[i], err, sizeof err);
        if (!options)
            fail_msg ("'%s': %s", empties[i], err);
        assert_int_equal (fh_option_kind (options), FANHUB_OPTION_MAP);
        assert_int_equal (fh_option_count (options), 0);
        fh_option_destroy (&options);
    }
    /* NULL text, and no err buffer, are allowed. */
    fanhub_option_t *options = fh_options_yaml_load_string (NULL, 0, NULL, NULL, 0);
    assert_non_null (options);
    assert_string_equal (fh_option_where (options), "<string>:1:1");
    fh_option_destroy (&options);
    assert_null (fh_options_yaml_load_string ("- a\n", 4, NULL, NULL, 0));
}

typedef struct {
    const char *name;
    const char *text;
    const char *error; /* the exact message */
} s_error_case_t;

static const s_error_case_t s_error_cases[] = {
    {"a list", "- a\n",
     "o.yaml:1:1: options: expected a map of plugin options (what a consumer's options: "
     "holds), got a list"},
    {"a scalar", "hello\n",
     "o.yaml:1:1: options: expected a map of plugin options (what a consumer's options: "
     "holds), got a single value"},
    {"duplicate key", "a: 1\nb: {c: 1, c: 2}\n",
     "o.yaml:2:11: options.b.c: duplicate key (first at line 2)"},
    {"a key that is a list", "[a]: 1\n", "o.yaml:1:1: options: expected a key, got a list"},
    {"a null key", "~: 1\n", "o.yaml:1:1: options: expected a key, got nothing"},
    {"a NUL in a value", "a: \"x\\0y\"\n",
     "o.yaml:1:4: options.a: a value with a NUL character is not supported"},
    {"an alias into itself", "a: &x [1, *x]\n",
     "o.yaml:1:4: options.a[1]: an alias refers to a value that contains it"},
    {"two documents", "a: 1\n---\nb: 2\n",
     "o.yaml:2:1: options: a second YAML document: the file of plugin options is one "
     "document"},
    {"syntax", "a: [1, 2\n",
     "o.yaml:2:1: options: YAML syntax error: did not find expected ',' or ']' (while "
     "parsing a flow sequence)"},
};

static void
test_errors (void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof s_error_cases / sizeof s_error_cases[0]; i++) {
        const s_error_case_t *c = &s_error_cases[i];
        char err[512] = "";
        fanhub_option_t *options = s_load (c->text, err, sizeof err);
        if (options || strcmp (err, c->error) != 0)
            fail_msg ("%s: got \"%s\"", c->name, options ? "a tree" : err);
    }
}

/* The limits are the configuration's: nesting, values, bytes. */
static void
test_limits (void **state)
{
    (void) state;
    char err[512];
    char deep[256];
    size_t len = (size_t) snprintf (deep, sizeof deep, "a: ");
    for (int i = 0; i < 70; i++)
        deep[len++] = '[';
    for (int i = 0; i < 70; i++)
        deep[len++] = ']';
    deep[len] = '\0';
    assert_null (s_load (deep, err, sizeof err));
    if (!strstr (err, "options nest more than 64 levels"))
        fail_msg ("got \"%s\"", err);

    char deeper[512];
    len = 0;
    for (int i = 0; i < 200; i++)
        deeper[len++] = '[';
    deeper[len] = '\0';
    assert_null (s_load (deeper, err, sizeof err));
    assert_string_equal (err, "o.yaml:1:129: nested deeper than 128 levels");

    static const char laughs[] = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                                 "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                                 "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                                 "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                                 "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                                 "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
    assert_null (s_load (laughs, err, sizeof err));
    if (!strstr (err, "more than 100000 option values (aliases expanded)"))
        fail_msg ("got \"%s\"", err);

    size_t big = 16 * 1024 * 1024 + 1;
    char *huge = malloc (big);
    assert_non_null (huge);
    memset (huge, '#', big);
    assert_null (fh_options_yaml_load_string (huge, big, "o.yaml", err, sizeof err));
    assert_string_equal (err, "o.yaml: 16777217 bytes: a file of plugin options is at most "
                              "16 MiB");
    free (huge);
}

static void
test_files (void **state)
{
    (void) state;
    char err[512];
    assert_null (fh_options_yaml_load_file ("/nonexistent/o.yaml", err, sizeof err));
    assert_string_equal (err, "/nonexistent/o.yaml: cannot open: No such file or directory");
    assert_null (fh_options_yaml_load_file ("/tmp", err, sizeof err));
    assert_string_equal (err, "/tmp: cannot open: Is a directory");

    char path[512];
    int fd = mkstemp (test_tmp_template (path, sizeof path, "test_options_yaml"));
    assert_true (fd >= 0);
    static const char text[] = "flush_ms: lots\n";
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    fanhub_option_t *options = fh_options_yaml_load_file (path, err, sizeof err);
    if (!options)
        fail_msg ("%s", err);
    char where[600];
    snprintf (where, sizeof where, "%s:1:11", path);
    assert_string_equal (fh_option_where (fh_option_get (options, "flush_ms")), where);
    fh_option_destroy (&options);

    /* Longer than the loader takes: refused while reading. */
    assert_int_equal (ftruncate (fd, 16 * 1024 * 1024 + 4096), 0);
    assert_null (fh_options_yaml_load_file (path, err, sizeof err));
    char want[640];
    snprintf (want, sizeof want, "%s: longer than 16 MiB, the most a YAML file may be", path);
    assert_string_equal (err, want);
    close (fd);
    unlink (path);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_a_map_with_places),
        cmocka_unit_test (test_nothing_is_an_empty_map),
        cmocka_unit_test (test_errors),
        cmocka_unit_test (test_limits),
        cmocka_unit_test (test_files),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
