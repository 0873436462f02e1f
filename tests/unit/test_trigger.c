/*  test_trigger - topic patterns and the trigger table.

    The table is checked against fh_pattern_match, the one-pattern
    reference: for every topic of a set, the consumers the table finds
    must be exactly those with a pattern that matches. The memo (lookups
    remembered by topic) is checked the same way, differentially: random
    patterns, topics that repeat (answers from the memo) and a stream of
    distinct ones (the memo emptied and refilled), every answer against
    the reference.
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
check_against_reference (fh_trigger_t *table, const char *const *const *patterns, size_t consumers,
                         const char *topic)
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

/* Tables whose every pattern is "" answer every topic alike (looked up
   once at seal); one pattern more, and they walk as any table. */
static const char *const e_all[] = {"", NULL};
static const char *const e_twice[] = {"", "", NULL};
static const char *const e_org[] = {"", "org.", NULL};
static const char *const e_exact[] = {"=", NULL};
static const char *const e_glob[] = {"*x", NULL};
static const char *const *const everyone[] = {e_all, p4, e_twice, e_all};
static const char *const *const nobody[] = {p4};
static const char *const *const everyone_and_prefix[] = {e_all, p4, e_org};
static const char *const *const everyone_and_exact[] = {e_all, e_exact};
static const char *const *const everyone_and_glob[] = {e_glob, e_all};

static void
test_everyone_tables (void **state)
{
    (void) state;
    static const struct {
        const char *const *const *patterns;
        size_t consumers;
    } tables[] = {
        {everyone, 4},           {everyone, 1},          {nobody, 1}, {everyone_and_prefix, 3},
        {everyone_and_exact, 2}, {everyone_and_glob, 2},
    };
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        fh_trigger_t *table = build_table (tables[t].patterns, tables[t].consumers);
        for (size_t i = 0; i < sizeof table_topics / sizeof table_topics[0]; i++)
            check_against_reference (table, tables[t].patterns, tables[t].consumers,
                                     table_topics[i]);
        check_against_reference (table, tables[t].patterns, tables[t].consumers, "x");
        fh_trigger_destroy (&table);
    }
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
            fail_msg ("table: pattern '%s', topic '%s': expected %d", pattern, topic, expected);
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

/* The reference answer for one topic: consumers with a matching pattern. */
static size_t
reference_match (const char *const *const *patterns, size_t consumers, const char *topic,
                 size_t len, uint32_t *out)
{
    size_t count = 0;
    for (size_t c = 0; c < consumers; c++) {
        bool hit = false;
        for (const char *const *p = patterns[c]; *p && !hit; p++)
            hit = fh_pattern_match (*p, topic, len);
        if (hit)
            out[count++] = (uint32_t) c;
    }
    return count;
}

