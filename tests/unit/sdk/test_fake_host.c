/*  test_fake_host - the installed fake host (fanhub/testing.h,
    libfanhub-testing.a) on its own: option trees and messages read back
    through the host table, options read against a table by the hub's own
    reader (its errors with FILE:LINE:COL), what a plugin logs recorded,
    and each refusal: no descriptor, a plugin that does not load, one
    without the entry symbol; a test group's plugin and its directory, and
    one option case, held or not.
*/
#include <fanhub/testing.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    int64_t count;
    const char *endpoint;
} opts_t;

static const fanhub_opt_t s_table[] = {
    FANHUB_OPT_FIELD (opts_t, "count", FANHUB_OPT_INT, count, "3", 1, 10, "how many"),
    FANHUB_OPT_FIELD (opts_t, "endpoint", FANHUB_OPT_ENDPOINT, endpoint, NULL, 0, 0, "where"),
    FANHUB_OPT_END,
};

static const fanhub_consumer_desc_t s_desc = {
    FANHUB_CONSUMER_DESC_HEADER,
    .name = "probe",
    .options = s_table,
};

static void
test_option_tree_read_back (void **state)
{
    (void) state;
    const fanhub_host_t *h = &fanhub_fake_host;
    const fanhub_option_t list[]
        = {FANHUB_FAKE_SCALAR (NULL, "a", "t.yaml:3:7"), FANHUB_FAKE_SCALAR (NULL, "b", NULL)};
    const fanhub_option_t items[] = {
        FANHUB_FAKE_SCALAR ("name", "x", "t.yaml:2:9"),
        FANHUB_FAKE_LIST ("list", list, 2, "t.yaml:3:5"),
    };
    const fanhub_option_t map = FANHUB_FAKE_MAP (NULL, items, 2, "t.yaml:2:3");
    assert_int_equal (h->option_kind (&map), FANHUB_OPTION_MAP);
    assert_int_equal (h->option_count (&map), 2);
    assert_string_equal (h->option_scalar (h->option_get (&map, "name")), "x");
    assert_null (h->option_get (&map, "other"));
    assert_null (h->option_get (&list[0], "name")); /* not a map */
    const char *key = NULL;
    const fanhub_option_t *second = h->option_at (&map, 1, &key);
    assert_string_equal (key, "list");
    assert_int_equal (h->option_kind (second), FANHUB_OPTION_LIST);
    assert_null (h->option_scalar (second));
    assert_null (h->option_at (&map, 2, NULL));
    assert_null (h->option_at (&list[0], 0, NULL)); /* a scalar has no items */
    assert_int_equal (h->option_count (&list[0]), 0);
    assert_string_equal (h->option_where (&list[0]), "t.yaml:3:7");
    assert_string_equal (h->option_where (&list[1]), "?");
    assert_string_equal (h->option_where (NULL), "?");
}

static void
test_message_read_back (void **state)
{
    (void) state;
    const fanhub_host_t *h = &fanhub_fake_host;
    fanhub_msg_t msg = fanhub_fake_msg ("a.b", 3, "{}", 2, 7, 1000);
    msg.frames[2] = (fanhub_bytes_t){"x", 1};
    msg.nframes = 3;
    assert_int_equal (h->msg_topic (&msg).size, 3);
    assert_memory_equal (h->msg_body (&msg).data, "{}", 2);
    assert_int_equal (h->msg_frame_count (&msg), 3);
    assert_memory_equal (h->msg_frame (&msg, 2).data, "x", 1);
    assert_null (h->msg_frame (&msg, 3).data);
    assert_int_equal (h->msg_seq (&msg), 7);
    assert_int_equal (h->msg_received_ns (&msg), 1000);
}

