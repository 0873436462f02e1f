/*  test_config_include - drop-ins (include:) and ${VAR} in the
    configuration (hub/config/config_include.c, config_env.c).

    Each test writes a main file and its drop-ins into a fresh directory
    and loads the main file as `run`, `check` and a reload do.
*/
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_dir.h"

#define BUS "bus:\n  connect: tcp://127.0.0.1:9940\n"

static int
s_setup (void **state)
{
    setenv ("XDG_RUNTIME_DIR", "/tmp", 1);
    return test_dir_setup (state, "test_config_include", "conf.d");
}

static int
s_teardown (void **state)
{
    return test_dir_teardown (state);
}

/* Writes root/name (with its directory made). */
static void
s_write (const test_dir_fixture_t *f, const char *name, const char *text)
{
    char path[512];
    snprintf (path, sizeof path, "%s/conf.d", f->root);
    mkdir (path, 0755);
    snprintf (path, sizeof path, "%s/%s", f->root, name);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    assert_int_equal (fputs (text, file) >= 0, 1);
    assert_int_equal (fclose (file), 0);
}

static fh_config_t *
s_load (const test_dir_fixture_t *f, char *err, size_t errlen)
{
    char path[512];
    snprintf (path, sizeof path, "%s/fanhub.yaml", f->root);
    return fh_config_load_file (path, err, errlen);
}

/* The error of loading the main file, with the root's path cut out:
   "<root>/x.yaml:1:2: ..." reads "x.yaml:1:2: ...". */
static void
s_expect_error (const test_dir_fixture_t *f, const char *expected)
{
    char err[1024] = "";
    fh_config_t *cfg = s_load (f, err, sizeof err);
    if (cfg) {
        fh_config_destroy (&cfg);
        fail_msg ("loaded; expected \"%s\"", expected);
    }
    char cut[1024];
    size_t root = strlen (f->root);
    size_t out = 0;
    for (size_t i = 0; err[i] && out + 1 < sizeof cut; i++) {
        if (strncmp (err + i, f->root, root) == 0 && err[i + root] == '/') {
            i += root;
            continue;
        }
        cut[out++] = err[i];
    }
    cut[out] = '\0';
    if (strcmp (cut, expected) != 0)
        fail_msg ("got      \"%s\"\nexpected \"%s\"", cut, expected);
}

/* The drop-ins' consumers come after the main file's, in include: order
   and, within a glob, sorted by file name; each keeps its own where. */
