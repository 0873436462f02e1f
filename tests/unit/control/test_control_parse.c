/*  test_control_parse - fh_control_parse: every rule of a control request
    and every answer the hub gives to a refused one, word for word.

    A table of named requests (frames as literals, so NUL and binary bytes
    can be in them): what is accepted and what it parses to, or the exact
    ERROR line. Then what does not fit in a table: command words at and
    past FH_CONTROL_MAX_COMMAND, an error buffer too small for the line,
    and fh_control_show at every room size.
*/
#include "control_parse.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* A frame as a string literal, NUL bytes inside it included. */
#define F(s)                                                                                       \
    {                                                                                              \
        (s), sizeof (s) - 1                                                                        \
    }
#define MAX_FRAMES 8

#define COMMANDS                                                                                   \
    " (commands: PING, STATS, METRICS, EMIT, INJECT, RELOAD, HEALTH, READY, STATUS, PAUSE, "       \
    "RESUME, RESTART)"
#define E_EMPTY "ERROR empty command" COMMANDS
#define E_NO_ARGS                                                                                  \
    "ERROR PING, STATS, METRICS, RELOAD, HEALTH, READY and STATUS take no arguments (a request "   \
    "is one frame)"
#define E_EMIT "ERROR usage: EMIT, wait|nowait, TIMEOUT_MS, topic, body[, frames...]"
#define E_INJECT "ERROR usage: INJECT, consumer, topic, body[, frames...]"
#define E_CONSUMER "ERROR usage: PAUSE|RESUME|RESTART, consumer"
#define E_UNKNOWN(word) "ERROR unknown command '" word "'" COMMANDS

typedef struct {
    const char *name;
    size_t count;
    fanhub_bytes_t frames[MAX_FRAMES];
    const char *error; /* NULL: accepted, as the fields below say */
    fh_control_kind_t kind;
    bool wait;
    int64_t timeout_ms;
    size_t consumer, message;
} s_case_t;

/* A request accepted (ACCEPT) or refused with an exact line (REFUSE);
   the frames come last. */
#define NFRAMES(...) (sizeof ((fanhub_bytes_t[]){__VA_ARGS__}) / sizeof (fanhub_bytes_t))
#define ACCEPT(n, k, w, t, c, m, ...)                                                              \
    {                                                                                              \
        .name = (n), .count = NFRAMES (__VA_ARGS__), .frames = {__VA_ARGS__}, .kind = (k),         \
        .wait = (w), .timeout_ms = (t), .consumer = (c), .message = (m)                            \
    }
#define REFUSE(n, e, ...)                                                                          \
    {                                                                                              \
        .name = (n), .count = NFRAMES (__VA_ARGS__), .frames = {__VA_ARGS__}, .error = (e)         \
    }

