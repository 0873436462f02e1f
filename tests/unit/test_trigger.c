/*  test_trigger - topic patterns and the trigger table.

    The table is checked against fh_pattern_match, the one-pattern
    reference: for every topic of a set, the consumers the table finds
    must be exactly those with a pattern that matches.
*/
#include "trigger.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

typedef struct {
    const char *pattern;
    const char *topic;
    bool match;
} pattern_case_t;

static const pattern_case_t pattern_cases[] = {
    /* prefix */
    {"org.fedoraproject.", "org.fedoraproject.prod.git.receive", true},
    {"org.fedoraproject.", "org.fedoraproject.", true},
    {"org.fedoraproject.", "org.fedoraproject", false},
    {"org.fedoraproject.", "io.pagure.prod.pull-request.new", false},
    {"", "anything", true},
    {"", "", true},
    /* exact */
    {"=org.x.y", "org.x.y", true},
    {"=org.x.y", "org.x.y.z", false},
    {"=org.x.y", "org.x", false},
    /* glob */
    {"*.buildsys.*", "org.fedoraproject.prod.buildsys.build.state.change", true},
    {"*.buildsys.*", "buildsys.build", false},
    {"*.buildsys.*", "org.buildsys.", true},
    {"*", "", true},
    {"*", "a.b.c", true},
    {"org.*.receive", "org.fedoraproject.prod.git.receive", true},
    {"org.*.receive", "org.fedoraproject.prod.git.receive.more", false},
    {"org.*", "org", false},
    {"*receive", "git.receive", true},
    {"*receive", "git.receiver", false},
    {"a*b*c", "abc", true},
    {"a*b*c", "aXbYbZc", true},
    {"a*b*c", "aXbYc.", false},
    {"a**b", "ab", true},
    {"*.*.*", "a.b", false},
    {"*.*.*", "a.b.c", true},
    {"*ab", "aab", true}, /* needs the backtrack */
};

static void
test_pattern_cases (void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof pattern_cases / sizeof pattern_cases[0]; i++) {
        const pattern_case_t *c = &pattern_cases[i];
        bool got = fh_pattern_match (c->pattern, c->topic, strlen (c->topic));
        if (got != c->match)
            fail_msg ("pattern '%s' on topic '%s': expected %s", c->pattern, c->topic,
                      c->match ? "a match" : "no match");
    }
}

static void
test_topic_with_nul_byte (void **state)
{
    (void) state;
    const char topic[] = {'a', '\0', 'b'};
    assert_true (fh_pattern_match ("a", topic, 3));
    assert_true (fh_pattern_match ("*b", topic, 3));
    assert_false (fh_pattern_match ("=a", topic, 3));
}

/* Builds a table of consumers, each with a list of patterns. */
static fh_trigger_t *
build_table (const char *const *const *patterns, size_t consumers)
{
    fh_trigger_t *table = fh_trigger_new (consumers);
    assert_non_null (table);
    for (size_t c = 0; c < consumers; c++)
        for (const char *const *p = patterns[c]; *p; p++)
            assert_int_equal (fh_trigger_add (table, c, *p), 0);
    assert_int_equal (fh_trigger_seal (table), 0);
    return table;
}

static void
check_against_reference (fh_trigger_t *table, const char *const *const *patterns,
                         size_t consumers, const char *topic)
{
    uint32_t found[64];
    size_t count = fh_trigger_match (table, topic, strlen (topic), found);
    size_t at = 0;
    for (size_t c = 0; c < consumers; c++) {
        bool expected = false;
        for (const char *const *p = patterns[c]; *p; p++)
            expected = expected || fh_pattern_match (*p, topic, strlen (topic));
        if (expected) {
            if (at >= count || found[at] != c)
                fail_msg ("topic '%s': consumer %zu should match", topic, c);
            at++;
        }
    }
    if (at != count)
        fail_msg ("topic '%s': %zu matches, expected %zu", topic, count, at);
}

static const char *const p0[] = {"org.fedoraproject.prod.buildsys.", NULL};
static const char *const p1[] = {"*.buildsys.*", NULL};
static const char *const p2[] = {"", NULL}; /* everything */
static const char *const p3[] = {"=org.fedoraproject.prod.git.receive", "io.pagure.", NULL};
static const char *const p4[] = {NULL}; /* nothing */
static const char *const p5[] = {"org.", "org.fedoraproject.", "*receive", NULL};
static const char *const p6[] = {"*", NULL};
static const char *const *const table_patterns[] = {p0, p1, p2, p3, p4, p5, p6};

