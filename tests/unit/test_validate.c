/*  test_validate - fh_bus_check: when a bus message is well-formed, and
    which reason it is refused for.

    A table of named cases: each reason at its boundary (a limit met is
    fine, one past it is not), the order of the checks when several fail,
    and the strict UTF-8 rules of the topic (overlong forms, surrogates,
    past U+10FFFF, truncated sequences, NUL allowed). Then that the topic is
    not read unless the counts pass, which is what lets a caller hand NULL.
*/
#include "validate.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#define OK FH_MALFORMED_REASONS
#define NO_BODY FH_MALFORMED_NO_BODY
#define TOO_MANY FH_MALFORMED_TOO_MANY_FRAMES
#define TOO_LARGE FH_MALFORMED_TOO_LARGE
#define NOT_UTF8 FH_MALFORMED_TOPIC_NOT_UTF8

/* A topic as a string literal, NUL bytes inside it included. */
#define T(s) (s), sizeof (s) - 1

typedef struct {
    const char *name;
    size_t frames, bytes;
    const char *topic;
    size_t topic_size;
    size_t max_frames, max_bytes;
    fh_malformed_reason_t expected;
} s_case_t;

static const s_case_t s_cases[] = {
    /* The counts, each at its limit and one past it. */
    {"two frames, the least", 2, 10, T ("a.b"), 32, 100, OK},
    {"one frame: no body", 1, 10, T ("a.b"), 32, 100, NO_BODY},
    {"no frame at all", 0, 0, T (""), 32, 100, NO_BODY},
    {"frames at the limit", 32, 10, T ("a"), 32, 100, OK},
    {"one frame past the limit", 33, 10, T ("a"), 32, 100, TOO_MANY},
    {"limit of two, two frames", 2, 0, T (""), 2, 100, OK},
    {"limit of two, three frames", 3, 0, T (""), 2, 100, TOO_MANY},
    {"bytes at the limit", 2, 100, T ("a"), 32, 100, OK},
    {"one byte past the limit", 2, 101, T ("a"), 32, 100, TOO_LARGE},
    {"no bytes at all", 2, 0, T (""), 32, 100, OK},
    {"SIZE_MAX bytes, SIZE_MAX allowed", 2, SIZE_MAX, T ("a"), 32, SIZE_MAX, OK},
    {"SIZE_MAX bytes", 2, SIZE_MAX, T ("a"), 32, SIZE_MAX - 1, TOO_LARGE},
    {"SIZE_MAX frames", SIZE_MAX, 0, T ("a"), SIZE_MAX - 1, 100, TOO_MANY},
    {"zero byte limit, empty frames", 2, 0, T (""), 32, 0, OK},
    {"zero byte limit, one byte", 2, 1, T ("a"), 32, 0, TOO_LARGE},

    /* The first check that fails is the reason. */
    {"no body before too many (limit 0)", 1, 10, T ("a"), 0, 100, NO_BODY},
    {"no body before too large", 1, 1000, T ("a"), 32, 100, NO_BODY},
    {"no body before not UTF-8", 1, 1, T ("\xff"), 32, 100, NO_BODY},
    {"too many before too large", 40, 1000, T ("a"), 32, 100, TOO_MANY},
    {"too many before not UTF-8", 40, 10, T ("\xff"), 32, 100, TOO_MANY},
    {"too large before not UTF-8", 2, 1000, T ("\xff"), 32, 100, TOO_LARGE},

    /* The topic: strict UTF-8, RFC 3629. */
    {"empty topic", 2, 0, T (""), 32, 100, OK},
    {"ASCII", 2, 5, T ("sensor.temp"), 32, 100, OK},
    {"NUL inside", 2, 3, T ("a\0b"), 32, 100, OK},
    {"two-byte form (e-acute)", 2, 5, T ("caf\xc3\xa9"), 32, 100, OK},
    {"three-byte form (euro)", 2, 5, T ("\xe2\x82\xac"), 32, 100, OK},
    {"four-byte form (U+1F600)", 2, 5, T ("\xf0\x9f\x98\x80"), 32, 100, OK},
    {"U+10FFFF, the last", 2, 5, T ("\xf4\x8f\xbf\xbf"), 32, 100, OK},
    {"U+D7FF, before the surrogates", 2, 5, T ("\xed\x9f\xbf"), 32, 100, OK},
    {"U+E000, after the surrogates", 2, 5, T ("\xee\x80\x80"), 32, 100, OK},
    {"U+0800, the least three-byte", 2, 5, T ("\xe0\xa0\x80"), 32, 100, OK},
    {"U+10000, the least four-byte", 2, 5, T ("\xf0\x90\x80\x80"), 32, 100, OK},
    {"lone continuation byte", 2, 5, T ("a\x80"), 32, 100, NOT_UTF8},
    {"overlong two-byte (C0 80)", 2, 5, T ("\xc0\x80"), 32, 100, NOT_UTF8},
    {"overlong two-byte (C1 BF)", 2, 5, T ("\xc1\xbf"), 32, 100, NOT_UTF8},
    {"overlong three-byte (E0 80 80)", 2, 5, T ("\xe0\x80\x80"), 32, 100, NOT_UTF8},
    {"overlong three-byte (E0 9F BF)", 2, 5, T ("\xe0\x9f\xbf"), 32, 100, NOT_UTF8},
    {"overlong four-byte (F0 8F BF BF)", 2, 5, T ("\xf0\x8f\xbf\xbf"), 32, 100, NOT_UTF8},
    {"surrogate U+D800", 2, 5, T ("\xed\xa0\x80"), 32, 100, NOT_UTF8},
    {"surrogate U+DFFF", 2, 5, T ("\xed\xbf\xbf"), 32, 100, NOT_UTF8},
    {"U+110000, past the last", 2, 5, T ("\xf4\x90\x80\x80"), 32, 100, NOT_UTF8},
    {"F5, never a lead byte", 2, 5, T ("\xf5\x80\x80\x80"), 32, 100, NOT_UTF8},
    {"FF", 2, 5, T ("\xff"), 32, 100, NOT_UTF8},
    {"truncated two-byte", 2, 5, T ("ab\xc3"), 32, 100, NOT_UTF8},
    {"truncated three-byte", 2, 5, T ("\xe2\x82"), 32, 100, NOT_UTF8},
    {"truncated four-byte", 2, 5, T ("\xf0\x9f\x98"), 32, 100, NOT_UTF8},
    {"bad second continuation", 2, 5, T ("\xe2\x82\x41"), 32, 100, NOT_UTF8},
    {"bad third continuation", 2, 5, T ("\xf0\x9f\x98\x41"), 32, 100, NOT_UTF8},
    {"valid then invalid", 2, 5, T ("caf\xc3\xa9\xff"), 32, 100, NOT_UTF8},
};