static const s_case_t s_cases[] = {
    /* No arguments. */
    ACCEPT ("PING", FH_CONTROL_PING, false, 0, 0, 0, F ("PING")),
    ACCEPT ("STATS", FH_CONTROL_STATS, false, 0, 0, 0, F ("STATS")),
    ACCEPT ("METRICS", FH_CONTROL_METRICS, false, 0, 0, 0, F ("METRICS")),
    ACCEPT ("RELOAD", FH_CONTROL_RELOAD, false, 0, 0, 0, F ("RELOAD")),
    REFUSE ("PING with an argument", E_NO_ARGS, F ("PING"), F ("x")),
    REFUSE ("PING with an empty argument", E_NO_ARGS, F ("PING"), F ("")),
    REFUSE ("STATS with arguments", E_NO_ARGS, F ("STATS"), F ("a"), F ("b")),
    REFUSE ("METRICS with an argument", E_NO_ARGS, F ("METRICS"), F ("text")),
    REFUSE ("RELOAD with an argument", E_NO_ARGS, F ("RELOAD"), F ("now")),
    REFUSE ("RELOAD with an empty argument", E_NO_ARGS, F ("RELOAD"), F ("")),

    /* Empty. */
    {.name = "no frame", .count = 0, .error = E_EMPTY},
    REFUSE ("empty word", E_EMPTY, F ("")),
    REFUSE ("empty word with arguments", E_EMPTY, F (""), F ("PING"), F ("x")),

    /* The word is matched byte for byte. */
    REFUSE ("lower case", E_UNKNOWN ("ping"), F ("ping")),
    REFUSE ("trailing blank", E_UNKNOWN ("PING "), F ("PING ")),
    REFUSE ("trailing NUL", E_UNKNOWN ("PING?"), F ("PING\0")),
    REFUSE ("prefix of a word", E_UNKNOWN ("PIN"), F ("PIN")),
    REFUSE ("word and more", E_UNKNOWN ("PINGS"), F ("PINGS")),
    REFUSE ("unknown with arguments", E_UNKNOWN ("HELLO"), F ("HELLO"), F ("x")),
    REFUSE ("binary shown as '?'", E_UNKNOWN ("??A?~ ?"),
            F ("\x01\xff"
               "A\x7f~ \n")),
    REFUSE ("quote shown as it is", E_UNKNOWN ("it's"), F ("it's")),
    REFUSE ("UTF-8 shown as '?'", E_UNKNOWN ("caf??"), F ("caf\xc3\xa9")),

    /* EMIT, wait|nowait, TIMEOUT_MS, topic, body[, frames...] */
    ACCEPT ("EMIT wait", FH_CONTROL_EMIT, true, 1000, 0, 3, F ("EMIT"), F ("wait"), F ("1000"),
            F ("t"), F ("b")),
    ACCEPT ("EMIT nowait", FH_CONTROL_EMIT, false, 0, 0, 3, F ("EMIT"), F ("nowait"), F ("0"),
            F ("t"), F ("b")),
    ACCEPT ("EMIT the longest timeout", FH_CONTROL_EMIT, true, 86400000, 0, 3, F ("EMIT"),
            F ("wait"), F ("86400000"), F ("t"), F ("b")),
    ACCEPT ("EMIT 15 digits", FH_CONTROL_EMIT, true, 5, 0, 3, F ("EMIT"), F ("wait"),
            F ("000000000000005"), F ("t"), F ("b")),
    ACCEPT ("EMIT more frames", FH_CONTROL_EMIT, false, 5, 0, 3, F ("EMIT"), F ("nowait"), F ("5"),
            F ("t"), F ("b"), F ("c"), F ("d")),
    ACCEPT ("EMIT empty topic and body", FH_CONTROL_EMIT, true, 5, 0, 3, F ("EMIT"), F ("wait"),
            F ("5"), F (""), F ("")),
    REFUSE ("EMIT alone", E_EMIT, F ("EMIT")),
    REFUSE ("EMIT without a body", E_EMIT, F ("EMIT"), F ("wait"), F ("5"), F ("t")),
    REFUSE ("EMIT timeout past a day", E_EMIT, F ("EMIT"), F ("wait"), F ("86400001"), F ("t"),
            F ("b")),
    REFUSE ("EMIT 16 digits", E_EMIT, F ("EMIT"), F ("wait"), F ("0000000000000005"), F ("t"),
            F ("b")),
    REFUSE ("EMIT 15 nines", E_EMIT, F ("EMIT"), F ("wait"), F ("999999999999999"), F ("t"),
            F ("b")),
    REFUSE ("EMIT empty timeout", E_EMIT, F ("EMIT"), F ("wait"), F (""), F ("t"), F ("b")),
    REFUSE ("EMIT negative timeout", E_EMIT, F ("EMIT"), F ("wait"), F ("-1"), F ("t"), F ("b")),
    REFUSE ("EMIT minus zero", E_EMIT, F ("EMIT"), F ("wait"), F ("-0"), F ("t"), F ("b")),
    REFUSE ("EMIT plus sign", E_EMIT, F ("EMIT"), F ("wait"), F ("+5"), F ("t"), F ("b")),
    REFUSE ("EMIT leading blank", E_EMIT, F ("EMIT"), F ("wait"), F (" 5"), F ("t"), F ("b")),
    REFUSE ("EMIT trailing blank", E_EMIT, F ("EMIT"), F ("wait"), F ("5 "), F ("t"), F ("b")),
    REFUSE ("EMIT trailing NUL", E_EMIT, F ("EMIT"), F ("wait"), F ("5\0"), F ("t"), F ("b")),
    REFUSE ("EMIT hex", E_EMIT, F ("EMIT"), F ("wait"), F ("0x10"), F ("t"), F ("b")),
    REFUSE ("EMIT exponent", E_EMIT, F ("EMIT"), F ("wait"), F ("1e3"), F ("t"), F ("b")),
    REFUSE ("EMIT WAIT in capitals", E_EMIT, F ("EMIT"), F ("WAIT"), F ("5"), F ("t"), F ("b")),
    REFUSE ("EMIT wait and a blank", E_EMIT, F ("EMIT"), F ("wait "), F ("5"), F ("t"), F ("b")),
    REFUSE ("EMIT no wait word", E_EMIT, F ("EMIT"), F (""), F ("5"), F ("t"), F ("b")),
    REFUSE ("EMIT words swapped", E_EMIT, F ("EMIT"), F ("5"), F ("wait"), F ("t"), F ("b")),

    /* INJECT, consumer, topic, body[, frames...] */
    ACCEPT ("INJECT", FH_CONTROL_INJECT, false, 0, 1, 2, F ("INJECT"), F ("log"), F ("t"), F ("b")),
    ACCEPT ("INJECT more frames", FH_CONTROL_INJECT, false, 0, 1, 2, F ("INJECT"), F ("log"),
            F ("t"), F ("b"), F ("c"), F ("d")),
    /* Whether the consumer exists is the hub's question, not the parser's. */
    ACCEPT ("INJECT empty consumer name", FH_CONTROL_INJECT, false, 0, 1, 2, F ("INJECT"), F (""),
            F ("t"), F ("b")),
    REFUSE ("INJECT alone", E_INJECT, F ("INJECT")),
    REFUSE ("INJECT without a body", E_INJECT, F ("INJECT"), F ("log"), F ("t")),

    /* PAUSE|RESUME|RESTART, consumer */
    ACCEPT ("PAUSE", FH_CONTROL_PAUSE, false, 0, 1, 0, F ("PAUSE"), F ("log")),
    ACCEPT ("RESUME", FH_CONTROL_RESUME, false, 0, 1, 0, F ("RESUME"), F ("log")),
    ACCEPT ("RESTART", FH_CONTROL_RESTART, false, 0, 1, 0, F ("RESTART"), F ("log")),
    REFUSE ("PAUSE alone", E_CONSUMER, F ("PAUSE")),
    REFUSE ("RESTART two consumers", E_CONSUMER, F ("RESTART"), F ("a"), F ("b")),
    REFUSE ("pause in lower case", E_UNKNOWN ("pause"), F ("pause"), F ("log")),
};