static void
test_log_and_reason_recorded (void **state)
{
    (void) state;
    const fanhub_host_t *h = &fanhub_fake_host;
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    assert_string_equal (h->consumer_name (&ctx), "test");
    ctx.name = "probe";
    assert_string_equal (h->consumer_name (&ctx), "probe");
    h->log (&ctx, FANHUB_LOG_INFO, "one %d", 1);
    h->log (&ctx, FANHUB_LOG_DEBUG, "two");
    assert_int_equal (ctx.lines, 2);
    assert_string_equal (ctx.last, "two");
    assert_string_equal (ctx.all, "one 1\ntwo\n");
    ctx.skip_debug = true;
    h->log (&ctx, FANHUB_LOG_DEBUG, "three");
    assert_int_equal (ctx.lines, 2);
    h->set_reason (&ctx, "HTTP %d", 503);
    assert_string_equal (ctx.reason, "HTTP 503");
    /* ABI 1.5: what the plugin publishes is recorded. */
    assert_true (FANHUB_HOST_HAS_1_5 (h) && h->publish);
    assert_int_equal (h->publish (&ctx, "a.b", "{}", 2), 0);
    assert_int_equal (ctx.published, 1);
    assert_string_equal (ctx.published_topic, "a.b");
    assert_int_equal (ctx.published_size, 2);
    pthread_mutex_destroy (&ctx.lock);
}

