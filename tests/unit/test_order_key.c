/*  test_order_key - order_by: what the ordering key of a message is.

    A table of cases per form: the key extracted, or the fallback (false,
    and the empty key). Then the edges: out-of-range segments and frames,
    bodies that are not JSON or not UTF-8, RFC 6901 escapes and array
    indexes, every kind of JSON value, long keys and their hash, and one
    compiled order_by used from several threads at once.
*/
#include "order_key.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* A message of `count` frames given as (pointer, size) pairs. */
static fh_msg_t *
make_msg_n (uint64_t seq, size_t count, const void *const *data, const size_t *sizes)
{
    zmq_msg_t frames[8];
    assert_true (count <= 8);
    for (size_t i = 0; i < count; i++) {
        assert_int_equal (zmq_msg_init_size (&frames[i], sizes[i]), 0);
        if (sizes[i])
            memcpy (zmq_msg_data (&frames[i]), data[i], sizes[i]);
    }
    fh_msg_t *msg = fh_msg_new (frames, (uint32_t) count, seq, 0);
    assert_non_null (msg);
    for (size_t i = 0; i < count; i++)
        zmq_msg_close (&frames[i]);
    atomic_store (&msg->holders, 1);
    return msg;
}

/* topic and body as C strings. */
static fh_msg_t *
make_msg (const char *topic, const char *body)
{
    const void *data[] = {topic, body};
    size_t sizes[] = {strlen (topic), strlen (body)};
    return make_msg_n (1, 2, data, sizes);
}

static fh_order_key_t *
parse_ok (const char *spec)
{
    char err[256] = "";
    fh_order_key_t *key = fh_order_key_parse (spec, err, sizeof err);
    if (!key)
        fail_msg ("'%s': %s", spec, err);
    return key;
}

/* The key of msg under spec is key (key_size bytes), or the fallback
   when key is NULL. */
static void
expect_key (const char *spec, const fh_msg_t *msg, const void *key, size_t key_size)
{
    fh_order_key_t *order = parse_ok (spec);
    char buf[FH_ORDER_KEY_MAX];
    memset (buf, 'Z', sizeof buf);
    size_t len = sizeof buf;
    bool found = fh_order_key_extract (order, msg, buf, &len);
    if (!key) {
        if (found)
            fail_msg ("'%s': expected the fallback, got '%.*s'", spec, (int) len, buf);
        assert_int_equal (len, 0);
    }
    else {
        if (!found)
            fail_msg ("'%s': expected '%.*s', got the fallback", spec, (int) key_size,
                      (const char *) key);
        if (len != key_size || memcmp (buf, key, len) != 0)
            fail_msg ("'%s': expected '%.*s' (%zu), got '%.*s' (%zu)", spec, (int) key_size,
                      (const char *) key, key_size, (int) len, buf, len);
    }
    fh_order_key_destroy (&order);
    assert_null (order);
}

static void
expect (const char *spec, const fh_msg_t *msg, const char *key)
{
    expect_key (spec, msg, key, key ? strlen (key) : 0);
}

