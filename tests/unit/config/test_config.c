/*  test_config - loading the YAML configuration (hub/config/config.c):
    what a valid text gives, defaults, aliases and their limits, files,
    byte sizes, the control default and endpoints. The wording of every
    refusal is in test_config_errors.c.
*/
#include "config.h"

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
#include "config_kit.h"

/* The default control directory without a runtime directory. */
static const char *
s_private_dir (void)
{
    static char dir[64];
    if (geteuid () == 0)
        snprintf (dir, sizeof dir, "/run/fanhub-0");
    else
        snprintf (dir, sizeof dir, "/tmp/fanhub-%lu", (unsigned long) geteuid ());
    return dir;
}

/* ------------------------------------------------------------------ */

static void
s_check_default (const fh_config_t *cfg)
{
    assert_string_equal (cfg->source, "<default>");
    assert_null (cfg->name);
    assert_int_equal (cfg->connect.count, 1);
    assert_string_equal (cfg->connect.items[0], "tcp://127.0.0.1:9940");
    assert_int_equal (cfg->bind.count, 0);
    assert_int_equal (cfg->rcvhwm, FH_DEFAULT_RCVHWM);
    assert_int_equal (cfg->max_frames, FH_DEFAULT_MAX_FRAMES);
    assert_int_equal (cfg->max_message_bytes, FH_DEFAULT_MAX_MESSAGE_BYTES);
    char expected[128];
    snprintf (expected, sizeof expected, "ipc://%s/fanhub.sock", s_private_dir ());
    assert_string_equal (cfg->control, expected);
    assert_int_equal (cfg->shutdown_timeout_ms, 10000);
    assert_int_equal (cfg->consumer_count, 1);
    const fh_consumer_config_t *tail = &cfg->consumers[0];
    assert_string_equal (tail->name, "tail");
    assert_string_equal (tail->plugin, "log");
    assert_int_equal (tail->topics.count, 0);
    assert_int_equal (tail->queue_capacity, FH_DEFAULT_QUEUE_CAPACITY);
    assert_int_equal (fh_option_kind (tail->options), FANHUB_OPTION_MAP);
    assert_int_equal (fh_option_count (tail->options), 2);
    assert_string_equal (fh_option_scalar (fh_option_get (tail->options, "path")), "-");
    assert_string_equal (fh_option_scalar (fh_option_get (tail->options, "flush_ms")), "100");
    assert_non_null (strstr (tail->where, ":"));
}

static void
test_default_config (void **state)
{
    (void) state;
    s_unset_runtime_dirs ();
    char err[512] = "";
    assert_int_equal (strlen (fh_config_default_yaml), fh_config_default_yaml_len);
    fh_config_t *cfg = fh_config_load_string (fh_config_default_yaml, fh_config_default_yaml_len,
                                              "<default>", err, sizeof err);
    if (!cfg)
        fail_msg ("embedded default: %s", err);
    s_check_default (cfg);
    assert_int_equal (strncmp (cfg->consumers[0].where, "<default>:", 10), 0);
    fh_config_destroy (&cfg);
    assert_null (cfg);
    fh_config_destroy (&cfg);
    fh_config_destroy (NULL);

    /* The file in the tree is the one compiled in. */
    cfg = fh_config_load_file (SOURCE_DIR "/config/fanhub.yaml", err, sizeof err);
    if (!cfg)
        fail_msg ("config/fanhub.yaml: %s", err);
    assert_string_equal (cfg->source, SOURCE_DIR "/config/fanhub.yaml");
    free (cfg->source);
    cfg->source = strdup ("<default>");
    s_check_default (cfg);
    fh_config_destroy (&cfg);
}

