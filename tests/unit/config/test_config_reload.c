/*  test_config_reload - what a reload may change (fh_config_restart_keys,
    fh_config_consumer_same), driven by the tables that parse the file.

    A table of rows: a base configuration that sets every key, one key
    changed, and the answer the reload must give: the keys named as
    needing a restart, or none (live), and for a consumer's keys whether
    the running instance stays.
*/
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Every key set, each on a line of its own so a row can replace one. */
static const char s_base[] = "name: hub\n"
                             "bus:\n"
                             "  connect: [tcp://127.0.0.1:9940]\n"
                             "  bind: [tcp://127.0.0.1:9941]\n"
                             "  rcvhwm: 1000\n"
                             "  max_frames: 32\n"
                             "  max_message_bytes: 65536\n"
                             "  publish: [tcp://127.0.0.1:9942]\n"
                             "  gap_detection:\n"
                             "    counter: n\n"
                             "    producer: topic\n"
                             "    max_producers: 10\n"
                             "  amqp: {url: \"amqp://127.0.0.1:5672\", queue: q, prefetch: 10}\n"
                             "control: ipc:///tmp/fanhub-test-config-reload.sock\n"
                             "shutdown_timeout: 10\n"
                             "state_dir: /tmp/fanhub-test-config-reload\n"
                             "spool:\n"
                             "  fsync: interval\n"
                             "  fsync_interval: 1\n"
                             "  segment_bytes: 65536\n"
                             "log_level: info\n"
                             "metrics:\n"
                             "  interval: 10\n"
                             "  collectd:\n"
                             "    socket: /tmp/fanhub-test-collectd.sock\n"
                             "    interval: 10\n"
                             "  prometheus:\n"
                             "    listen: 127.0.0.1:9464\n"
                             "  moksha_socket: tcp://127.0.0.1:9943\n"
                             "  moksha_interval: 5\n"
                             "consumers:\n"
                             "  - name: c\n"
                             "    plugin: p\n"
                             "    topics: [a.b]\n"
                             "    queue:\n"
                             "      capacity: 100\n"
                             "      warn_at: 50\n"
                             "      overflow: spill\n"
                             "      spool_max_bytes: 1000000\n"
                             "      write_ahead: false\n"
                             "    options: {x: 1}\n"
                             "    retry:\n"
                             "      max_attempts: 3\n"
                             "      initial_ms: 10\n"
                             "      max_ms: 100\n"
                             "      jitter: 0.2\n"
                             "    consume_timeout: 60\n"
                             "    workers: 2\n"
                             "    order_by: topic\n"
                             "    coalesce: false\n"
                             "    max_pending: 50\n"
                             "    shard: {index: 0, count: 2}\n"
                             "    publish:\n"
                             "      bind: [tcp://127.0.0.1:9960]\n"
                             "      connect: [tcp://127.0.0.1:9961]\n"
                             "      envelope: fedmsg\n"
                             "      local: false\n"
                             "      queue: 100\n";

typedef struct {
    const char *from, *to; /* one line of s_base, and what replaces it */
    const char *restart;   /* the keys named, "" when live or a consumer key */
    bool consumer_same;    /* a consumer key: the running instance stays */
} s_row_t;