static const char *const table_topics[] = {
    "org.fedoraproject.prod.buildsys.build.state.change",
    "org.fedoraproject.stg.buildsys.tag",
    "org.fedoraproject.prod.git.receive",
    "org.fedoraproject.prod.git.receive.x",
    "io.pagure.prod.pull-request.new",
    "io.pagure",
    "org.centos.ci.receive",
    "org",
    "",
    "buildsys",
};

static void
test_table_matches_reference (void **state)
{
    (void) state;
    size_t consumers = sizeof table_patterns / sizeof table_patterns[0];
    fh_trigger_t *table = build_table (table_patterns, consumers);
    for (size_t i = 0; i < sizeof table_topics / sizeof table_topics[0]; i++)
        check_against_reference (table, table_patterns, consumers, table_topics[i]);
    fh_trigger_destroy (&table);
    assert_null (table);
    fh_trigger_destroy (&table); /* twice is safe */
}

static void
test_many_consumers_random (void **state)
{
    (void) state;
    /* 200 consumers (several bitset words), random patterns over a small
       alphabet so that overlaps are common, 2000 random topics. */
    enum { CONSUMERS = 200, TOPICS = 2000 };
    static char storage[CONSUMERS][3][12];
    static const char *lists[CONSUMERS][4];
    const char *const *patterns[CONSUMERS];
    srand (42);
    const char alphabet[] = "ab.*";
    for (size_t c = 0; c < CONSUMERS; c++) {
        size_t n = (size_t) rand () % 3 + 1;
        for (size_t k = 0; k < n; k++) {
            size_t len = (size_t) rand () % 6;
            char *p = storage[c][k];
            size_t at = 0;
            if (rand () % 5 == 0)
                p[at++] = '=';
            for (size_t j = 0; j < len; j++)
                p[at++] = alphabet[rand () % (p[0] == '=' ? 3 : 4)];
            p[at] = '\0';
            if (strcmp (p, "=") == 0)
                strcpy (p, "=a");
            lists[c][k] = p;
        }
        lists[c][n] = NULL;
        patterns[c] = lists[c];
    }
    fh_trigger_t *table = build_table (patterns, CONSUMERS);
    char topic[16];
    for (int t = 0; t < TOPICS; t++) {
        size_t len = (size_t) rand () % 8;
        for (size_t j = 0; j < len; j++)
            topic[j] = "ab."[rand () % 3];
        topic[len] = '\0';
        uint32_t found[CONSUMERS];
        size_t count = fh_trigger_match (table, topic, len, found);
        size_t expected = 0;
        for (size_t c = 0; c < CONSUMERS; c++) {
            bool hit = false;
            for (const char *const *p = patterns[c]; *p; p++)
                hit = hit || fh_pattern_match (*p, topic, len);
            if (hit) {
                if (expected >= count || found[expected] != c)
                    fail_msg ("topic '%s': consumer %zu missing", topic, c);
                expected++;
            }
        }
        assert_int_equal (count, expected);
    }
    fh_trigger_destroy (&table);
}

static void
test_subscriptions_minimal (void **state)
{
    (void) state;
    static const char *const a[] = {"org.fedoraproject.prod.", "=org.fedoraproject.x", NULL};
    static const char *const b[] = {"org.fedoraproject.", "io.pagure.*.new", NULL};
    static const char *const c[] = {"=io.pagure", NULL};
    static const char *const *const patterns[] = {a, b, c};
    fh_trigger_t *table = build_table (patterns, 3);
    const char *const *subs;
    size_t n = fh_trigger_subscriptions (table, &subs);
    assert_int_equal (n, 2);
    assert_string_equal (subs[0], "io.pagure");
    assert_string_equal (subs[1], "org.fedoraproject.");
    fh_trigger_destroy (&table);

    static const char *const d[] = {"x.", NULL};
    static const char *const e[] = {"*.y", NULL};
    static const char *const *const patterns2[] = {d, e};
    table = build_table (patterns2, 2);
    n = fh_trigger_subscriptions (table, &subs);
    assert_int_equal (n, 1);
    assert_string_equal (subs[0], "");
    fh_trigger_destroy (&table);
}