static void
test_full_config (void **state)
{
    (void) state;
    static const char text[] = "name: hub-1.a_b\n"
                               "bus:\n"
                               "  connect:\n"
                               "    - tcp://hub.example.org:9940\n"
                               "    - tcp://[::1]:9941\n"
                               "    - ipc:///run/relay.sock\n"
                               "  bind: [tcp://*:9942, 'inproc://local', tcp://127.0.0.1:*]\n"
                               "  rcvhwm: 0\n"
                               "  max_frames: 1024\n"
                               "  max_message_bytes: 2147483648\n"
                               "control: tcp://127.0.0.1:9950\n"
                               "shutdown_timeout: 2.5\n"
                               "consumers:\n"
                               "  - name: archive\n"
                               "    plugin: /usr/lib/fanhub/archive.so\n"
                               "    topics:\n"
                               "      - org.fedoraproject.prod.buildsys.\n"
                               "      - \"*.buildsys.build.*\"\n"
                               "      - =org.fedoraproject.prod.git.receive\n"
                               "    queue:\n"
                               "      capacity: 1073741824\n"
                               "    options:\n"
                               "      path: /var/log/a\n"
                               "      levels: [1, 2]\n"
                               "      nested: {k: v, empty: }\n"
                               "  - plugin: \"null\"\n"
                               "    name: 'quiet'\n"
                               "    topics: org.one.pattern\n"
                               "    queue: {capacity: 1}\n"
                               "    options: {}\n"
                               "    max_crashes: 5\n"
                               "  - name: c3\n"
                               "    plugin: log\n"
                               "    options:\n";
    fh_config_t *cfg = s_load_ok (text);
    assert_string_equal (cfg->source, "t.yaml");
    assert_string_equal (cfg->name, "hub-1.a_b");
    assert_int_equal (cfg->connect.count, 3);
    assert_string_equal (cfg->connect.items[0], "tcp://hub.example.org:9940");
    assert_string_equal (cfg->connect.items[1], "tcp://[::1]:9941");
    assert_string_equal (cfg->connect.items[2], "ipc:///run/relay.sock");
    assert_int_equal (cfg->bind.count, 3);
    assert_string_equal (cfg->bind.items[0], "tcp://*:9942");
    assert_string_equal (cfg->bind.items[1], "inproc://local");
    assert_string_equal (cfg->bind.items[2], "tcp://127.0.0.1:*");
    assert_int_equal (cfg->rcvhwm, 0);
    assert_int_equal (cfg->max_frames, 1024);
    assert_int_equal (cfg->max_message_bytes, (size_t) 1 << 31);
    assert_string_equal (cfg->control, "tcp://127.0.0.1:9950");
    assert_int_equal (cfg->shutdown_timeout_ms, 2500);
    assert_int_equal (cfg->consumer_count, 3);

    const fh_consumer_config_t *c = &cfg->consumers[0];
    assert_string_equal (c->name, "archive");
    assert_string_equal (c->plugin, "/usr/lib/fanhub/archive.so");
    assert_int_equal (c->topics.count, 3);
    assert_string_equal (c->topics.items[0], "org.fedoraproject.prod.buildsys.");
    assert_string_equal (c->topics.items[1], "*.buildsys.build.*");
    assert_string_equal (c->topics.items[2], "=org.fedoraproject.prod.git.receive");
    assert_int_equal (c->queue_capacity, 1073741824);
    assert_string_equal (c->where, "t.yaml:14:5");
    assert_string_equal (fh_option_where (c->options), "t.yaml:23:7");
    assert_int_equal (fh_option_count (c->options), 3);
    const fanhub_option_t *path = fh_option_get (c->options, "path");
    assert_string_equal (fh_option_scalar (path), "/var/log/a");
    assert_string_equal (fh_option_where (path), "t.yaml:23:13");
    const fanhub_option_t *levels = fh_option_get (c->options, "levels");
    assert_int_equal (fh_option_kind (levels), FANHUB_OPTION_LIST);
    assert_int_equal (fh_option_count (levels), 2);
    assert_string_equal (fh_option_scalar (fh_option_at (levels, 1, NULL)), "2");
    assert_string_equal (fh_option_where (fh_option_at (levels, 1, NULL)), "t.yaml:24:19");
    const fanhub_option_t *nested = fh_option_get (c->options, "nested");
    assert_int_equal (fh_option_kind (nested), FANHUB_OPTION_MAP);
    assert_string_equal (fh_option_scalar (fh_option_get (nested, "k")), "v");
    /* A value left empty reaches the plugin as an empty scalar. */
    assert_string_equal (fh_option_scalar (fh_option_get (nested, "empty")), "");

    c = &cfg->consumers[1];
    assert_string_equal (c->name, "quiet");
    assert_string_equal (c->plugin, "null"); /* quoted: the word */
    assert_int_equal (c->topics.count, 1);
    assert_string_equal (c->topics.items[0], "org.one.pattern");
    assert_int_equal (c->queue_capacity, 1);
    assert_int_equal (fh_option_kind (c->options), FANHUB_OPTION_MAP);
    assert_int_equal (fh_option_count (c->options), 0);
    assert_string_equal (c->where, "t.yaml:26:5");
    assert_int_equal (c->max_crashes, 5);

    c = &cfg->consumers[2];
    assert_int_equal (c->topics.count, 0);
    assert_int_equal (c->max_crashes, FH_DEFAULT_MAX_CRASHES);
    assert_int_equal (c->queue_capacity, FH_DEFAULT_QUEUE_CAPACITY);
    assert_int_equal (fh_option_kind (c->options), FANHUB_OPTION_MAP);
    assert_int_equal (fh_option_count (c->options), 0);
    fh_config_destroy (&cfg);
}

