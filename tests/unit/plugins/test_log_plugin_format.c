/*  test_log_plugin_format - what the shipped log consumer writes for a
    message: the exact line for each kind of topic and body, every ASCII
    byte, lines larger than the plugin's buffer.

    Output lines are checked against exact strings and, where the input is
    every byte or larger than the plugin's buffer, decoded back with the
    strict JSON reader of log_kit.h and compared with the input.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_dir.h"

#include <fanhub/consumer.h>
#include <fanhub/sdk.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fanhub/testing.h>

#include "log_kit.h"

/* Decodes padded base64 (the SDK's decoder, whose own test holds it to
   RFC 4648's vectors); -1 on anything else. */
static int
s_unbase64 (const char *in, size_t size, char **out, size_t *out_size)
{
    if (size % 4)
        return -1;
    char *data = malloc (size / 4 * 3 + 3);
    ptrdiff_t n = data ? fanhub_base64_decode (data, in, size, false) : -1;
    if (n < 0) {
        free (data);
        return -1;
    }
    *out = data;
    *out_size = (size_t) n;
    return 0;
}

/* What the plugin should write for bytes inside a JSON string, spelled out
   from the specification rather than from the plugin's table. */
static size_t
s_expected_escape (const unsigned char *in, size_t size, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char c = in[i];
        const char *short_form = NULL;
        switch (c) {
        case '"': short_form = "\\\""; break;
        case '\\': short_form = "\\\\"; break;
        case 0x08: short_form = "\\b"; break;
        case 0x09: short_form = "\\t"; break;
        case 0x0A: short_form = "\\n"; break;
        case 0x0C: short_form = "\\f"; break;
        case 0x0D: short_form = "\\r"; break;
        }
        if (short_form) {
            memcpy (out + n, short_form, 2);
            n += 2;
        }
        else if (c < 0x20)
            n += (size_t) sprintf (out + n, "\\u%04x", c);
        else
            out[n++] = (char) c;
    }
    out[n] = '\0';
    return n;
}

typedef struct {
    const char *name;
    const char *topic;
    size_t topic_size;
    const char *body;
    size_t body_size;
    uint64_t seq;
    int64_t ns;
    const char *frame3;   /* an extra frame, never written */
    const char *expected; /* the line without its newline */
} format_case_t;

#define AT "\"received_at\":\"2023-11-14T22:13:20.123456Z\""