static void
test_duplicate_patterns_match_once (void **state)
{
    (void) state;
    static const char *const a[] = {"org.", "org.", "*", "=org.x", NULL};
    static const char *const *const patterns[] = {a};
    fh_trigger_t *table = build_table (patterns, 1);
    uint32_t found[1];
    assert_int_equal (fh_trigger_match (table, "org.x", 5, found), 1);
    assert_int_equal (found[0], 0);
    fh_trigger_destroy (&table);
}

/* The obvious recursive matcher, '*' any run of bytes: the reference for
   the trigger's own. */
static bool
naive_glob (const char *p, const char *t, size_t n)
{
    if (*p == '\0')
        return n == 0;
    if (*p == '*') {
        for (size_t skip = 0; skip <= n; skip++)
            if (naive_glob (p + 1, t + skip, n - skip))
                return true;
        return false;
    }
    return n > 0 && *p == *t && naive_glob (p + 1, t + 1, n - 1);
}

/* Random globs and topics over a four-letter alphabet (so that pieces
   overlap, repeat and nearly match): the matcher agrees with the naive
   one, alone and through a table (where the trie has walked the head). */
static void
test_glob_matches_naive (void **state)
{
    (void) state;
    static const char alphabet[] = "ab.*";
    uint32_t seed = 12345;
    char pattern[12], topic[16];
    for (int round = 0; round < 20000; round++) {
        seed = seed * 1103515245u + 12345u;
        size_t plen = 1 + (seed >> 16) % 10;
        for (size_t i = 0; i < plen; i++) {
            seed = seed * 1103515245u + 12345u;
            pattern[i] = alphabet[(seed >> 16) % 4];
        }
        pattern[plen] = '\0';
        if (!strchr (pattern, '*'))
            pattern[(seed >> 20) % plen] = '*';
        if (pattern[0] == '=')
            continue;
        seed = seed * 1103515245u + 12345u;
        size_t tlen = (seed >> 16) % 14;
        for (size_t i = 0; i < tlen; i++) {
            seed = seed * 1103515245u + 12345u;
            topic[i] = alphabet[(seed >> 16) % 3];
        }
        topic[tlen] = '\0';
        bool expected = naive_glob (pattern, topic, tlen);
        if (fh_pattern_match (pattern, topic, tlen) != expected)
            fail_msg ("pattern '%s', topic '%s': expected %d", pattern, topic, expected);
        fh_trigger_t *table = fh_trigger_new (1);
        assert_int_equal (fh_trigger_add (table, 0, pattern), 0);
        assert_int_equal (fh_trigger_seal (table), 0);
        uint32_t found[1];
        if ((fh_trigger_match (table, topic, tlen, found) == 1) != expected)
            fail_msg ("table: pattern '%s', topic '%s': expected %d", pattern, topic,
                      expected);
        fh_trigger_destroy (&table);
    }
}

/* Consumers added out of index order (the hub adds them in order, and
   the id lists take the short path then): a repeated pattern still
   matches once, and 5,000 consumers on one prefix all match. */
static void
test_duplicates_out_of_order (void **state)
{
    (void) state;
    enum { MANY = 5000 };
    fh_trigger_t *table = fh_trigger_new (MANY);
    assert_non_null (table);
    assert_int_equal (fh_trigger_add (table, 7, "org."), 0);
    assert_int_equal (fh_trigger_add (table, 3, "org."), 0);
    assert_int_equal (fh_trigger_add (table, 7, "org."), 0);
    assert_int_equal (fh_trigger_add (table, 3, "org."), 0);
    for (size_t c = 0; c < MANY; c++)
        assert_int_equal (fh_trigger_add (table, c, ""), 0);
    assert_int_equal (fh_trigger_add (table, MANY - 1, ""), 0);
    assert_int_equal (fh_trigger_seal (table), 0);
    static uint32_t found[MANY];
    assert_int_equal (fh_trigger_match (table, "org.x", 5, found), MANY);
    assert_int_equal (fh_trigger_match (table, "net.x", 5, found), MANY);
    fh_trigger_destroy (&table);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_pattern_cases),
        cmocka_unit_test (test_topic_with_nul_byte),
        cmocka_unit_test (test_table_matches_reference),
        cmocka_unit_test (test_many_consumers_random),
        cmocka_unit_test (test_subscriptions_minimal),
        cmocka_unit_test (test_duplicate_patterns_match_once),
        cmocka_unit_test (test_duplicates_out_of_order),
        cmocka_unit_test (test_glob_matches_naive),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