/* A plain null is "no value", even where only a string makes sense (the
   shipped plugin called null must be quoted); the error says so. */
static void
test_null_plugin_refused (void **state)
{
    (void) state;
    char err[512];
    assert_null (s_load (BUS "consumers:\n  - name: c\n    plugin: null\n", err, sizeof err));
    assert_string_equal (err, "t.yaml:5:13: consumers[0].plugin: expected a "
                              "plugin name or path, got null (YAML null; "
                              "write \"null\" for the word)");
}

/* publish: its defaults, its lists, and none at all. */
static void
test_publish_section (void **state)
{
    (void) state;
    fh_config_t *cfg = s_load_ok (BUS CONSUMERS "    publish: {bind: \"tcp://127.0.0.1:*\"}\n"
                                                "  - name: d\n    plugin: p\n"
                                                "    publish:\n      connect: [ipc:///tmp/a, "
                                                "tcp://127.0.0.1:9941]\n      local: true\n"
                                                "      envelope: fedmsg\n      queue: 5\n"
                                                "  - name: e\n    plugin: p\n");
    const fh_publish_config_t *c = &cfg->consumers[0].publish;
    assert_int_equal (c->bind.count, 1);
    assert_string_equal (c->bind.items[0], "tcp://127.0.0.1:*");
    assert_int_equal (c->connect.count, 0);
    assert_int_equal (c->envelope, FH_ENVELOPE_NONE);
    assert_false (c->local);
    assert_null (c->sign.key);
    assert_int_equal (c->queue, FH_DEFAULT_PUBLISH_QUEUE);
    const fh_publish_config_t *d = &cfg->consumers[1].publish;
    assert_int_equal (d->connect.count, 2);
    assert_string_equal (d->connect.items[1], "tcp://127.0.0.1:9941");
    assert_int_equal (d->envelope, FH_ENVELOPE_FEDMSG);
    assert_true (d->local);
    assert_int_equal (d->queue, 5);
    const fh_publish_config_t *e = &cfg->consumers[2].publish;
    assert_int_equal (e->bind.count + e->connect.count, 0);
    assert_false (e->local);
    fh_config_destroy (&cfg);
    char err[512];
    assert_null (s_load (BUS CONSUMERS "    publish: {connect: [\"tcp://127.0.0.1:*\"]}\n", err,
                         sizeof err));
    assert_non_null (strstr (err, "t.yaml:6:"));
    assert_non_null (strstr (err, "consumers[0].publish.connect"));
    assert_null (s_load (BUS CONSUMERS "    publish: {local: true, sign: {cert: /nonexistent/c, "
                                       "key: /nonexistent/k}, envelope: fedmsg}\n",
                         err, sizeof err));
    assert_non_null (strstr (err, "consumers[0].publish.sign: "));
}

