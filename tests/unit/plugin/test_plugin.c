/*  test_plugin - loading plugins: found, missing, not a plugin, wrong ABI,
    refused init. Uses the test plugins built into TEST_PLUGIN_DIR and the
    shipped ones in SHIPPED_PLUGIN_DIR.
*/
#include "consumer.h"
#include "host.h"
#include "plugin.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void
assert_contains (const char *text, const char *part)
{
    if (!strstr (text, part))
        fail_msg ("expected '%s' in: %s", part, text);
}

static void
test_shipped_plugin_by_name (void **state)
{
    (void) state;
    char err[1024] = "";
    fh_plugin_t *plugin = fh_plugin_load ("null", SHIPPED_PLUGIN_DIR, err, sizeof err);
    assert_non_null (plugin);
    const fanhub_consumer_desc_t *desc = fh_plugin_desc (plugin);
    assert_string_equal (desc->name, "null");
    assert_int_equal (desc->abi_major, FANHUB_ABI_MAJOR);
    assert_string_equal (fh_plugin_path (plugin), SHIPPED_PLUGIN_DIR "/null.so");
    fh_plugin_destroy (&plugin);
    assert_null (plugin);
    fh_plugin_destroy (&plugin);
}

static void
test_plugin_by_path (void **state)
{
    (void) state;
    char err[1024] = "";
    fh_plugin_t *plugin
        = fh_plugin_load (TEST_PLUGIN_DIR "/count.so", "/nonexistent", err, sizeof err);
    assert_non_null (plugin);
    fh_plugin_destroy (&plugin);
}

typedef struct {
    const char *spec;
    const char *dir;
    const char *expect[3]; /* parts the error must contain */
} load_error_case_t;

static const load_error_case_t load_errors[] = {
    {"nosuch",
     SHIPPED_PLUGIN_DIR,
     {"plugin 'nosuch'", SHIPPED_PLUGIN_DIR "/nosuch.so", "FANHUB_PLUGIN_DIR"}},
    {"/nonexistent/x.so", SHIPPED_PLUGIN_DIR, {"plugin '/nonexistent/x.so'", "x.so", NULL}},
    {TEST_PLUGIN_DIR "/nosymbol.so", "", {"exports no fanhub_consumer_entry", NULL, NULL}},
    {TEST_PLUGIN_DIR "/badabi.so",
     "",
     {"built for plugin ABI 2.0", "this hub speaks ABI 1.", NULL}},
    {"log.so", SHIPPED_PLUGIN_DIR, {"not a plugin name", "nor a path", NULL}},
    {"bad name", SHIPPED_PLUGIN_DIR, {"not a plugin name", NULL, NULL}},
    {SOURCE_DIR "/README.md", "", {"plugin '", NULL, NULL}}, /* not an ELF */
};

static void
test_load_errors (void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof load_errors / sizeof load_errors[0]; i++) {
        const load_error_case_t *c = &load_errors[i];
        char err[1024] = "";
        fh_plugin_t *plugin = fh_plugin_load (c->spec, c->dir, err, sizeof err);
        if (plugin)
            fail_msg ("'%s' loaded but should not", c->spec);
        for (int k = 0; k < 3 && c->expect[k]; k++)
            assert_contains (err, c->expect[k]);
    }
}

static void
test_plugin_dir_resolution (void **state)
{
    (void) state;
    assert_string_equal (fh_plugin_dir ("/given"), "/given");
    setenv ("FANHUB_PLUGIN_DIR", "/from/env", 1);
    assert_string_equal (fh_plugin_dir (NULL), "/from/env");
    assert_string_equal (fh_plugin_dir ("/given"), "/given");
    unsetenv ("FANHUB_PLUGIN_DIR");
    /* Beside the executable when that exists, else the installed one. */
    const char *dir = fh_plugin_dir (NULL);
    assert_non_null (dir);
    assert_true (strlen (dir) > 0);
}

static fh_consumer_config_t
consumer_config (const char *name, const char *plugin, fanhub_option_t *options)
{
    fh_consumer_config_t config = {0};
    config.name = (char *) name;
    config.plugin = (char *) plugin;
    config.queue_capacity = 4;
    config.workers = 1;
    config.retry.max_attempts = 1;
    config.options = options;
    config.where = (char *) "t.yaml:3:5";
    return config;
}

static void
test_init_refusal_names_consumer_and_reason (void **state)
{
    (void) state;
    fanhub_option_t *options = fh_option_new (FANHUB_OPTION_MAP, NULL, "t.yaml:4:7");
    fh_option_append (options, "reason",
                      fh_option_new (FANHUB_OPTION_SCALAR, "database is down", "t.yaml:4:15"));
    fh_consumer_config_t config
        = consumer_config ("archive", TEST_PLUGIN_DIR "/initfail.so", options);
    char err[1024] = "";
    fh_consumer_t *consumer
        = fh_consumer_new (&fh_host, &config, 0, SHIPPED_PLUGIN_DIR, err, sizeof err);
    assert_null (consumer);
    assert_contains (err, "t.yaml:3:5: consumer 'archive'");
    assert_contains (err, "database is down");
    fh_option_destroy (&options);
}

static void
test_consumer_new_and_destroy_without_start (void **state)
{
    (void) state;
    fanhub_option_t *options = fh_option_new (FANHUB_OPTION_MAP, NULL, "t.yaml:4:7");
    fh_consumer_config_t config = consumer_config ("n", "null", options);
    char err[1024] = "";
    fh_consumer_t *consumer
        = fh_consumer_new (&fh_host, &config, 0, SHIPPED_PLUGIN_DIR, err, sizeof err);
    assert_non_null (consumer);
    assert_string_equal (fh_consumer_name (consumer), "n");
    assert_true (fh_consumer_ended (consumer)); /* never started */
    fh_consumer_destroy (&consumer);
    assert_null (consumer);
    fh_option_destroy (&options);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_shipped_plugin_by_name),
        cmocka_unit_test (test_plugin_by_path),
        cmocka_unit_test (test_load_errors),
        cmocka_unit_test (test_plugin_dir_resolution),
        cmocka_unit_test (test_init_refusal_names_consumer_and_reason),
        cmocka_unit_test (test_consumer_new_and_destroy_without_start),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