static void
test_options_read_with_the_hubs_reader (void **state)
{
    (void) state;
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    ctx.desc = &s_desc;
    char err[256] = "";
    opts_t opt = {0}; /* a NULL default leaves a field as it was (consumer.h) */
    /* No options: the defaults. */
    assert_int_equal (fanhub_fake_host.options_load (&ctx, NULL, &opt, sizeof opt, err, sizeof err),
                      0);
    assert_int_equal (opt.count, 3);
    assert_null (opt.endpoint);
    const fanhub_option_t good[]
        = {FANHUB_FAKE_SCALAR ("count", "10", "t.yaml:2:10"),
           FANHUB_FAKE_SCALAR ("endpoint", "tcp://127.0.0.1:9", "t.yaml:3:13")};
    const fanhub_option_t map = FANHUB_FAKE_MAP (NULL, good, 2, "t.yaml:2:3");
    assert_int_equal (fanhub_fake_host.options_load (&ctx, &map, &opt, sizeof opt, err, sizeof err),
                      0);
    assert_int_equal (opt.count, 10);
    assert_string_equal (opt.endpoint, "tcp://127.0.0.1:9");
    /* Each refusal in the hub's words, with the place. */
    static const struct {
        const char *key, *text, *expected;
    } bad[] = {
        {"count", "11",
         "options.count: expected an integer from 1 to 10, got \"11\" (t.yaml:2:10)"},
        {"endpoint", "tcp://127.0.0.1",
         "options.endpoint: expected a ZeroMQ endpoint, got \"tcp://127.0.0.1\": expected "
         "tcp://HOST:PORT (t.yaml:2:10)"},
        {"other", "1",
         "options.other: unknown option; probe takes count and endpoint (t.yaml:2:10)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const fanhub_option_t one[] = {FANHUB_FAKE_SCALAR (bad[i].key, bad[i].text, "t.yaml:2:10")};
        const fanhub_option_t m = FANHUB_FAKE_MAP (NULL, one, 1, "t.yaml:2:3");
        err[0] = '\0';
        assert_int_equal (
            fanhub_fake_host.options_read (&ctx, &s_desc, &m, &opt, sizeof opt, err, sizeof err),
            -1);
        if (strcmp (err, bad[i].expected) != 0)
            fail_msg ("%s: %s\n got: %s", bad[i].key, bad[i].text, err);
    }
    pthread_mutex_destroy (&ctx.lock);
}

static void
test_options_load_needs_a_descriptor (void **state)
{
    (void) state;
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    fanhub_fake_host_loaded = NULL;
    char err[256] = "";
    opts_t opt = {0}; /* a NULL default leaves a field as it was (consumer.h) */
    assert_int_equal (fanhub_fake_host.options_load (&ctx, NULL, &opt, sizeof opt, err, sizeof err),
                      -1);
    assert_non_null (strstr (err, "no descriptor"));
    pthread_mutex_destroy (&ctx.lock);
}

static void
test_plugin_load (void **state)
{
    (void) state;
    void *dl = NULL;
    assert_null (fanhub_fake_plugin_load (TEST_PLUGIN_DIR "/absent.so", &dl));
    assert_null (dl);
    assert_null (fanhub_fake_plugin_load (TEST_PLUGIN_DIR "/nosymbol.so", &dl));
    assert_non_null (dl);
    dlclose (dl);
    const fanhub_consumer_desc_t *desc
        = fanhub_fake_plugin_load (TEST_PLUGIN_DIR "/tabled.so", &dl);
    assert_non_null (desc);
    assert_ptr_equal (fanhub_fake_host_loaded, desc);
    assert_string_equal (desc->name, "tabled");
    /* options_load reads the loaded plugin's table (no ctx->desc). */
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    const fanhub_option_t one[] = {FANHUB_FAKE_SCALAR ("count", "lots", "t.yaml:4:12")};
    const fanhub_option_t m = FANHUB_FAKE_MAP (NULL, one, 1, "t.yaml:4:5");
    max_align_t values[16]; /* beyond tabled's own struct */
    char err[256] = "";
    assert_int_equal (
        fanhub_fake_host.options_load (&ctx, &m, values, sizeof values, err, sizeof err), -1);
    if (!strstr (err, "options.count: ") || !strstr (err, "(t.yaml:4:12)"))
        fail_msg ("got: %s", err);
    fanhub_fake_host_loaded = NULL;
    pthread_mutex_destroy (&ctx.lock);
    dlclose (dl);
}

/* A test group's plugin (fanhub_fake_plugin_open, _close: its directory
   made, and removed with what is below it) and option cases: one that
   holds passes, one that does not says what happened instead. */
static void
test_plugin_group_and_option_case (void **state)
{
    (void) state;
    fanhub_fake_plugin_t plugin;
    assert_int_equal (
        fanhub_fake_plugin_open (&plugin, SHIPPED_PLUGIN_DIR "/log.so", "fanhub-test-kit"), 0);
    assert_string_equal (plugin.desc->name, "log");
    struct stat st;
    assert_int_equal (stat (plugin.dir, &st), 0);
    assert_true (S_ISDIR (st.st_mode));
    char path[512];
    snprintf (path, sizeof path, "%s/sub", plugin.dir);
    assert_int_equal (mkdir (path, 0700), 0);
    snprintf (path, sizeof path, "%s/sub/out.jsonl", plugin.dir);
    const fanhub_option_t good[] = {FANHUB_FAKE_SCALAR ("path", path, "t.yaml:5:13")};
    const fanhub_option_t empty[] = {FANHUB_FAKE_SCALAR ("path", "", "t.yaml:5:13")};
    const fanhub_option_t accepted = FANHUB_FAKE_MAP (NULL, good, 1, "t.yaml:4:3");
    const fanhub_option_t refused = FANHUB_FAKE_MAP (NULL, empty, 1, "t.yaml:4:3");
    const char *why = "options.path: expected a file name, got \"\" (t.yaml:5:13)";
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    char got[1536] = "";
    assert_int_equal (fanhub_fake_option_case (plugin.desc, &ctx, &accepted, NULL, got, sizeof got),
                      0);
    assert_int_equal (stat (path, &st), 0); /* the plugin ran: it made its file */
    assert_int_equal (fanhub_fake_option_case (plugin.desc, &ctx, &refused, why, got, sizeof got),
                      0);
    assert_int_equal (fanhub_fake_option_case (plugin.desc, &ctx, &accepted, why, got, sizeof got),
                      -1);
    assert_string_equal (got, "rc 0\n got: (accepted)\nwant: options.path: expected a file name, "
                              "got \"\" (t.yaml:5:13)");
    assert_int_equal (fanhub_fake_option_case (plugin.desc, &ctx, &refused, NULL, got, sizeof got),
                      -1);
    assert_string_equal (got, "rc -1\n got: options.path: expected a file name, got \"\" "
                              "(t.yaml:5:13)\nwant: (accepted)");
    char dir[sizeof plugin.dir];
    memcpy (dir, plugin.dir, sizeof dir);
    fanhub_fake_plugin_close (&plugin);
    assert_int_equal (stat (dir, &st), -1);
    assert_null (plugin.dl);
    fanhub_fake_host_loaded = NULL;
    pthread_mutex_destroy (&ctx.lock);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_option_tree_read_back),
        cmocka_unit_test (test_message_read_back),
        cmocka_unit_test (test_log_and_reason_recorded),
        cmocka_unit_test (test_options_read_with_the_hubs_reader),
        cmocka_unit_test (test_options_load_needs_a_descriptor),
        cmocka_unit_test (test_plugin_load),
        cmocka_unit_test (test_plugin_group_and_option_case),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