static const s_row_t s_rows[] = {
    {"name: hub\n", "name: other\n", "name", true},
    {"connect: [tcp://127.0.0.1:9940]", "connect: [tcp://127.0.0.1:9950]", "bus.connect", true},
    {"bind: [tcp://127.0.0.1:9941]", "bind: [tcp://127.0.0.1:9951]", "bus.bind", true},
    {"rcvhwm: 1000", "rcvhwm: 7", "bus.rcvhwm", true},
    {"max_frames: 32", "max_frames: 2", "bus.max_frames", true},
    {"max_message_bytes: 65536", "max_message_bytes: 100", "bus.max_message_bytes", true},
    {"publish: [tcp://127.0.0.1:9942]", "publish: [tcp://127.0.0.1:9952]", "bus.publish", true},
    {"counter: n", "counter: m", "bus.gap_detection.counter", true},
    {"producer: topic", "producer: \"json:/p\"", "bus.gap_detection.producer", true},
    {"max_producers: 10", "max_producers: 11", "bus.gap_detection.max_producers", true},
    {"control: ipc:///tmp/fanhub-test-config-reload.sock", "control: ipc:///tmp/other.sock",
     "control", true},
    {"shutdown_timeout: 10", "shutdown_timeout: 2", "", true},
    {"state_dir: /tmp/fanhub-test-config-reload", "state_dir: /tmp/other", "state_dir", true},
    {"fsync: interval", "fsync: always", "spool.fsync", true},
    {"fsync_interval: 1", "fsync_interval: 2", "spool.fsync_interval", true},
    {"segment_bytes: 65536", "segment_bytes: 8192", "spool.segment_bytes", true},
    {"log_level: info", "log_level: debug", "", true},
    {"  interval: 10\n  collectd", "  interval: 20\n  collectd", "metrics.interval", true},
    {"socket: /tmp/fanhub-test-collectd.sock", "socket: /tmp/other-collectd.sock",
     "metrics.collectd.socket", true},
    {"    interval: 10\n  prometheus", "    interval: 20\n  prometheus",
     "metrics.collectd.interval", true},
    {"listen: 127.0.0.1:9464", "listen: 127.0.0.1:9465", "metrics.prometheus.listen", true},
    {"moksha_socket: tcp://127.0.0.1:9943", "moksha_socket: tcp://127.0.0.1:9953",
     "metrics.moksha_socket", true},
    {"moksha_interval: 5", "moksha_interval: 6", "metrics.moksha_interval", true},
    /* The consumer's keys: live, or a new instance. */
    {"topics: [a.b]", "topics: [a.c, d]", "", true},
    {"warn_at: 50", "warn_at: 60", "", true},
    {"plugin: p", "plugin: q", "", false},
    {"capacity: 100", "capacity: 200", "", false},
    {"overflow: spill", "overflow: block", "", false},
    {"spool_max_bytes: 1000000", "spool_max_bytes: 2000000", "", false},
    {"options: {x: 1}", "options: {x: 2}", "", false},
    {"max_attempts: 3", "max_attempts: 4", "", false},
    {"initial_ms: 10", "initial_ms: 20", "", false},
    {"max_ms: 100", "max_ms: 200", "", false},
    {"jitter: 0.2", "jitter: 0.3", "", false},
    {"consume_timeout: 60", "consume_timeout: 61", "", false},
    {"workers: 2", "workers: 3", "", false},
    {"order_by: topic", "order_by: {frame: 1}", "", false},
    {"coalesce: false", "coalesce: true", "", false},
    {"write_ahead: false", "write_ahead: true", "", false},
    {"max_pending: 50", "max_pending: 51", "", false},
    {"shard: {index: 0, count: 2}", "shard: {index: 1, count: 2}", "", false},
    {"shard: {index: 0, count: 2}", "shard: {index: 0, count: 3}", "", false},
    /* publish: (sign: needs a key pair on disk: test_publish.py) */
    {"bind: [tcp://127.0.0.1:9960]", "bind: [tcp://127.0.0.1:9970]", "", false},
    {"connect: [tcp://127.0.0.1:9961]", "connect: []", "", false},
    {"envelope: fedmsg", "envelope: none", "", false},
    {"local: false", "local: true", "", false},
    {"queue: 100", "queue: 101", "", false},
    {"prefetch: 10", "prefetch: 11", "bus.amqp", true},
};

static fh_config_t *
s_load (const char *text)
{
    char err[512];
    fh_config_t *cfg = fh_config_load_string (text, strlen (text), "t.yaml", err, sizeof err);
    if (!cfg)
        fail_msg ("load failed: %s\n--- text:\n%s", err, text);
    return cfg;
}

/* s_base with `from` replaced by `to` (from must be there, once). */
static char *
s_changed (const char *from, const char *to)
{
    const char *at = strstr (s_base, from);
    assert_non_null (at);
    assert_null (strstr (at + 1, from));
    size_t size = strlen (s_base) - strlen (from) + strlen (to) + 1;
    char *text = malloc (size);
    assert_non_null (text);
    snprintf (text, size, "%.*s%s%s", (int) (at - s_base), s_base, to, at + strlen (from));
    return text;
}