static const format_case_t s_format_cases[] = {
    {"plain", BYTES ("org.example.build"), BYTES ("{\"id\":1}"), 1, NS, NULL,
     "{\"seq\":1," AT ",\"topic\":\"org.example.build\",\"body\":\"{\\\"id\\\":1}\"}"},
    {"empty body", BYTES ("t"), BYTES (""), 2, NS, NULL,
     "{\"seq\":2," AT ",\"topic\":\"t\",\"body\":\"\"}"},
    {"empty topic", BYTES (""), BYTES ("x"), 3, NS, NULL,
     "{\"seq\":3," AT ",\"topic\":\"\",\"body\":\"x\"}"},
    {"extra frames are not written", BYTES ("t"), BYTES ("b"), 4, NS, "frame 3",
     "{\"seq\":4," AT ",\"topic\":\"t\",\"body\":\"b\"}"},
    {"short escapes", BYTES ("a\"b\\c"), BYTES ("\b\f\n\r\t/"), 5, NS, NULL,
     "{\"seq\":5," AT ",\"topic\":\"a\\\"b\\\\c\",\"body\":\"\\b\\f\\n\\r\\t/\"}"},
    {"NUL and other controls", BYTES ("\x01"), BYTES ("a\0b\x1f\x0b"), 6, NS, NULL,
     "{\"seq\":6," AT ",\"topic\":\"\\u0001\",\"body\":\"a\\u0000b\\u001f\\u000b\"}"},
    {"DEL as is", BYTES ("\x7f"), BYTES ("\x7f"), 7, NS, NULL,
     "{\"seq\":7," AT ",\"topic\":\"\x7f\",\"body\":\"\x7f\"}"},
    {"multi-byte UTF-8 as is", BYTES ("caf\xc3\xa9.\xe2\x82\xac"),
     BYTES ("\xf0\x9f\x98\x80 \xe6\x97\xa5\xef\xbf\xbf\xf4\x8f\xbf\xbf"), 8, NS, NULL,
     "{\"seq\":8," AT ",\"topic\":\"caf\xc3\xa9.\xe2\x82\xac\",\"body\":"
     "\"\xf0\x9f\x98\x80 \xe6\x97\xa5\xef\xbf\xbf\xf4\x8f\xbf\xbf\"}"},
    {"base64 of 1 byte", BYTES ("t"), BYTES ("\xff"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"/w==\"}"},
    {"base64 of 2 bytes", BYTES ("t"), BYTES ("\xff\xfe"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"//4=\"}"},
    {"base64 of 3 bytes", BYTES ("t"), BYTES ("\xff\xfe\xfd"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"//79\"}"},
    {"base64 of 4 bytes", BYTES ("t"), BYTES ("\xff\xfe\xfd\xfc"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"//79/A==\"}"},
    {"base64 of text with one bad byte", BYTES ("t"), BYTES ("Man\x80"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"TWFugA==\"}"},
    {"surrogate is not UTF-8", BYTES ("t"), BYTES ("\xed\xa0\x80"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"7aCA\"}"},
    {"overlong is not UTF-8", BYTES ("t"), BYTES ("\xc0\xaf"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"wK8=\"}"},
    {"truncated sequence is not UTF-8", BYTES ("t"), BYTES ("ok\xe2\x82"), 9, NS, NULL,
     "{\"seq\":9," AT ",\"topic\":\"t\",\"body_base64\":\"b2vigg==\"}"},
    {"seq 0", BYTES ("t"), BYTES ("b"), 0, NS, NULL,
     "{\"seq\":0," AT ",\"topic\":\"t\",\"body\":\"b\"}"},
    {"seq max", BYTES ("t"), BYTES ("b"), UINT64_MAX, NS, NULL,
     "{\"seq\":18446744073709551615," AT ",\"topic\":\"t\",\"body\":\"b\"}"},
    {"epoch", BYTES ("t"), BYTES ("b"), 1, 0, NULL,
     "{\"seq\":1,\"received_at\":\"1970-01-01T00:00:00.000000Z\","
     "\"topic\":\"t\",\"body\":\"b\"}"},
    {"1 ns truncates", BYTES ("t"), BYTES ("b"), 1, 1, NULL,
     "{\"seq\":1,\"received_at\":\"1970-01-01T00:00:00.000000Z\","
     "\"topic\":\"t\",\"body\":\"b\"}"},
    {"999 ns truncates", BYTES ("t"), BYTES ("b"), 1, 999, NULL,
     "{\"seq\":1,\"received_at\":\"1970-01-01T00:00:00.000000Z\","
     "\"topic\":\"t\",\"body\":\"b\"}"},
    {"1000 ns is 1 us", BYTES ("t"), BYTES ("b"), 1, 1000, NULL,
     "{\"seq\":1,\"received_at\":\"1970-01-01T00:00:00.000001Z\","
     "\"topic\":\"t\",\"body\":\"b\"}"},
    {"last us of a second", BYTES ("t"), BYTES ("b"), 1, 1699999999999999999, NULL,
     "{\"seq\":1,\"received_at\":\"2023-11-14T22:13:19.999999Z\","
     "\"topic\":\"t\",\"body\":\"b\"}"},
    {"leap day", BYTES ("t"), BYTES ("b"), 1, 951782400000000000, NULL,
     "{\"seq\":1,\"received_at\":\"2000-02-29T00:00:00.000000Z\","
     "\"topic\":\"t\",\"body\":\"b\"}"},
    {"before 1970 rounds down", BYTES ("t"), BYTES ("b"), 1, -1, NULL,
     "{\"seq\":1,\"received_at\":\"1969-12-31T23:59:59.999999Z\","
     "\"topic\":\"t\",\"body\":\"b\"}"},
};

static void
test_format_table (void **state)
{
    (void) state;
    size_t cases = sizeof s_format_cases / sizeof s_format_cases[0];
    for (size_t i = 0; i < cases; i++) {
        const format_case_t *c = &s_format_cases[i];
        char path[512];
        s_temp (path, sizeof path);
        fanhub_ctx_t ctx;
        fanhub_fake_ctx_init (&ctx);
        void *plugin = s_start (&ctx, path, "0");
        fanhub_msg_t msg = s_msg (c->topic, c->topic_size, c->body, c->body_size, c->seq, c->ns);
        if (c->frame3) {
            msg.frames[2] = (fanhub_bytes_t){c->frame3, strlen (c->frame3)};
            msg.nframes = 3;
        }
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
        /* flush_ms 0: on disk before fini */
        size_t size;
        char *got = s_slurp (path, &size);
        size_t want = strlen (c->expected);
        if (size != want + 1 || memcmp (got, c->expected, want) != 0 || got[want] != '\n') {
            print_error ("case \"%s\":\n got: %s\nwant: %s\n", c->name, got, c->expected);
            fail ();
        }
        free (got);
        s_plugin.desc->fini (plugin);
        assert_int_equal (ctx.lines, 0);
    }
}

static void
test_every_ascii_byte (void **state)
{
    (void) state;
    unsigned char bytes[128];
    for (int i = 0; i < 128; i++)
        bytes[i] = (unsigned char) i;
    char escaped[128 * 6 + 1];
    s_expected_escape (bytes, sizeof bytes, escaped);

    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, NULL);
    fanhub_msg_t msg = s_msg (bytes, sizeof bytes, bytes, sizeof bytes, 77, 0);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);

    size_t size;
    char *got = s_slurp (path, &size);
    char *want = malloc (2 * sizeof escaped + 256);
    sprintf (want,
             "{\"seq\":77,\"received_at\":\"1970-01-01T00:00:00.000000Z\","
             "\"topic\":\"%s\",\"body\":\"%s\"}\n",
             escaped, escaped);
    assert_string_equal (got, want);

    /* And back: a strict reader gets the very bytes. */
    jline_t line;
    assert_int_equal (s_jline (got, size - 1, &line), 0);
    assert_string_equal (line.keys, "seq,received_at,topic,body");
    assert_int_equal (line.seq, 77);
    assert_int_equal (line.topic.size, sizeof bytes);
    assert_memory_equal (line.topic.data, bytes, sizeof bytes);
    assert_int_equal (line.body.size, sizeof bytes);
    assert_memory_equal (line.body.data, bytes, sizeof bytes);
    s_jline_free (&line);
    free (want);
    free (got);
}

/* Lines larger than the plugin's buffer are written whole and in order. */
static void
test_large_lines (void **state)
{
    (void) state;
    size_t text_size = 3 * 1024 * 1024;
    char *text = malloc (text_size);
    static const char pattern[] = "\"\\\n\x01 caf\xc3\xa9 \xe2\x82\xac plain";
    for (size_t i = 0; i < text_size; i++)
        text[i] = pattern[i % (sizeof pattern - 1)];
    text_size -= text_size % (sizeof pattern - 1); /* whole UTF-8 */
    size_t blob_size = 1024 * 1024 + 2;
    char *blob = malloc (blob_size);
    for (size_t i = 0; i < blob_size; i++)
        blob[i] = (char) (i * 7 + 0x80);

    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, NULL);
    fanhub_msg_t small = s_msg (BYTES ("small"), BYTES ("x"), 1, NS);
    fanhub_msg_t big_text = s_msg (BYTES ("big.text"), text, text_size, 2, NS);
    fanhub_msg_t big_blob = s_msg (BYTES ("big.blob"), blob, blob_size, 3, NS);
    assert_int_equal (s_plugin.desc->consume (plugin, &small), FANHUB_OK);
    assert_int_equal (s_plugin.desc->consume (plugin, &big_text), FANHUB_OK);
    assert_int_equal (s_plugin.desc->consume (plugin, &big_blob), FANHUB_OK);
    small.seq = 4;
    assert_int_equal (s_plugin.desc->consume (plugin, &small), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    assert_int_equal (ctx.lines, 0);

    size_t size;
    char *got = s_slurp (path, &size);
    assert_int_equal (s_count_lines (got, size), 4);
    char *p = got;
    for (uint64_t seq = 1; seq <= 4; seq++) {
        char *nl = memchr (p, '\n', size - (size_t) (p - got));
        assert_non_null (nl);
        jline_t line;
        assert_int_equal (s_jline (p, (size_t) (nl - p), &line), 0);
        assert_int_equal (line.seq, seq);
        if (seq == 2) {
            assert_int_equal (line.body.size, text_size);
            assert_memory_equal (line.body.data, text, text_size);
        }
        else if (seq == 3) {
            assert_string_equal (line.keys, "seq,received_at,topic,body_base64");
            char *raw = NULL;
            size_t raw_size = 0;
            assert_int_equal (
                s_unbase64 (line.body_base64.data, line.body_base64.size, &raw, &raw_size), 0);
            assert_int_equal (raw_size, blob_size);
            assert_memory_equal (raw, blob, blob_size);
            free (raw);
        }
        else
            assert_memory_equal (line.body.data, "x", 1);
        s_jline_free (&line);
        p = nl + 1;
    }
    free (got);
    free (blob);
    free (text);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_format_table),
        cmocka_unit_test (test_every_ascii_byte),
        cmocka_unit_test (test_large_lines),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