static void
test_defaults_and_numbers (void **state)
{
    (void) state;
    static const struct {
        const char *name;
        const char *text;
        int64_t shutdown_ms;
    } cases[] = {
        {"default", BUS CONSUMERS, FH_DEFAULT_SHUTDOWN_TIMEOUT_MS},
        {"zero", "shutdown_timeout: 0\n" BUS CONSUMERS, 0},
        {"max", "shutdown_timeout: 3600\n" BUS CONSUMERS, 3600000},
        {"max decimal", "shutdown_timeout: 3600.000000\n" BUS CONSUMERS, 3600000},
        {"decimal", "shutdown_timeout: 0.25\n" BUS CONSUMERS, 250},
        {"below a millisecond dropped", "shutdown_timeout: 1.0019\n" BUS CONSUMERS, 1001},
        {"quoted", "shutdown_timeout: '7'\n" BUS CONSUMERS, 7000},
        {"milliseconds", "shutdown_timeout: 250ms\n" BUS CONSUMERS, 250},
        {"seconds", "shutdown_timeout: 2s\n" BUS CONSUMERS, 2000},
        {"decimal seconds", "shutdown_timeout: 1.5s\n" BUS CONSUMERS, 1500},
        {"minutes", "shutdown_timeout: 1m\n" BUS CONSUMERS, 60000},
        {"an hour", "shutdown_timeout: 1h\n" BUS CONSUMERS, 3600000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fh_config_t *cfg = s_load_ok (cases[i].text);
        if (cfg->shutdown_timeout_ms != cases[i].shutdown_ms)
            fail_msg ("%s: shutdown_timeout_ms %lld, expected %lld", cases[i].name,
                      (long long) cfg->shutdown_timeout_ms, (long long) cases[i].shutdown_ms);
        fh_config_destroy (&cfg);
    }

    fh_config_t *cfg = s_load_ok (BUS CONSUMERS);
    assert_int_equal (cfg->rcvhwm, FH_DEFAULT_RCVHWM);
    assert_int_equal (cfg->max_frames, FH_DEFAULT_MAX_FRAMES);
    assert_int_equal (cfg->max_message_bytes, FH_DEFAULT_MAX_MESSAGE_BYTES);
    assert_int_equal (cfg->bind.count, 0);
    assert_null (cfg->name);
    fh_config_destroy (&cfg);

    cfg = s_load_ok ("bus:\n  connect: tcp://a:1\n  rcvhwm: 2147483647\n"
                     "  max_frames: 2\n  max_message_bytes: 1\n" CONSUMERS);
    assert_int_equal (cfg->rcvhwm, 2147483647);
    assert_int_equal (cfg->max_frames, 2);
    assert_int_equal (cfg->max_message_bytes, 1);
    fh_config_destroy (&cfg);
    cfg = s_load_ok ("bus:\n  connect: tcp://a:1\n  max_message_bytes: 64KiB\n" CONSUMERS);
    assert_int_equal (cfg->max_message_bytes, 65536);
    fh_config_destroy (&cfg);

    /* Decimal only: a leading zero is not octal. */
    cfg = s_load_ok ("bus:\n  connect: tcp://a:1\n  max_frames: 010\n" CONSUMERS);
    assert_int_equal (cfg->max_frames, 10);
    fh_config_destroy (&cfg);

    /* bind alone is enough. */
    cfg = s_load_ok ("bus:\n  bind: ipc:///tmp/x.sock\n" CONSUMERS);
    assert_int_equal (cfg->connect.count, 0);
    assert_int_equal (cfg->bind.count, 1);
    fh_config_destroy (&cfg);
}

static void
test_aliases (void **state)
{
    (void) state;
    /* Parsed only: no hub starts, the endpoint below is never connected to. */
    static const char text[] = "bus:\n"
                               "  connect: &pub tcp://10.0.0.1:9940\n"
                               "consumers:\n"
                               "  - name: a\n"
                               "    plugin: log\n"
                               "    topics: &topics [org.a., =org.b.c]\n"
                               "    queue: &queue {capacity: 42}\n"
                               "    options: &opts {path: \"-\", list: [1, 2], nested: {k: v}}\n"
                               "  - name: b\n"
                               "    plugin: log\n"
                               "    topics: *topics\n"
                               "    queue: *queue\n"
                               "    options: {shared: *opts, twice: *opts, endpoint: *pub}\n";
    fh_config_t *cfg = s_load_ok (text);
    assert_int_equal (cfg->consumer_count, 2);
    const fh_consumer_config_t *b = &cfg->consumers[1];
    assert_int_equal (b->topics.count, 2);
    assert_string_equal (b->topics.items[0], "org.a.");
    assert_string_equal (b->topics.items[1], "=org.b.c");
    assert_int_equal (b->queue_capacity, 42);
    const fanhub_option_t *shared = fh_option_get (b->options, "shared");
    assert_int_equal (fh_option_kind (shared), FANHUB_OPTION_MAP);
    assert_string_equal (fh_option_scalar (fh_option_get (shared, "path")), "-");
    const fanhub_option_t *nested = fh_option_get (fh_option_get (b->options, "twice"), "nested");
    assert_string_equal (fh_option_scalar (fh_option_get (nested, "k")), "v");
    /* An alias node is where its anchor is. */
    assert_string_equal (fh_option_where (shared), "t.yaml:8:14");
    assert_string_equal (fh_option_scalar (fh_option_get (b->options, "endpoint")),
                         "tcp://10.0.0.1:9940");
    /* Each consumer has a tree of its own. */
    assert_ptr_not_equal (fh_option_get (cfg->consumers[0].options, "path"),
                          fh_option_get (shared, "path"));
    fh_config_destroy (&cfg);
}

/* Aliases expanded without end are refused, not followed. */
static void
test_option_limits (void **state)
{
    (void) state;
    char err[512];
    /* Nine levels of ten aliases: 10^9 values once expanded. */
    static const char laughs[] = BUS "consumers:\n  - name: c\n    plugin: p\n    options:\n"
                                     "      a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                                     "      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                                     "      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                                     "      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                                     "      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                                     "      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                                     "      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
                                     "      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
                                     "      i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
    assert_null (s_load (laughs, err, sizeof err));
    assert_non_null (strstr (err, "more than 100000 option values (aliases "
                                  "expanded)"));
    assert_int_equal (strncmp (err, "t.yaml:", 7), 0);

    /* Nesting deeper than 64 levels. */
    char deep[1024];
    size_t len = (size_t) snprintf (deep, sizeof deep, "%s",
                                    BUS "consumers:\n  - name: c\n"
                                        "    plugin: p\n    options: {a: ");
    for (int i = 0; i < 70; i++)
        deep[len++] = '[';
    for (int i = 0; i < 70; i++)
        deep[len++] = ']';
    memcpy (deep + len, "}\n", 3);
    assert_null (s_load (deep, err, sizeof err));
    if (!strstr (err, "options nest more than 64 levels"))
        fail_msg ("got \"%s\"", err);

    /* 64 levels are fine: the options map and 63 lists. */
    len = (size_t) snprintf (deep, sizeof deep, "%s",
                             BUS "consumers:\n  - name: c\n"
                                 "    plugin: p\n    options: {a: ");
    for (int i = 0; i < 63; i++)
        deep[len++] = '[';
    for (int i = 0; i < 63; i++)
        deep[len++] = ']';
    memcpy (deep + len, "}\n", 3);
    fh_config_t *cfg = s_load_ok (deep);
    fh_config_destroy (&cfg);
}

/* Patterns a regular expression would have: loaded, with a warning each
   at its place; the pattern forms of the hub give none. */
static void
test_pattern_warnings (void **state)
{
    (void) state;
    fh_config_t *cfg = s_load_ok (
        BUS "name: .hub\nconsumers:\n  - name: a.b\n    plugin: p\n    topics:\n"
            "      - ^org\\.fedoraproject\\..*$\n      - org fedora\n      - \"a(b)\"\n"
            "      - a+\n      - \"[abc]\"\n      - org.fedoraproject.\n      - \"*.build.*\"\n"
            "      - =org.x\n");
    static const char *const expected[] = {
        ("t.yaml:8:9: consumers[0].topics[0]: '^org\\.fedoraproject\\..*$' has '^': topic "
         "patterns are not regular expressions (a prefix, '*' for any run of characters, '=' for "
         "an exact topic); it will likely never match"),
        ("t.yaml:9:9: consumers[0].topics[1]: 'org fedora' has whitespace: topic patterns are "
         "not regular expressions"),
        "t.yaml:10:9: consumers[0].topics[2]: 'a(b)' has '(': ",
        "t.yaml:11:9: consumers[0].topics[3]: 'a+' has '+': ",
        "t.yaml:12:9: consumers[0].topics[4]: '[abc]' has '[': ",
    };
    assert_int_equal (cfg->warnings.count, 5);
    for (size_t i = 0; i < 5; i++)
        if (strncmp (cfg->warnings.items[i], expected[i], strlen (expected[i])) != 0)
            fail_msg ("warning %zu:\n  got      \"%s\"\n  expected \"%s...\"", i,
                      cfg->warnings.items[i], expected[i]);
    assert_string_equal (cfg->name, ".hub"); /* a hub's name names no directory */
    fh_config_destroy (&cfg);
    cfg = s_load_ok (BUS CONSUMERS);
    assert_int_equal (cfg->warnings.count, 0);
    fh_config_destroy (&cfg);
}

static void
test_control_default (void **state)
{
    (void) state;
    static const struct {
        const char *name;
        const char *runtime_directory; /* NULL: unset */
        const char *xdg_runtime_dir;
        const char *hub_name;
        const char *control;
    } cases[] = {
        {"neither set", NULL, NULL, NULL, "ipc://PRIVATE/fanhub.sock"},
        {"neither set, named", NULL, NULL, "b1", "ipc://PRIVATE/fanhub-b1.sock"},
        {"XDG", NULL, "/run/user/1000", NULL, "ipc:///run/user/1000/fanhub.sock"},
        {"XDG, trailing slash, named", NULL, "/run/user/1000/", "x",
         "ipc:///run/user/1000/fanhub-x.sock"},
        {"systemd wins", "/run/fanhub", "/run/user/1000", NULL, "ipc:///run/fanhub/fanhub.sock"},
        {"systemd, several directories", "/run/fanhub:/run/other", NULL, "n",
         "ipc:///run/fanhub/fanhub-n.sock"},
        {"systemd empty", "", "/run/user/7", NULL, "ipc:///run/user/7/fanhub.sock"},
        {"both empty", "", "", NULL, "ipc://PRIVATE/fanhub.sock"},
        {"root directory", "/", NULL, NULL, "ipc:///fanhub.sock"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_unset_runtime_dirs ();
        if (cases[i].runtime_directory)
            setenv ("RUNTIME_DIRECTORY", cases[i].runtime_directory, 1);
        if (cases[i].xdg_runtime_dir)
            setenv ("XDG_RUNTIME_DIR", cases[i].xdg_runtime_dir, 1);
        char text[256];
        snprintf (text, sizeof text, "%s%s%s" BUS CONSUMERS, cases[i].hub_name ? "name: " : "",
                  cases[i].hub_name ? cases[i].hub_name : "", cases[i].hub_name ? "\n" : "");
        fh_config_t *cfg = s_load_ok (text);
        char expected[128];
        const char *mark = strstr (cases[i].control, "PRIVATE");
        if (mark)
            snprintf (expected, sizeof expected, "%.*s%s%s", (int) (mark - cases[i].control),
                      cases[i].control, s_private_dir (), mark + strlen ("PRIVATE"));
        else
            snprintf (expected, sizeof expected, "%s", cases[i].control);
        if (strcmp (cfg->control, expected) != 0)
            fail_msg ("%s: control '%s', expected '%s'", cases[i].name, cfg->control, expected);
        fh_config_destroy (&cfg);
    }

    /* An explicit control: ignores the environment. */
    setenv ("RUNTIME_DIRECTORY", "/run/fanhub", 1);
    fh_config_t *cfg = s_load_ok ("control: ipc:///srv/c.sock\n" BUS CONSUMERS);
    assert_string_equal (cfg->control, "ipc:///srv/c.sock");
    fh_config_destroy (&cfg);

    /* A directory too long for a Unix socket path. */
    char dir[200];
    memset (dir, 'd', sizeof dir - 1);
    dir[0] = '/';
    dir[sizeof dir - 1] = '\0';
    setenv ("RUNTIME_DIRECTORY", dir, 1);
    char err[512];
    assert_null (s_load (BUS CONSUMERS, err, sizeof err));
    assert_int_equal (strncmp (err,
                               "t.yaml:1:1: control: the default "
                               "endpoint 'ipc:///ddd",
                               49),
                      0);
    assert_non_null (strstr (err, "; set control:"));
    s_unset_runtime_dirs ();

    /* Loopback forms that are accepted. */
    static const char *const loopback[] = {
        "tcp://127.0.0.1:1", "tcp://127.1.2.3:65535",    "tcp://localhost:9950",
        "tcp://[::1]:9950",  "ipc:///run/fanhub/c.sock",
    };
    for (size_t i = 0; i < sizeof loopback / sizeof loopback[0]; i++) {
        char text[256];
        snprintf (text, sizeof text, "control: '%s'\n" BUS CONSUMERS, loopback[i]);
        cfg = s_load_ok (text);
        assert_string_equal (cfg->control, loopback[i]);
        fh_config_destroy (&cfg);
    }

    /* Off loopback in clear, when the configuration says so. Parsed only:
       no hub starts, nothing is bound or sent to these TEST-NET
       addresses (nor to allow_ip's below). */
    cfg = s_load_ok ("control: tcp://192.0.2.1:9950\ncontrol_insecure: true\n" BUS CONSUMERS);
    assert_true (cfg->control_insecure);
    assert_null (cfg->control_curve.secret_key_file);
    fh_config_destroy (&cfg);

    /* bus.allow_ip: addresses and networks of both families. */
    cfg = s_load_ok ("bus:\n  connect: tcp://a:1\n  allow_ip: [192.0.2.7, 10.0.0.0/8, "
                     "'::1/128', '2001:db8::/32', 0.0.0.0/0]\n" CONSUMERS);
    assert_int_equal (cfg->allow_ip.count, 5);
    assert_string_equal (cfg->allow_ip.items[1], "10.0.0.0/8");
    fh_config_destroy (&cfg);

    /* An abstract socket has no owner: `check` refuses it as `run` would. */
    assert_null (s_load ("control: ipc://@abstract\n" BUS CONSUMERS, err, sizeof err));
    assert_non_null (strstr (err, "control: invalid control endpoint 'ipc://@abstract': an "
                                  "abstract socket"));
}

/* ------------------------------------------------------------------ */

static void
test_load_file (void **state)
{
    (void) state;
    char err[512];
    assert_null (fh_config_load_file ("/nonexistent/fanhub.yaml", err, sizeof err));
    assert_string_equal (err, "/nonexistent/fanhub.yaml: cannot open: No such "
                              "file or directory");
    assert_null (fh_config_load_file ("/tmp", err, sizeof err));
    assert_string_equal (err, "/tmp: cannot open: Is a directory");

    char path[512];
    int fd = mkstemp (test_tmp_template (path, sizeof path, "test_config"));
    assert_true (fd >= 0);
    static const char good[] = BUS CONSUMERS;
    assert_int_equal (write (fd, good, strlen (good)), (ssize_t) strlen (good));
    fh_config_t *cfg = fh_config_load_file (path, err, sizeof err);
    if (!cfg)
        fail_msg ("%s", err);
    assert_string_equal (cfg->source, path);
    assert_int_equal (strncmp (cfg->consumers[0].where, path, strlen (path)), 0);
    assert_string_equal (cfg->consumers[0].where + strlen (path), ":4:5");
    fh_config_destroy (&cfg);

    /* Errors name the file as given. */
    static const char bad[] = "    queue: x\n";
    assert_int_equal (write (fd, bad, strlen (bad)), (ssize_t) strlen (bad));
    close (fd);
    assert_null (fh_config_load_file (path, err, sizeof err));
    char expected[256];
    snprintf (expected, sizeof expected, "%s:6:12: consumers[0].queue: expected a map", path);
    if (strncmp (err, expected, strlen (expected)) != 0)
        fail_msg ("got \"%s\", expected \"%s...\"", err, expected);
    unlink (path);
}

/* Every byte size takes the size grammar (value.h), max_bytes too. */
static void
test_byte_sizes (void **state)
{
    (void) state;
    fh_config_t *cfg = s_load_ok ("memory: {max_bytes: 256MiB}\n" BUS
                                  "consumers:\n  - name: c\n    plugin: p\n"
                                  "    queue: {max_bytes: 64KiB, spool_max_bytes: 1G}\n");
    assert_int_equal (cfg->memory_max_bytes, (size_t) 256 << 20);
    assert_int_equal (cfg->consumers[0].queue_max_bytes, (size_t) 64 << 10);
    assert_int_equal (cfg->consumers[0].spool_max_bytes, (size_t) 1 << 30); /* G is GiB */
    fh_config_destroy (&cfg);
    char err[512];
    assert_null (s_load ("memory: {max_bytes: 2GB}\n" BUS CONSUMERS, err, sizeof err));
    if (!strstr (err, "memory.max_bytes: expected a size such as 4096, 64KiB or 1MiB"))
        fail_msg ("%s", err);
}

/* A typed key is read by option_value.c, the reader of plugin options:
   its refusal says what it expects as a plugin option of its type does
   ("a, b or c"; "from 0 up" for no upper bound worth naming). */
static void
test_typed_keys (void **state)
{
    (void) state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"log_level: loud\n" BUS CONSUMERS,
         "t.yaml:1:12: log_level: expected error, warning, info or debug, got 'loud'"},
        {"spool: {fsync: sometimes}\n" BUS CONSUMERS,
         "t.yaml:1:16: spool.fsync: expected never, interval or always, got 'sometimes'"},
        {"memory: {max_bytes: -1}\n" BUS CONSUMERS,
         "t.yaml:1:21: memory.max_bytes: expected a size such as 4096, 64KiB or 1MiB from 0 up, "
         "got '-1'"},
        {"state_dir: ''\n" BUS CONSUMERS, "t.yaml:1:12: state_dir: expected a file name, got ''"},
        {"state_dir: [a]\n" BUS CONSUMERS,
         "t.yaml:1:12: state_dir: expected a file name, got a list"},
        {"control_insecure: [true]\n" BUS CONSUMERS,
         "t.yaml:1:19: control_insecure: expected true or false, got a list"},
        {"shutdown_timeout: 1.0001h\n" BUS CONSUMERS,
         "t.yaml:1:19: shutdown_timeout: expected a duration such as 250ms, 2s or 1m from 0 to "
         "3600 s (a bare number is seconds), got '1.0001h'"},
        {BUS "consumers:\n  - {name: c, plugin: p, retry: {initial_ms: 2d}}\n",
         "t.yaml:4:46: consumers[0].retry.initial_ms: expected a duration such as 250ms, 2s or 1m "
         "from 0 to 3600000 ms, got '2d'"},
        {BUS "consumers:\n  - {name: c, plugin: p, workers: 257}\n",
         "t.yaml:4:35: consumers[0].workers: expected an integer from 1 to 256, got '257'"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_null (s_load (cases[i].text, err, sizeof err));
        assert_string_equal (err, cases[i].want);
    }
}

/* A small or missing error buffer is never overrun. */
static void
test_error_buffer (void **state)
{
    (void) state;
    char err[8];
    memset (err, 'x', sizeof err);
    assert_null (s_load ("bus: [", err, sizeof err));
    assert_int_equal (strlen (err), 7);
    assert_null (s_load ("bus: [", NULL, 0));
    assert_null (s_load ("- a", NULL, 0));
    assert_null (fh_config_load_file ("/nonexistent", NULL, 0));
    assert_null (fh_config_load_string (NULL, 0, NULL, err, sizeof err));
    char one[1] = {'x'};
    assert_null (s_load ("- a", one, sizeof one));
    assert_int_equal (one[0], '\0');
}

/* ------------------------------------------------------------------ */

static void
test_endpoint_check (void **state)
{
    (void) state;
    static const struct {
        const char *endpoint;
        bool for_bind;
        const char *reason; /* NULL: valid; else the start of the reason */
    } cases[] = {
        {"tcp://127.0.0.1:9940", false, NULL},
        {"tcp://hub.example.org:1", false, NULL},
        {"tcp://[::1]:65535", false, NULL},
        {"tcp://[fe80::1%eth0]:5", false, NULL},
        {"tcp://*:9940", true, NULL},
        {"tcp://eth0:9940", true, NULL},
        {"tcp://127.0.0.1:*", true, NULL},
        {"tcp://*:*", true, NULL},
        {"tcp://[::]:5", true, NULL},
        {"ipc:///run/fanhub/bus.sock", false, NULL},
        {"ipc://relative.sock", true, NULL},
        {"ipc://@abstract", true, NULL},
        {"inproc://bus", false, NULL},
        {"inproc://bus", true, NULL},

        {NULL, false, "empty endpoint"},
        {"", true, "empty endpoint"},
        {"udp://a:1", false, "unsupported transport 'udp' (use tcp://, ipc:// or inproc://)"},
        /* Checked as text only: no socket is made for any endpoint here. */
        {"pgm://eth0;239.192.1.1:5555", false, "unsupported transport 'pgm'"},
        {"TCP://a:1", false, "unsupported transport 'TCP'"},
        {"://a:1", false, "unsupported transport ''"},
        {"tcp:/a:1", false, "expected TRANSPORT://ADDRESS"},
        {"127.0.0.1:9940", false, "expected TRANSPORT://ADDRESS"},
        {"tcp://", false, "expected tcp://HOST:PORT"},
        {"tcp://host", false, "expected tcp://HOST:PORT"},
        {"tcp://:1", false, "empty host"},
        {"tcp://a:", false, "expected a port from 1 to 65535"},
        {"tcp://a:0", false, "expected a port from 1 to 65535"},
        {"tcp://a:65536", true, "expected a port from 1 to 65535"},
        {"tcp://a:999999", false, "expected a port from 1 to 65535"},
        {"tcp://a:-1", false, "expected a port from 1 to 65535"},
        {"tcp://a:+1", false, "expected a port from 1 to 65535"},
        {"tcp://a:12x", false, "expected a port from 1 to 65535"},
        {"tcp://*:1", false, "host '*' (every interface) is only for bind"},
        {"tcp://a:*", false, "port '*' (any free port) is only for bind"},
        {"tcp://::1:5", false, "IPv6 addresses go in brackets"},
        {"tcp://[::1:5", false, "missing ']'"},
        {"tcp://[]:5", false, "empty IPv6 address"},
        {"tcp://[abc]:5", false, "expected an IPv6 address in []"},
        {"tcp://[::1]5", false, "expected ':PORT' after the IPv6 address"},
        {"tcp://a/b:1", false, "invalid character in host"},
        {"tcp://a b:1", false, "an endpoint cannot contain spaces"},
        {"tcp://a:1\n", false, "an endpoint cannot contain spaces"},
        {"ipc://", true, "expected ipc://PATH"},
        {"inproc://", false, "expected inproc://NAME"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *why = fh_endpoint_check (cases[i].endpoint, cases[i].for_bind);
        const char *name = cases[i].endpoint ? cases[i].endpoint : "(NULL)";
        if (!cases[i].reason && why)
            fail_msg ("'%s' (bind %d): refused: %s", name, cases[i].for_bind, why);
        if (cases[i].reason && (!why || strncmp (why, cases[i].reason, strlen (cases[i].reason))))
            fail_msg ("'%s' (bind %d): got %s, expected \"%s\"", name, cases[i].for_bind,
                      why ? why : "valid", cases[i].reason);
    }

    /* ipc paths longer than a Unix socket path allows. */
    char endpoint[256] = "ipc:///";
    memset (endpoint + 7, 'p', 150);
    endpoint[157] = '\0';
    const char *why = fh_endpoint_check (endpoint, true);
    assert_non_null (why);
    assert_non_null (strstr (why, "more than the 107 a Unix socket path"));
    endpoint[6 + 107] = '\0'; /* exactly 107 bytes of path */
    assert_null (fh_endpoint_check (endpoint, true));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_default_config),      cmocka_unit_test (test_full_config),
        cmocka_unit_test (test_null_plugin_refused), cmocka_unit_test (test_defaults_and_numbers),
        cmocka_unit_test (test_byte_sizes),          cmocka_unit_test (test_typed_keys),
        cmocka_unit_test (test_publish_section),     cmocka_unit_test (test_aliases),
        cmocka_unit_test (test_option_limits),       cmocka_unit_test (test_pattern_warnings),
        cmocka_unit_test (test_control_default),     cmocka_unit_test (test_load_file),
        cmocka_unit_test (test_error_buffer),        cmocka_unit_test (test_endpoint_check),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