static uint32_t
next_random (uint32_t *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

static void
random_text (uint32_t *seed, const char *alphabet, size_t max_len, char *out)
{
    size_t len = next_random (seed) % (max_len + 1);
    size_t letters = strlen (alphabet);
    for (size_t i = 0; i < len; i++)
        out[i] = alphabet[next_random (seed) % letters];
    out[len] = '\0';
}

static void
check_lookup (fh_trigger_t *table, const char *const *const *patterns, size_t consumers,
              const char *topic)
{
    enum { MAX = 300 };
    uint32_t got[MAX], expected[MAX];
    assert_true (consumers <= MAX);
    size_t len = strlen (topic);
    size_t count = fh_trigger_match (table, topic, len, got);
    size_t want = reference_match (patterns, consumers, topic, len, expected);
    if (count != want || memcmp (got, expected, count * sizeof got[0]) != 0)
        fail_msg ("topic '%s': %zu consumers matched, the reference says %zu", topic, count, want);
}

/* Differential: the table with its memo against the one-pattern
   reference, over random patterns (globs with and without a literal
   head, prefixes, exact topics) on dotted words. */
static void
test_memo_matches_reference (void **state)
{
    (void) state;
    enum { CONSUMERS = 150, POOL = 400, LOOKUPS = 10000, DISTINCT = 5000 };
    static char storage[CONSUMERS][3][16];
    static const char *lists[CONSUMERS][4];
    const char *const *patterns[CONSUMERS];
    uint32_t seed = 2026;
    for (size_t c = 0; c < CONSUMERS; c++) {
        size_t n = 1 + next_random (&seed) % 3;
        for (size_t k = 0; k < n; k++) {
            char *p = storage[c][k];
            unsigned kind = next_random (&seed) % 4;
            if (kind == 0) { /* exact */
                p[0] = '=';
                random_text (&seed, "ab.", 6, p + 1);
            }
            else if (kind == 1) /* prefix */
                random_text (&seed, "ab.", 5, p);
            else { /* glob, often starting with '*' */
                random_text (&seed, "ab.*", 8, p);
                if (!strchr (p, '*') || kind == 3) {
                    memmove (p + 1, p, strlen (p) + 1);
                    p[0] = '*';
                }
            }
            lists[c][k] = p;
        }
        lists[c][n] = NULL;
        patterns[c] = lists[c];
    }
    fh_trigger_t *table = build_table (patterns, CONSUMERS);
    static char pool[POOL][16];
    for (size_t i = 0; i < POOL; i++)
        random_text (&seed, "ab.", 12, pool[i]);
    /* Repeating topics: most answers come from the memo. */
    for (int i = 0; i < LOOKUPS; i++)
        check_lookup (table, patterns, CONSUMERS, pool[next_random (&seed) % POOL]);
    assert_true (fh_trigger_memo_size (table) > 0);
    assert_true (fh_trigger_memo_size (table) <= POOL);
    /* Distinct topics, more than the memo holds: it empties and refills,
       and the repeated ones mixed in stay right. */
    char topic[40];
    for (int i = 0; i < DISTINCT; i++) {
        snprintf (topic, sizeof topic, "%s.%d", pool[i % POOL], i);
        check_lookup (table, patterns, CONSUMERS, topic);
        check_lookup (table, patterns, CONSUMERS, pool[next_random (&seed) % POOL]);
    }
    assert_true (fh_trigger_memo_size (table) <= 2048);
    fh_trigger_destroy (&table);
}

/* A table without globs keeps no memo (its lookups are one trie walk),
   nor does a table looked up only a few times, nor an answer too large
   to keep: all stay right. */
static void
test_memo_only_where_it_pays (void **state)
{
    (void) state;
    static const char *const a[] = {"org.", "=org.x", NULL};
    static const char *const b[] = {"io.", NULL};
    static const char *const *const plain[] = {a, b};
    fh_trigger_t *table = build_table (plain, 2);
    uint32_t found[2];
    for (int i = 0; i < 10; i++) {
        assert_int_equal (fh_trigger_match (table, "org.x", 5, found), 1);
        assert_int_equal (fh_trigger_match (table, "io.y", 4, found), 1);
        assert_int_equal (found[0], 1);
    }
    assert_int_equal (fh_trigger_memo_size (table), 0);
    fh_trigger_destroy (&table);

    static const char *const g[] = {"*.x", NULL};
    static const char *const *const globs[] = {g};
    table = build_table (globs, 1);
    for (int i = 0; i < 10; i++)
        assert_int_equal (fh_trigger_match (table, "a.x", 3, found), 1);
    assert_int_equal (fh_trigger_memo_size (table), 0);
    fh_trigger_destroy (&table);

    enum { MANY = 6000 }; /* 24 KB of ids: more than an entry may take */
    table = fh_trigger_new (MANY);
    assert_non_null (table);
    for (size_t c = 0; c < MANY; c++)
        assert_int_equal (fh_trigger_add (table, c, "*.x"), 0);
    assert_int_equal (fh_trigger_seal (table), 0);
    static uint32_t many[MANY];
    for (int i = 0; i < 100; i++) { /* past the lookups before a memo */
        assert_int_equal (fh_trigger_match (table, "a.x", 3, many), MANY);
        assert_int_equal (many[MANY - 1], MANY - 1);
        assert_int_equal (fh_trigger_match (table, "a.y", 3, many), 0);
    }
    assert_int_equal (fh_trigger_memo_size (table), 1); /* "a.y" only */
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
        cmocka_unit_test (test_everyone_tables),
        cmocka_unit_test (test_subscriptions_minimal),
        cmocka_unit_test (test_duplicate_patterns_match_once),
        cmocka_unit_test (test_duplicates_out_of_order),
        cmocka_unit_test (test_glob_matches_naive),
        cmocka_unit_test (test_memo_matches_reference),
        cmocka_unit_test (test_memo_only_where_it_pays),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