/* An error answer is one line of printable ASCII starting "ERROR ". */
static void
s_check_line (const char *name, const char *err)
{
    if (strncmp (err, "ERROR ", 6) != 0)
        fail_msg ("%s: '%s' does not start with 'ERROR '", name, err);
    for (const char *c = err; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            fail_msg ("%s: byte 0x%02x in the error line", name, (unsigned) (unsigned char) *c);
}

static void
test_table (void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof s_cases / sizeof s_cases[0]; i++) {
        const s_case_t *c = &s_cases[i];
        fh_control_request_t out;
        memset (&out, 0xa5, sizeof out);
        char err[512];
        memset (err, 'Z', sizeof err);
        int rc = fh_control_parse (c->count ? c->frames : NULL, c->count, &out, err, sizeof err);
        if (c->error) {
            if (rc != -1)
                fail_msg ("%s: accepted, expected '%s'", c->name, c->error);
            if (strcmp (err, c->error) != 0)
                fail_msg ("%s: expected '%s', got '%s'", c->name, c->error, err);
            s_check_line (c->name, err);
            fh_control_request_t zero;
            memset (&zero, 0, sizeof zero);
            if (memcmp (&out, &zero, sizeof out) != 0)
                fail_msg ("%s: out is not zeroed on an error", c->name);
            continue;
        }
        if (rc != 0)
            fail_msg ("%s: refused with '%s'", c->name, err);
        if (err[0] != '\0')
            fail_msg ("%s: accepted, but err is '%s'", c->name, err);
        if (out.kind != c->kind || out.wait != c->wait || out.timeout_ms != c->timeout_ms
            || out.consumer != c->consumer || out.message != c->message)
            fail_msg ("%s: got kind %d wait %d timeout %lld consumer %zu message %zu", c->name,
                      (int) out.kind, (int) out.wait, (long long) out.timeout_ms, out.consumer,
                      out.message);
        if ((out.kind == FH_CONTROL_EMIT || out.kind == FH_CONTROL_INJECT)
            && (out.message + 1 >= c->count || out.consumer >= c->count))
            fail_msg ("%s: an index past the frames", c->name);
    }
}

/* A request of `count` frames whose word is `size` bytes of `fill`. */
static int
s_parse_word (char fill, size_t size, size_t count, char *err, size_t errlen)
{
    char *word = malloc (size ? size : 1);
    assert_non_null (word);
    memset (word, fill, size);
    fanhub_bytes_t frames[2] = {{word, size}, {"x", 1}};
    fh_control_request_t out;
    int rc = fh_control_parse (frames, count, &out, err, errlen);
    free (word);
    return rc;
}