static void
test_each_key (void **state)
{
    (void) state;
    fh_config_t *base = s_load (s_base);
    char keys[512];
    assert_int_equal (fh_config_restart_keys (base, base, keys, sizeof keys), 0);
    assert_string_equal (keys, "");
    assert_true (fh_config_consumer_same (&base->consumers[0], &base->consumers[0]));
    for (size_t i = 0; i < sizeof s_rows / sizeof *s_rows; i++) {
        const s_row_t *row = &s_rows[i];
        char *text = s_changed (row->from, row->to);
        fh_config_t *next = s_load (text);
        size_t count = fh_config_restart_keys (base, next, keys, sizeof keys);
        if (strcmp (keys, row->restart) != 0 || count != (row->restart[0] ? 1u : 0u))
            fail_msg ("%s -> %s: restart keys '%s' (%zu), expected '%s'", row->from, row->to, keys,
                      count, row->restart);
        if (fh_config_consumer_same (&base->consumers[0], &next->consumers[0])
            != row->consumer_same)
            fail_msg ("%s -> %s: the consumer %s, expected it %s", row->from, row->to,
                      row->consumer_same ? "was replaced" : "stayed",
                      row->consumer_same ? "to stay" : "replaced");
        fh_config_destroy (&next);
        free (text);
    }
    fh_config_destroy (&base);
}

static void
test_several_keys_are_all_named (void **state)
{
    (void) state;
    fh_config_t *base = s_load (s_base);
    char *one = s_changed ("rcvhwm: 1000", "rcvhwm: 7");
    char *both = NULL;
    {
        const char *from = "max_frames: 32";
        const char *at = strstr (one, from);
        size_t size = strlen (one) + 8;
        both = malloc (size);
        snprintf (both, size, "%.*smax_frames: 2%s", (int) (at - one), one, at + strlen (from));
    }
    fh_config_t *next = s_load (both);
    char keys[512];
    assert_int_equal (fh_config_restart_keys (base, next, keys, sizeof keys), 2);
    assert_string_equal (keys, "bus.rcvhwm, bus.max_frames");
    fh_config_destroy (&next);
    fh_config_destroy (&base);
    free (one);
    free (both);
}

static void
test_limits (void **state)
{
    (void) state;
    char err[512];
    /* Nested deeper than 64 levels: refused before the tree is built. */
    size_t depth = 100000;
    char *deep = malloc (2 * depth + 8);
    assert_non_null (deep);
    memcpy (deep, "a: ", 3);
    memset (deep + 3, '[', depth);
    memset (deep + 3 + depth, ']', depth);
    deep[3 + 2 * depth] = '\0';
    assert_null (fh_config_load_string (deep, strlen (deep), "t.yaml", err, sizeof err));
    assert_non_null (strstr (err, "t.yaml:1:"));
    assert_non_null (strstr (err, "nested deeper than 128 levels"));
    free (deep);
    /* Too many consumers. */
    size_t room = 64 + 1100 * 40;
    char *many = malloc (room);
    size_t used
        = (size_t) snprintf (many, room, "bus:\n  connect: tcp://127.0.0.1:1\nconsumers:\n");
    for (int i = 0; i < 1100; i++)
        used += (size_t) snprintf (many + used, room - used, "  - {name: c%d, plugin: p}\n", i);
    assert_null (fh_config_load_string (many, used, "t.yaml", err, sizeof err));
    assert_non_null (strstr (err, "1100 consumers: a hub runs at most 1024"));
    free (many);
    /* Too large a file. */
    size_t big = 17 * 1024 * 1024;
    char *huge = calloc (1, big);
    assert_non_null (huge);
    memset (huge, '#', big - 1);
    assert_null (fh_config_load_string (huge, big - 1, "t.yaml", err, sizeof err));
    assert_non_null (strstr (err, "a configuration is at most 16 MiB"));
    free (huge);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_each_key),
        cmocka_unit_test (test_several_keys_are_all_named),
        cmocka_unit_test (test_limits),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