static void
test_table (void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof s_cases / sizeof s_cases[0]; i++) {
        const s_case_t *c = &s_cases[i];
        fh_malformed_reason_t got = fh_bus_check (c->frames, c->bytes, c->topic, c->topic_size,
                                                  c->max_frames, c->max_bytes);
        if (got != c->expected)
            fail_msg ("%s: expected %s, got %s", c->name,
                      c->expected == OK ? "well-formed" : fh_malformed_reason_name (c->expected),
                      got == OK ? "well-formed" : fh_malformed_reason_name (got));
    }
}

/* The topic is read only once the counts pass: a caller with fewer than
   two frames may hand NULL, even with a size. */
static void
test_topic_read_last (void **state)
{
    (void) state;
    assert_int_equal (fh_bus_check (0, 0, NULL, 0, 32, 100), NO_BODY);
    assert_int_equal (fh_bus_check (0, 0, NULL, 64, 32, 100), NO_BODY);
    assert_int_equal (fh_bus_check (1, 64, NULL, 64, 32, 100), NO_BODY);
    assert_int_equal (fh_bus_check (33, 64, NULL, 64, 32, 100), TOO_MANY);
    assert_int_equal (fh_bus_check (2, 101, NULL, 64, 32, 100), TOO_LARGE);
    /* An empty topic is never read either, so NULL is fine there too. */
    assert_int_equal (fh_bus_check (2, 0, NULL, 0, 32, 100), OK);
}

/* Only topic[0..topic_size-1] is looked at: what follows does not count. */
static void
test_topic_bounded (void **state)
{
    (void) state;
    const char buf[] = "ok\xff";
    assert_int_equal (fh_bus_check (2, 3, buf, 2, 32, 100), OK);
    assert_int_equal (fh_bus_check (2, 3, buf, 3, 32, 100), NOT_UTF8);
    const char cut[] = "\xe2\x82\xac";
    assert_int_equal (fh_bus_check (2, 3, cut, 2, 32, 100), NOT_UTF8);
    assert_int_equal (fh_bus_check (2, 3, cut, 3, 32, 100), OK);
}

/* ASCII is checked eight bytes at a time: a bad byte, a good sequence
   and a cut one at every offset of a long topic, across word edges. */
static void
test_topic_every_offset (void **state)
{
    (void) state;
    char topic[40];
    for (size_t at = 0; at + 4 <= sizeof topic; at++) {
        memset (topic, 'a', sizeof topic);
        topic[at] = (char) 0xff;
        if (fh_bus_check (2, sizeof topic, topic, sizeof topic, 32, 100) != NOT_UTF8)
            fail_msg ("0xff at %zu passed", at);
        memcpy (topic + at, "\xf0\x9f\x98\x80", 4); /* U+1F600 */
        if (fh_bus_check (2, sizeof topic, topic, sizeof topic, 32, 100) != OK)
            fail_msg ("U+1F600 at %zu refused", at);
        if (fh_bus_check (2, sizeof topic, topic, at + 3, 32, 100) != NOT_UTF8)
            fail_msg ("U+1F600 cut at %zu passed", at + 3);
        topic[at + 1] = 'a'; /* a lead byte without its continuation */
        if (fh_bus_check (2, sizeof topic, topic, sizeof topic, 32, 100) != NOT_UTF8)
            fail_msg ("a broken sequence at %zu passed", at);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_table),
        cmocka_unit_test (test_topic_read_last),
        cmocka_unit_test (test_topic_bounded),
        cmocka_unit_test (test_topic_every_offset),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