static void
test_merge (void **state)
{
    test_dir_fixture_t *f = *state;
    s_write (f, "fanhub.yaml",
             BUS "include: [conf.d/*.yaml, extra.yaml]\n"
                 "consumers:\n  - {name: main, plugin: p}\n");
    s_write (f, "conf.d/b.yaml",
             "consumers:\n  - {name: b1, plugin: p}\n"
             "  - name: b2\n    plugin: p\n    topics: [x.y]\n");
    s_write (f, "conf.d/a.yaml", "consumers:\n  - {name: a, plugin: p, queue: {capacity: 7}}\n");
    s_write (f, "conf.d/empty.yaml", "# all commented out\n");
    s_write (f, "conf.d/ignored.yml", "not: read\n");
    s_write (f, "extra.yaml", "consumers:\n  - {name: extra, plugin: p}\n");
    char err[1024];
    fh_config_t *cfg = s_load (f, err, sizeof err);
    if (!cfg)
        fail_msg ("%s", err);
    static const char *const names[] = {"main", "a", "b1", "b2", "extra"};
    assert_int_equal (cfg->consumer_count, 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal (cfg->consumers[i].name, names[i]);
    assert_int_equal (cfg->consumers[1].queue_capacity, 7);
    assert_string_equal (cfg->consumers[3].topics.items[0], "x.y");
    char where[512];
    snprintf (where, sizeof where, "%s/conf.d/b.yaml:3:5", f->root);
    assert_string_equal (cfg->consumers[3].where, where);
    assert_int_equal (cfg->dropins.count, 4);
    assert_int_equal (cfg->include.count, 2);
    fh_config_destroy (&cfg);
}

/* A main file with include: needs no consumers of its own; a glob that
   matches nothing is an empty conf.d; a file matched twice is read once. */
static void
test_only_dropins (void **state)
{
    test_dir_fixture_t *f = *state;
    s_write (f, "fanhub.yaml",
             BUS "include:\n  - conf.d/*.yaml\n  - conf.d/a.yaml\n  - none/*.yaml\n");
    s_write (f, "conf.d/a.yaml", "consumers:\n  - {name: a, plugin: p}\n");
    char err[1024];
    fh_config_t *cfg = s_load (f, err, sizeof err);
    if (!cfg)
        fail_msg ("%s", err);
    assert_int_equal (cfg->consumer_count, 1);
    assert_int_equal (cfg->dropins.count, 1);
    fh_config_destroy (&cfg);

    /* A glob beside the main file matches it: it is not its own drop-in. */
    s_write (f, "fanhub.yaml", BUS "include: '*.yaml'\nconsumers:\n  - {name: m, plugin: p}\n");
    s_write (f, "other.yaml", "consumers:\n  - {name: o, plugin: p}\n");
    cfg = s_load (f, err, sizeof err);
    if (!cfg)
        fail_msg ("%s", err);
    assert_int_equal (cfg->consumer_count, 2);
    assert_string_equal (cfg->consumers[1].name, "o");
    assert_int_equal (cfg->dropins.count, 1);
    fh_config_destroy (&cfg);
    unlink (strcat (strcpy (err, f->root), "/other.yaml"));
    s_write (f, "fanhub.yaml",
             BUS "include:\n  - conf.d/*.yaml\n  - conf.d/a.yaml\n  - none/*.yaml\n");

    s_write (f, "conf.d/a.yaml", "");
    s_expect_error (f, "fanhub.yaml:4:3: include: no consumers: neither this file nor its 1 "
                       "drop-in define one");
}

static void
test_duplicate_across_files (void **state)
{
    test_dir_fixture_t *f = *state;
    s_write (f, "fanhub.yaml",
             BUS "include: conf.d/*.yaml\nconsumers:\n  - name: archive\n    plugin: p\n");
    s_write (f, "conf.d/a.yaml",
             "consumers:\n  - {name: x, plugin: p}\n"
             "  - {name: archive, plugin: q}\n");
    s_expect_error (f, "conf.d/a.yaml:3:12: consumers[1].name: duplicate consumer name "
                       "'archive' (first defined at fanhub.yaml:5:5)");
    /* Between two drop-ins. */
    s_write (f, "fanhub.yaml", BUS "include: conf.d/*.yaml\n");
    s_write (f, "conf.d/b.yaml", "consumers:\n  - name: x\n    plugin: p\n");
    s_expect_error (f, "conf.d/b.yaml:2:11: consumers[0].name: duplicate consumer name 'x' "
                       "(first defined at conf.d/a.yaml:2:5)");
}

static void
test_dropin_errors (void **state)
{
    test_dir_fixture_t *f = *state;
    s_write (f, "fanhub.yaml", BUS "include: [conf.d/*.yaml]\n");
    s_write (f, "conf.d/a.yaml",
             "consumers:\n  - {name: a, plugin: p}\nbus:\n  connect: tcp://127.0.0.1:1\n");
    s_expect_error (f, "conf.d/a.yaml:3:1: bus: a drop-in holds consumers: only; hub settings "
                       "stay in the main file (fanhub.yaml)");
    s_write (f, "conf.d/a.yaml", "include: [other.yaml]\n");
    s_expect_error (f, "conf.d/a.yaml:1:1: include: a drop-in holds consumers: only; hub "
                       "settings stay in the main file (fanhub.yaml)");
    s_write (f, "conf.d/a.yaml", "- {name: a, plugin: p}\n");
    s_expect_error (f, "conf.d/a.yaml:1:1: expected a map with consumers: (a drop-in), got a "
                       "list");
    s_write (f, "conf.d/a.yaml", "consumers:\n  - {name: a, plugin: p, queue: {capacity: 0}}\n");
    s_expect_error (f, "conf.d/a.yaml:2:44: consumers[0].queue.capacity: expected an integer "
                       "from 1 to 1073741824, got '0'");
    s_write (f, "conf.d/a.yaml",
             "consumers:\n  - {name: a, plugin: p}\n  - {name: s, plugin: "
             "p, queue: {overflow: spill}}\n");
    s_expect_error (f, "conf.d/a.yaml:3:5: consumers[1].queue.overflow: spill needs a "
                       "state_dir: (where the spool is kept)");
    s_write (f, "conf.d/a.yaml", "consumers: [\n");
    s_expect_error (f, "conf.d/a.yaml:2:1: YAML syntax error: did not find expected node "
                       "content (while parsing a flow node)");

    /* A file named without a wildcard must exist; the error is at its entry. */
    s_write (f, "fanhub.yaml", BUS "include:\n  - conf.d/*.yaml\n  - missing.yaml\n");
    s_write (f, "conf.d/a.yaml", "consumers:\n  - {name: a, plugin: p}\n");
    s_expect_error (f, "fanhub.yaml:5:5: include[1]: missing.yaml: cannot open: No such file or "
                       "directory");
    char fifo[512];
    snprintf (fifo, sizeof fifo, "%s/conf.d/fifo.yaml", f->root);
    assert_int_equal (mkfifo (fifo, 0600), 0);
    s_expect_error (f, "fanhub.yaml:4:5: include[0]: conf.d/fifo.yaml: not a regular file");
    unlink (fifo);
    s_write (f, "fanhub.yaml", BUS "include: ''\n");
    s_expect_error (f, "fanhub.yaml:3:10: include: expected a file or glob (relative to this "
                       "file's directory), got ''");
    s_write (f, "fanhub.yaml", BUS "include: {a: 1}\n");
    s_expect_error (f, "fanhub.yaml:3:10: include: expected a file or glob (relative to this "
                       "file's directory), got a map");
    s_write (f, "fanhub.yaml", BUS);
    s_expect_error (f, "fanhub.yaml:1:1: consumers: required key is missing");
}

/* ${VAR}, ${VAR:-default}, $$ and a lone $ in values, keys untouched,
   in the main file and in drop-ins, plugin options included. */
static void
test_env (void **state)
{
    test_dir_fixture_t *f = *state;
    setenv ("FH_TEST_PORT", "9941", 1);
    setenv ("FH_TEST_EMPTY", "", 1);
    unsetenv ("FH_TEST_UNSET");
    setenv ("FH_TEST_NAME", "archive", 1);
    s_write (
        f, "fanhub.yaml",
        "bus:\n  connect: tcp://127.0.0.1:${FH_TEST_PORT}\n"
        "include: ${FH_TEST_UNSET:-conf.d}/*.yaml\n"
        "consumers:\n  - name: ${FH_TEST_NAME}\n    plugin: p\n"
        "    topics: ['a$b', \"$${FH_TEST_PORT}\", '${FH_TEST_EMPTY:-dflt}x', 'kill $$ $1 $$X']\n"
        "    options:\n      ${FH_TEST_NAME}: [\"${FH_TEST_PORT}\", '${FH_TEST_EMPTY}']\n"
        "      shared: &s $${FH_TEST_PORT}\n      again: *s\n");
    s_write (f, "conf.d/a.yaml", "consumers:\n  - {name: '${FH_TEST_NAME}-2', plugin: p}\n");
    char err[1024];
    fh_config_t *cfg = s_load (f, err, sizeof err);
    if (!cfg)
        fail_msg ("%s", err);
    assert_string_equal (cfg->connect.items[0], "tcp://127.0.0.1:9941");
    const fh_consumer_config_t *c = &cfg->consumers[0];
    assert_string_equal (c->name, "archive");
    assert_string_equal (c->topics.items[0], "a$b");
    assert_string_equal (c->topics.items[1], "${FH_TEST_PORT}");
    assert_string_equal (c->topics.items[2], "dfltx");
    assert_string_equal (c->topics.items[3], "kill $$ $1 $$X"); /* the shell's, untouched */
    const fanhub_option_t *list = fh_option_get (c->options, "${FH_TEST_NAME}");
    assert_non_null (list);
    assert_string_equal (fh_option_scalar (fh_option_at (list, 0, NULL)), "9941");
    assert_string_equal (fh_option_scalar (fh_option_at (list, 1, NULL)), "");
    /* An alias shares its node: expanded once, not twice. */
    assert_string_equal (fh_option_scalar (fh_option_get (c->options, "shared")),
                         "${FH_TEST_PORT}");
    assert_string_equal (fh_option_scalar (fh_option_get (c->options, "again")), "${FH_TEST_PORT}");
    assert_string_equal (cfg->consumers[1].name, "archive-2");
    fh_config_destroy (&cfg);
}

static void
test_env_errors (void **state)
{
    test_dir_fixture_t *f = *state;
    unsetenv ("FH_TEST_UNSET");
    s_write (f, "fanhub.yaml",
             "bus:\n  connect:\n    - tcp://${FH_TEST_UNSET}:1\n"
             "consumers:\n  - {name: a, plugin: p}\n");
    s_expect_error (f, "fanhub.yaml:3:7: bus.connect[0]: ${FH_TEST_UNSET}: the environment "
                       "variable FH_TEST_UNSET is not set (give a default, "
                       "${FH_TEST_UNSET:-default}, or write $${FH_TEST_UNSET} for the text)");
    /* What is no reference stays as written: a CURVE key's Z85 text may
       hold "${". */
    static const char *const literal[]
        = {"${}", "${1A}", "${A", "${A:-x", "${A-x}", "${A B}", "x${/y"};
    for (size_t i = 0; i < sizeof literal / sizeof literal[0]; i++) {
        char text[256], err[1024] = "";
        snprintf (text, sizeof text,
                  BUS "consumers:\n  - {name: a, plugin: p,\n"
                      "     options: {k: '%s'}}\n",
                  literal[i]);
        s_write (f, "fanhub.yaml", text);
        fh_config_t *lit = s_load (f, err, sizeof err);
        if (!lit)
            fail_msg ("'%s' refused: %s", literal[i], err);
        assert_string_equal (fh_option_scalar (fh_option_get (lit->consumers[0].options, "k")),
                             literal[i]);
        fh_config_destroy (&lit);
    }
    /* In a drop-in: its file, line and column. */
    s_write (f, "fanhub.yaml", BUS "include: conf.d/*.yaml\n");
    s_write (f, "conf.d/a.yaml", "consumers:\n  - name: a\n    plugin: ${FH_TEST_UNSET}\n");
    s_expect_error (f, "conf.d/a.yaml:3:13: consumers[0].plugin: ${FH_TEST_UNSET}: the "
                       "environment variable FH_TEST_UNSET is not set (give a default, "
                       "${FH_TEST_UNSET:-default}, or write $${FH_TEST_UNSET} for the text)");
    /* What a variable gives is checked like what was written. */
    setenv ("FH_TEST_WORKERS", "many", 1);
    s_write (f, "conf.d/a.yaml",
             "consumers:\n  - name: a\n    plugin: p\n    workers: ${FH_TEST_WORKERS}\n");
    s_expect_error (f, "conf.d/a.yaml:4:14: consumers[0].workers: expected an integer from 1 "
                       "to 256, got 'many'");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_merge, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_only_dropins, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_duplicate_across_files, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_dropin_errors, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_env, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_env_errors, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