static void
test_parse (void **state)
{
    (void) state;
    static const struct {
        const char *spec;
        fh_order_kind_t kind;
        unsigned index;
    } good[] = {
        {"topic", FH_ORDER_TOPIC, 0},
        {"none", FH_ORDER_NONE, 0},
        {"topic_segment:3", FH_ORDER_TOPIC_SEGMENT, 3},
        {"topic_segment: 0", FH_ORDER_TOPIC_SEGMENT, 0},
        {" frame : 2 ", FH_ORDER_FRAME, 2},
        {"frame:4294967295", FH_ORDER_FRAME, 4294967295u},
        {"json:/msg/vm", FH_ORDER_JSON, 0},
        {"json: /msg/vm", FH_ORDER_JSON, 0},
        {"json:", FH_ORDER_JSON, 0},
        {"json:/", FH_ORDER_JSON, 0},
        {"json:/a~0b/c~1d//", FH_ORDER_JSON, 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        fh_order_key_t *key = parse_ok (good[i].spec);
        assert_int_equal (fh_order_key_kind (key), good[i].kind);
        assert_int_equal (fh_order_key_index (key), good[i].index);
        fh_order_key_destroy (&key);
        fh_order_key_destroy (&key);
    }
    static const struct {
        const char *spec, *why;
    } bad[] = {
        {"", "expected topic, topic_segment:K"},
        {"topics", "expected topic"},
        {"Topic", "expected topic"},
        {"topic:1", "topic takes no argument"},
        {"none:", "none takes no argument"},
        {"topic_segment", "needs a number K from 0"},
        {"topic_segment:", "needs a number"},
        {"topic_segment:-1", "needs a number"},
        {"topic_segment:+1", "needs a number"},
        {"topic_segment:1x", "needs a number"},
        {"topic_segment:1 2", "needs a number"},
        {"frame:4294967296", "needs a number"},
        {"frame:99999999999999999999999", "needs a number"},
        {"json", "json needs a pointer"},
        {"json:msg/vm", "must start with '/'"},
        {"json:/a~2b", "'~' at offset 2 must be followed by 0 or 1"},
        {"json:/a~", "'~' at offset 2"},
        {"xml:/a", "expected topic"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        fh_order_key_t *key = fh_order_key_parse (bad[i].spec, err, sizeof err);
        if (key)
            fail_msg ("'%s' was accepted", bad[i].spec);
        if (!strstr (err, bad[i].why))
            fail_msg ("'%s': error '%s' lacks '%s'", bad[i].spec, err, bad[i].why);
        assert_non_null (strstr (err, "order_by: "));
    }
}

static void
test_topic_and_segments (void **state)
{
    (void) state;
    fh_msg_t *msg = make_msg ("org.fedoraproject.prod.buildsys", "{}");
    expect ("topic", msg, "org.fedoraproject.prod.buildsys");
    expect ("topic_segment:0", msg, "org");
    expect ("topic_segment:1", msg, "fedoraproject");
    expect ("topic_segment:3", msg, "buildsys");
    expect ("topic_segment:4", msg, NULL);
    expect ("topic_segment:4294967295", msg, NULL);
    fh_msg_release (msg, NULL);

    /* Empty segments are keys; a missing one is the fallback. */
    msg = make_msg ("a..b.", "{}");
    expect ("topic_segment:0", msg, "a");
    expect ("topic_segment:1", msg, "");
    expect ("topic_segment:2", msg, "b");
    expect ("topic_segment:3", msg, "");
    expect ("topic_segment:4", msg, NULL);
    fh_msg_release (msg, NULL);

    /* The empty topic: its whole and its one (empty) segment. */
    msg = make_msg ("", "{}");
    expect ("topic", msg, "");
    expect ("topic_segment:0", msg, "");
    expect ("topic_segment:1", msg, NULL);
    fh_msg_release (msg, NULL);

    /* A topic without dots is its own segment 0. */
    msg = make_msg ("plain", "{}");
    expect ("topic_segment:0", msg, "plain");
    expect ("topic_segment:1", msg, NULL);
    fh_msg_release (msg, NULL);
}

static void
test_frames (void **state)
{
    (void) state;
    static const char binary[] = {'k', 0, (char) 0xff, 'e', 0};
    const void *data[] = {"t.x", "body", binary, ""};
    size_t sizes[] = {3, 4, sizeof binary, 0};
    fh_msg_t *msg = make_msg_n (7, 4, data, sizes);
    expect ("frame:0", msg, "t.x");
    expect ("frame:1", msg, "body");
    expect_key ("frame:2", msg, binary, sizeof binary); /* bytes, NULs kept */
    expect ("frame:3", msg, "");                        /* empty, present */
    expect ("frame:4", msg, NULL);
    expect ("frame:4294967295", msg, NULL);
    /* none: each message its own key, its sequence number. */
    expect_key ("none", msg, "\0\0\0\0\0\0\0\7", 8);
    fh_msg_release (msg, NULL);
}

static void
test_json_values (void **state)
{
    (void) state;
    fh_msg_t *msg = make_msg (
        "t", "{\"msg\": {\"vm\": \"abc\", \"n\": 42, \"neg\": -7, \"r\": 1.5, \"e\": 1e2,"
             " \"t\": true, \"f\": false, \"z\": null,"
             " \"o\": {\"b\": 1, \"a\": [1, 2], \"c\": {\"y\": \"\\u00e9\", \"x\": null}},"
             " \"arr\": [10, \"x\", {\"k\": \"v\"}], \"empty\": {}, \"none\": []},"
             " \"a/b\": 1, \"m~n\": 2, \"\": 3, \"~1\": 4,"
             " \"s\": \"caf\\u00e9 \\\"q\\\"\", \"nul\": \"a\\u0000b\"}");
    expect ("json:/msg/vm", msg, "abc");
    expect ("json:/msg/n", msg, "42");
    expect ("json:/msg/neg", msg, "-7");
    expect ("json:/msg/r", msg, "1.5");
    expect ("json:/msg/e", msg, "100.0");
    expect ("json:/msg/t", msg, "true");
    expect ("json:/msg/f", msg, "false");
    expect ("json:/msg/z", msg, "null");
    /* Objects and arrays: compact, keys sorted at every level. */
    expect ("json:/msg/o", msg, "{\"a\":[1,2],\"b\":1,\"c\":{\"x\":null,\"y\":\"\xc3\xa9\"}}");
    expect ("json:/msg/empty", msg, "{}");
    expect ("json:/msg/none", msg, "[]");
    /* Array indexes. */
    expect ("json:/msg/arr/0", msg, "10");
    expect ("json:/msg/arr/1", msg, "x");
    expect ("json:/msg/arr/2/k", msg, "v");
    expect ("json:/msg/arr/3", msg, NULL);
    expect ("json:/msg/arr/01", msg, NULL);
    expect ("json:/msg/arr/-", msg, NULL);
    expect ("json:/msg/arr/x", msg, NULL);
    expect ("json:/msg/arr/99999999999999999999", msg, NULL);
    /* Escaped tokens: ~1 is '/', ~0 is '~', and ~01 is "~1", not "/". */
    expect ("json:/a~1b", msg, "1");
    expect ("json:/m~0n", msg, "2");
    expect ("json:/~01", msg, "4");
    expect ("json:/a/b", msg, NULL);
    /* "/" is the member named "". */
    expect ("json:/", msg, "3");
    /* Strings: their content, unescaped, UTF-8, NUL bytes kept. */
    expect ("json:/s", msg, "caf\xc3\xa9 \"q\"");
    expect_key ("json:/nul", msg, "a\0b", 3);
    /* Not found: a missing member, or a step into a scalar. */
    expect ("json:/missing", msg, NULL);
    expect ("json:/msg/vm/deeper", msg, NULL);
    expect ("json:/msg/n/0", msg, NULL);
    expect ("json:/msg/MSG", msg, NULL);
    fh_msg_release (msg, NULL);

    /* The whole document, and scalar documents. */
    msg = make_msg ("t", " {\"b\": [true], \"a\": 1} ");
    expect ("json:", msg, "{\"a\":1,\"b\":[true]}");
    fh_msg_release (msg, NULL);
    msg = make_msg ("t", "\"just a string\"");
    expect ("json:", msg, "just a string");
    expect ("json:/0", msg, NULL);
    fh_msg_release (msg, NULL);
    /* A \u0000 inside a value that is not a string: written back as
       \u0000, so "a\u0000b" and "a\u0000c" stay two keys. */
    msg = make_msg ("t", "{\"o\": {\"k\": \"a\\u0000b\"}, \"p\": [\"\\u0000\"]}");
    expect ("json:/o", msg, "{\"k\":\"a\\u0000b\"}");
    expect ("json:/p", msg, "[\"\\u0000\"]");
    expect_key ("json:/p/0", msg, "", 1);
    fh_msg_release (msg, NULL);
    msg = make_msg ("t", "[\"first\", 2]");
    expect ("json:/0", msg, "first");
    expect ("json:/1", msg, "2");
    fh_msg_release (msg, NULL);
}

static void
test_json_fallback (void **state)
{
    (void) state;
    static const char *const bodies[] = {
        "",  /* empty */
        "{", /* truncated */
        "not json",
        "{\"k\": \"v\"} trailing",
        "{\"k\": 'v'}",
        "{\"k\": \"\xff\"}",             /* not UTF-8 */
        "{\"k\": \"\xc0\xaf\"}",         /* overlong */
        "{\"k\": \"\xed\xa0\x80\"}",     /* a surrogate */
        "{\"k\": \"\\ud800\"}",          /* a lone escaped surrogate */
        "{\"k\": 12345678901234567890}", /* beyond 64 bits: jansson refuses */
        "{\"k\": 1e400}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        fh_msg_t *msg = make_msg ("t", bodies[i]);
        expect ("json:/k", msg, NULL);
        expect ("json:", msg, NULL);
        fh_msg_release (msg, NULL);
    }
    /* A body that is not UTF-8 has no JSON key, but its topic still is
       one, bytes as they are. */
    fh_msg_t *msg = make_msg ("t\xff", "\xff\xfe");
    expect ("json:/k", msg, NULL);
    expect ("topic", msg, "t\xff");
    expect ("frame:1", msg, "\xff\xfe");
    fh_msg_release (msg, NULL);
    /* No body frame at all. */
    const void *data[] = {"t"};
    size_t sizes[] = {1};
    msg = make_msg_n (1, 1, data, sizes);
    expect ("json:", msg, NULL);
    expect ("frame:1", msg, NULL);
    expect ("topic", msg, "t");
    fh_msg_release (msg, NULL);
    /* Deep nesting is refused by jansson's depth limit, not the stack. */
    size_t depth = 100000;
    char *deep = malloc (2 * depth + 1);
    memset (deep, '[', depth);
    memset (deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    msg = make_msg ("t", deep);
    expect ("json:/0", msg, NULL);
    fh_msg_release (msg, NULL);
    free (deep);
}

static uint64_t
fnv1a (const void *data, size_t size)
{
    const unsigned char *p = data;
    uint64_t hash = UINT64_C (0xcbf29ce484222325);
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ p[i]) * UINT64_C (0x100000001b3);
    return hash;
}

/* A long key: its first FH_ORDER_KEY_MAX - 16 bytes, then the hash. */
static void
expect_long (const char *spec, const fh_msg_t *msg, const char *whole, size_t size)
{
    char expected[FH_ORDER_KEY_MAX + 1];
    size_t keep = FH_ORDER_KEY_MAX - 16;
    memcpy (expected, whole, keep);
    snprintf (expected + keep, 17, "%016llx", (unsigned long long) fnv1a (whole, size));
    expect_key (spec, msg, expected, FH_ORDER_KEY_MAX);
}

static void
test_long_keys (void **state)
{
    (void) state;
    char topic[1000];
    memset (topic, 'a', sizeof topic - 1);
    topic[sizeof topic - 1] = '\0';

    /* Up to FH_ORDER_KEY_MAX: as it is. */
    topic[FH_ORDER_KEY_MAX] = '\0';
    fh_msg_t *msg = make_msg (topic, "{}");
    expect ("topic", msg, topic);
    fh_msg_release (msg, NULL);

    /* One byte more: hashed. Two long keys that differ only past the kept
       prefix stay apart. */
    topic[FH_ORDER_KEY_MAX] = 'a';
    topic[FH_ORDER_KEY_MAX + 1] = '\0';
    msg = make_msg (topic, "{}");
    expect_long ("topic", msg, topic, FH_ORDER_KEY_MAX + 1);
    fh_msg_release (msg, NULL);
    topic[FH_ORDER_KEY_MAX] = 'b';
    msg = make_msg (topic, "{}");
    expect_long ("topic", msg, topic, FH_ORDER_KEY_MAX + 1);
    fh_msg_release (msg, NULL);
    topic[FH_ORDER_KEY_MAX + 1] = 'a';

    /* Long JSON values: a string, and an object written in pieces. */
    char body[3000];
    int n = snprintf (body, sizeof body, "{\"s\": \"%s\", \"o\": {\"z\": \"%s\", \"a\": 1}}", topic,
                      topic);
    assert_true (n > 0 && (size_t) n < sizeof body);
    msg = make_msg ("t", body);
    expect_long ("json:/s", msg, topic, strlen (topic));
    char object[2100];
    n = snprintf (object, sizeof object, "{\"a\":1,\"z\":\"%s\"}", topic);
    expect_long ("json:/o", msg, object, (size_t) n);
    fh_msg_release (msg, NULL);
}

/* One compiled order_by, several threads at once. */

typedef struct {
    const fh_order_key_t *order;
    const fh_msg_t *msg;
    int errors;
} extract_job_t;

static void *
extract_many (void *arg)
{
    extract_job_t *job = arg;
    for (int i = 0; i < 2000; i++) {
        char buf[FH_ORDER_KEY_MAX];
        size_t len = sizeof buf;
        if (!fh_order_key_extract (job->order, job->msg, buf, &len) || len != 9
            || memcmp (buf, "{\"x\":[1]}", 9) != 0)
            job->errors++;
    }
    return NULL;
}

static void
test_threads_share_one_order_by (void **state)
{
    (void) state;
    fh_order_key_t *order = parse_ok ("json:/a/0");
    fh_msg_t *msg = make_msg ("t", "{\"a\": [{\"x\": [1]}]}");
    enum { THREADS = 4 };
    pthread_t threads[THREADS];
    extract_job_t jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (extract_job_t){order, msg, 0};
        assert_int_equal (pthread_create (&threads[t], NULL, extract_many, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join (threads[t], NULL);
        assert_int_equal (jobs[t].errors, 0);
    }
    fh_msg_release (msg, NULL);
    fh_order_key_destroy (&order);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse),
        cmocka_unit_test (test_topic_and_segments),
        cmocka_unit_test (test_frames),
        cmocka_unit_test (test_json_values),
        cmocka_unit_test (test_json_fallback),
        cmocka_unit_test (test_long_keys),
        cmocka_unit_test (test_threads_share_one_order_by),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