static void
test_long_words (void **state)
{
    (void) state;
    char err[512], expected[512];
    char a44[45];
    memset (a44, 'A', 44);
    a44[44] = '\0';

    /* Up to 44 characters of the word are shown, then "..." when cut. */
    assert_int_equal (s_parse_word ('A', 43, 1, err, sizeof err), -1);
    snprintf (expected, sizeof expected, E_UNKNOWN ("%.43s"), a44);
    assert_string_equal (err, expected);
    assert_int_equal (s_parse_word ('A', 44, 1, err, sizeof err), -1);
    snprintf (expected, sizeof expected, E_UNKNOWN ("%s"), a44);
    assert_string_equal (err, expected);
    assert_int_equal (s_parse_word ('A', 45, 1, err, sizeof err), -1);
    snprintf (expected, sizeof expected, E_UNKNOWN ("%s..."), a44);
    assert_string_equal (err, expected);

    /* FH_CONTROL_MAX_COMMAND bytes are still a word (just not a known one). */
    assert_int_equal (s_parse_word ('A', FH_CONTROL_MAX_COMMAND, 1, err, sizeof err), -1);
    assert_string_equal (err, expected);
    /* One more is refused for its size, before anything else, arguments
       or not. */
    snprintf (expected, sizeof expected, "ERROR command of %d bytes, at most %d",
              FH_CONTROL_MAX_COMMAND + 1, FH_CONTROL_MAX_COMMAND);
    assert_int_equal (s_parse_word ('A', FH_CONTROL_MAX_COMMAND + 1, 1, err, sizeof err), -1);
    assert_string_equal (err, expected);
    assert_int_equal (s_parse_word ('A', FH_CONTROL_MAX_COMMAND + 1, 2, err, sizeof err), -1);
    assert_string_equal (err, expected);
    assert_int_equal (s_parse_word ('\0', 1 << 20, 1, err, sizeof err), -1);
    assert_string_equal (err, "ERROR command of 1048576 bytes, at most 4096");
}

/* A short buffer gets the start of the line, NUL-terminated; none at all
   is fine. */
static void
test_short_err (void **state)
{
    (void) state;
    fanhub_bytes_t ping_x[] = {F ("PING"), F ("x")};
    fanhub_bytes_t emit[] = {F ("EMIT")};
    fanhub_bytes_t ping[] = {F ("PING")};
    fh_control_request_t out;
    char err[16];
    memset (err, 'Z', sizeof err);
    assert_int_equal (fh_control_parse (ping_x, 2, &out, err, 10), -1);
    assert_string_equal (err, "ERROR PIN");
    assert_int_equal (err[10], 'Z');
    assert_int_equal (fh_control_parse (emit, 1, &out, err, 1), -1);
    assert_string_equal (err, "");
    assert_int_equal (fh_control_parse (emit, 1, &out, NULL, 0), -1);
    assert_int_equal (fh_control_parse (NULL, 0, &out, NULL, 0), -1);
    /* Accepted: err is emptied. */
    memset (err, 'Z', sizeof err);
    assert_int_equal (fh_control_parse (ping, 1, &out, err, sizeof err), 0);
    assert_string_equal (err, "");
    assert_int_equal (fh_control_parse (ping, 1, &out, NULL, 0), 0);
    assert_int_equal (out.kind, FH_CONTROL_PING);
}

/* The frames are read, not kept: the request stands on its own. */
static void
test_frames_not_kept (void **state)
{
    (void) state;
    char word[] = "EMIT", mode[] = "wait", timeout[] = "250";
    fanhub_bytes_t frames[] = {{word, 4}, {mode, 4}, {timeout, 3}, F ("t"), F ("b")};
    fh_control_request_t out;
    assert_int_equal (fh_control_parse (frames, 5, &out, NULL, 0), 0);
    memset (word, 0, sizeof word);
    memset (mode, 0, sizeof mode);
    memset (timeout, 0, sizeof timeout);
    assert_int_equal (out.kind, FH_CONTROL_EMIT);
    assert_true (out.wait);
    assert_int_equal (out.timeout_ms, 250);
}

static void
test_show (void **state)
{
    (void) state;
    static const struct {
        const char *data;
        size_t size, room;
        const char *shown;
    } cases[] = {
        {"abc", 3, 48, "abc"},
        {"", 0, 48, ""},
        {"abc", 3, 7, "abc"},     /* 3 fit in room 7 */
        {"abcd", 4, 7, "abc..."}, /* a fourth does not */
        {"abcd", 4, 8, "abcd"},
        {"abc", 3, 4, "..."}, /* room for the dots only */
        {"abc", 3, 3, ""},    /* not even that */
        {"abc", 3, 1, ""},
        {"", 0, 1, ""},
        {"a\tb\x80\xff\x7f\x1f~", 8, 48, "a?b????~"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char shown[64];
        memset (shown, 'Z', sizeof shown);
        fh_control_show (cases[i].data, cases[i].size, shown, cases[i].room);
        if (strcmp (shown, cases[i].shown) != 0)
            fail_msg ("case %zu: expected '%s', got '%s'", i, cases[i].shown, shown);
        assert_true (strlen (shown) < cases[i].room);
    }
    fh_control_show (NULL, 0, (char[1]){'Z'}, 1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_table),     cmocka_unit_test (test_long_words),
        cmocka_unit_test (test_short_err), cmocka_unit_test (test_frames_not_kept),
        cmocka_unit_test (test_show),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
