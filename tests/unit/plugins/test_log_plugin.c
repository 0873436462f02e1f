/*  test_log_plugin - the shipped log consumer, driven through a fake host.

    The test loads log.so with dlopen like the hub does, but hands it a
    host table of its own: messages and options are plain structs here.
    That is what the host-table ABI is for; nothing of the hub is used.
    Output lines are checked against exact strings and, where the input is
    every byte or larger than the plugin's buffer, decoded back with a small
    strict JSON reader and compared with the input.
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

/* -------------------------------------------------------------------------
   Helpers */

static void *s_dl;
static const fanhub_consumer_desc_t *s_desc;
static char s_dir[256];
static int s_files; /* numbers the temp files */

#define SCALAR(k, v, w)                                                                            \
    {                                                                                              \
        FANHUB_OPTION_SCALAR, (k), (v), (w), NULL, 0                                               \
    }
#define MAP(items, n)                                                                              \
    {                                                                                              \
        FANHUB_OPTION_MAP, NULL, NULL, "t.yaml:4:3", (items), (n)                                  \
    }

static const fanhub_option_t s_empty_items[1];

/* A fresh temp file name. */
static void
s_temp (char *path, size_t size)
{
    snprintf (path, size, "%s/out-%d.jsonl", s_dir, ++s_files);
}

/* Starts an instance with options path=PATH and flush_ms=FLUSH_MS (NULL
   leaves the option out). */
static void *
s_start (fanhub_ctx_t *ctx, const char *path, const char *flush_ms)
{
    fanhub_option_t items[2];
    size_t n = 0;
    if (path)
        items[n++] = (fanhub_option_t) SCALAR ("path", path, "t.yaml:5:13");
    if (flush_ms)
        items[n++] = (fanhub_option_t) SCALAR ("flush_ms", flush_ms, "t.yaml:6:13");
    fanhub_option_t map = MAP (n ? items : s_empty_items, n);
    void *state = NULL;
    char err[512] = "";
    int rc = s_desc->init (&fanhub_fake_host, ctx, &map, &state, err, sizeof err);
    if (rc != 0)
        print_error ("init refused: %s\n", err);
    assert_int_equal (rc, 0);
    assert_non_null (state);
    return state;
}

static fanhub_msg_t
s_msg (const void *topic, size_t topic_size, const void *body, size_t body_size, uint64_t seq,
       int64_t ns)
{
    return fanhub_fake_msg (topic, topic_size, body, body_size, seq, ns);
}

/* The whole file, NUL-terminated for convenience; *size without it. */
static char *
s_slurp (const char *path, size_t *size)
{
    FILE *f = fopen (path, "rb");
    assert_non_null (f);
    size_t cap = 4096, len = 0;
    char *data = malloc (cap);
    assert_non_null (data);
    size_t n;
    while ((n = fread (data + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            data = realloc (data, cap);
            assert_non_null (data);
        }
    }
    fclose (f);
    data[len] = '\0';
    if (size)
        *size = len;
    return data;
}

static off_t
s_file_size (const char *path)
{
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    return st.st_size;
}

static size_t
s_count_lines (const char *data, size_t size)
{
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    return lines;
}

/* -------------------------------------------------------------------------
   A strict reader for the one shape of line the plugin writes */

typedef struct {
    char *data;
    size_t size;
} jstr_t;

typedef struct {
    char keys[128]; /* "seq,received_at,topic,body" */
    uint64_t seq;
    jstr_t received_at, topic, body, body_base64;
} jline_t;

static void
s_jline_free (jline_t *line)
{
    free (line->received_at.data);
    free (line->topic.data);
    free (line->body.data);
    free (line->body_base64.data);
    memset (line, 0, sizeof *line);
}

static int
s_hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads a JSON string at *p (at its opening quote); refuses raw control
   characters and unknown escapes, as a strict JSON parser would. */
static int
s_jstring (const char **p, const char *end, jstr_t *out)
{
    const char *s = *p;
    if (s >= end || *s++ != '"')
        return -1;
    char *data = malloc ((size_t) (end - s) + 1);
    size_t n = 0;
    while (s < end && *s != '"') {
        unsigned char c = (unsigned char) *s++;
        if (c < 0x20)
            goto fail;
        if (c != '\\') {
            data[n++] = (char) c;
            continue;
        }
        if (s >= end)
            goto fail;
        switch (*s++) {
        case '"': data[n++] = '"'; break;
        case '\\': data[n++] = '\\'; break;
        case '/': data[n++] = '/'; break;
        case 'b': data[n++] = '\b'; break;
        case 'f': data[n++] = '\f'; break;
        case 'n': data[n++] = '\n'; break;
        case 'r': data[n++] = '\r'; break;
        case 't': data[n++] = '\t'; break;
        case 'u': {
            if (end - s < 4)
                goto fail;
            unsigned v = 0;
            for (int i = 0; i < 4; i++) {
                int h = s_hexval (s[i]);
                if (h < 0)
                    goto fail;
                v = v << 4 | (unsigned) h;
            }
            s += 4;
            if (v >= 0x80) /* the plugin escapes only ASCII */
                goto fail;
            data[n++] = (char) v;
            break;
        }
        default: goto fail;
        }
    }
    if (s >= end)
        goto fail;
    *p = s + 1;
    out->data = data;
    out->size = n;
    return 0;
fail:
    free (data);
    return -1;
}

/* Parses one line (without its newline) into *out; -1 when it is not a
   JSON object of known keys with values of the right type. */
static int
s_jline (const char *s, size_t size, jline_t *out)
{
    memset (out, 0, sizeof *out);
    const char *end = s + size;
    if (s >= end || *s++ != '{')
        return -1;
    for (;;) {
        jstr_t key = {0};
        if (s_jstring (&s, end, &key))
            goto fail;
        bool known = true;
        if (strlen (out->keys) + key.size + 2 < sizeof out->keys) {
            if (out->keys[0])
                strcat (out->keys, ",");
            strncat (out->keys, key.data, key.size);
        }
        jstr_t *value = NULL;
        if (key.size == 3 && memcmp (key.data, "seq", 3) == 0)
            value = NULL;
        else if (key.size == 11 && memcmp (key.data, "received_at", 11) == 0)
            value = &out->received_at;
        else if (key.size == 5 && memcmp (key.data, "topic", 5) == 0)
            value = &out->topic;
        else if (key.size == 4 && memcmp (key.data, "body", 4) == 0)
            value = &out->body;
        else if (key.size == 11 && memcmp (key.data, "body_base64", 11) == 0)
            value = &out->body_base64;
        else
            known = false;
        free (key.data);
        if (!known || s >= end || *s++ != ':')
            goto fail;
        if (value) {
            if (value->data || s_jstring (&s, end, value))
                goto fail;
        }
        else {
            if (s >= end || *s < '0' || *s > '9')
                goto fail;
            out->seq = 0;
            while (s < end && *s >= '0' && *s <= '9')
                out->seq = out->seq * 10 + (uint64_t) (*s++ - '0');
        }
        if (s < end && *s == ',') {
            s++;
            continue;
        }
        if (s < end && *s == '}' && s + 1 == end)
            return 0;
        goto fail;
    }
fail:
    s_jline_free (out);
    return -1;
}

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

/* -------------------------------------------------------------------------
   Setup */

static int
s_group_setup (void **state)
{
    (void) state;
    if (!mkdtemp (test_tmp_template (s_dir, sizeof s_dir, "fanhub-test-log"))) {
        print_error ("mkdtemp: %s\n", strerror (errno));
        return -1;
    }
    s_desc = fanhub_fake_plugin_load (SHIPPED_PLUGIN_DIR "/log.so", &s_dl);
    return s_desc ? 0 : -1;
}

static int
s_group_teardown (void **state)
{
    (void) state;
    if (s_dl)
        dlclose (s_dl);
    test_remove_tree (s_dir);
    return 0;
}

/* -------------------------------------------------------------------------
   Tests */

static void
test_descriptor (void **state)
{
    (void) state;
    assert_int_equal (s_desc->abi_major, FANHUB_ABI_MAJOR);
    assert_int_equal (s_desc->abi_minor, FANHUB_ABI_MINOR);
    assert_int_equal (s_desc->size, sizeof (fanhub_consumer_desc_t));
    assert_string_equal (s_desc->name, "log");
    assert_true (s_desc->flags & FANHUB_CONSUMER_THREAD_SAFE);
    assert_non_null (s_desc->init);
    assert_non_null (s_desc->consume);
    assert_non_null (s_desc->idle);
    assert_non_null (s_desc->fini);
    assert_non_null (s_desc->reopen);
}

#define BYTES(s) (s), sizeof (s) - 1

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
#define NS 1700000000123456789

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
        assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
        /* flush_ms 0: on disk before fini */
        size_t size;
        char *got = s_slurp (path, &size);
        size_t want = strlen (c->expected);
        if (size != want + 1 || memcmp (got, c->expected, want) != 0 || got[want] != '\n') {
            print_error ("case \"%s\":\n got: %s\nwant: %s\n", c->name, got, c->expected);
            fail ();
        }
        free (got);
        s_desc->fini (plugin);
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
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    s_desc->fini (plugin);

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
    assert_int_equal (s_desc->consume (plugin, &small), FANHUB_OK);
    assert_int_equal (s_desc->consume (plugin, &big_text), FANHUB_OK);
    assert_int_equal (s_desc->consume (plugin, &big_blob), FANHUB_OK);
    small.seq = 4;
    assert_int_equal (s_desc->consume (plugin, &small), FANHUB_OK);
    s_desc->fini (plugin);
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

static void
test_buffered_until_idle (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "3600000");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    assert_int_equal (s_file_size (path), 0);
    s_desc->idle (plugin);
    off_t one = s_file_size (path);
    assert_true (one > 0);
    msg.seq = 2;
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    assert_int_equal (s_file_size (path), one);
    s_desc->fini (plugin);
    assert_int_equal (s_file_size (path), 2 * one);
}

static void
test_flush_after_interval (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "1");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    nanosleep (&(struct timespec){0, 5000000}, NULL);
    msg.seq = 2;
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    /* More than flush_ms since the last flush: both are on disk. */
    size_t size;
    char *got = s_slurp (path, &size);
    assert_int_equal (s_count_lines (got, size), 2);
    free (got);
    s_desc->fini (plugin);
}

static void
test_appends_and_creates_0644 (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, NULL);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_int_equal (st.st_mode & 07777, 0644);
    s_desc->fini (plugin);

    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs ("old line\n", f);
    fclose (f);
    plugin = s_start (&ctx, path, NULL);
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    s_desc->fini (plugin);
    char *got = s_slurp (path, NULL);
    assert_string_equal (got, "old line\n{\"seq\":1,\"received_at\":"
                              "\"1970-01-01T00:00:00.000000Z\",\"topic\":\"t\","
                              "\"body\":\"b\"}\n");
    free (got);
}

/* reopen (ABI 1.3), as logrotate's create mode needs it: after a rename,
   every later line, the buffered ones included, goes to the new file at
   path, and none to the renamed one; with the file missing, it is made. */
static void
test_reopen_after_rename (void **state)
{
    (void) state;
    assert_non_null (s_desc->reopen);
    char path[512], rotated[600];
    s_temp (path, sizeof path);
    snprintf (rotated, sizeof rotated, "%s.1", path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "3600000");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    s_desc->idle (plugin);
    off_t one = s_file_size (path);
    assert_true (one > 0);
    msg.seq = 2; /* buffered when the file is renamed */
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    assert_int_equal (rename (path, rotated), 0);
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL, 0640); /* logrotate's create */
    assert_true (fd >= 0);
    close (fd);
    s_desc->reopen (plugin);
    msg.seq = 3;
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    s_desc->idle (plugin);
    assert_int_equal (s_file_size (rotated), one);
    assert_int_equal (s_file_size (path), 2 * one);
    /* Renamed and not created again: reopen makes it. */
    assert_int_equal (rename (path, rotated), 0);
    s_desc->reopen (plugin);
    msg.seq = 4;
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    s_desc->fini (plugin);
    assert_int_equal (s_file_size (rotated), 2 * one);
    char *got = s_slurp (path, NULL);
    assert_non_null (strstr (got, "{\"seq\":4,"));
    free (got);
    assert_int_equal (ctx.lines, 0);
}

/* A path that cannot be opened again: logged, lines go on to the file
   that is open. */
static void
test_reopen_failure (void **state)
{
    (void) state;
    char dir[512], path[600];
    s_temp (dir, sizeof dir);
    assert_int_equal (mkdir (dir, 0755), 0);
    snprintf (path, sizeof path, "%s/out", dir);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "0");
    assert_int_equal (unlink (path), 0);
    assert_int_equal (rmdir (dir), 0);
    s_desc->reopen (plugin);
    assert_int_equal (ctx.lines, 1);
    assert_non_null (strstr (ctx.last, ": cannot reopen: No such file or directory; writing on "
                                       "to the file opened before"));
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, NS);
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    s_desc->fini (plugin);
}

/* "-" and the default are stdout, which fini flushes but leaves open. */
static void
test_stdout (void **state)
{
    (void) state;
    for (int round = 0; round < 2; round++) {
        char path[512];
        s_temp (path, sizeof path);
        fflush (stdout);
        int saved = dup (STDOUT_FILENO);
        int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true (saved >= 0 && fd >= 0);
        dup2 (fd, STDOUT_FILENO);
        close (fd);

        fanhub_ctx_t ctx;
        fanhub_fake_ctx_init (&ctx);
        void *plugin = s_start (&ctx, round == 0 ? "-" : NULL, NULL);
        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
        int rc = s_desc->consume (plugin, &msg);
        s_desc->fini (plugin);
        int still_open = fcntl (STDOUT_FILENO, F_GETFD);

        dup2 (saved, STDOUT_FILENO);
        close (saved);
        assert_int_equal (rc, FANHUB_OK);
        assert_true (still_open >= 0);
        char *got = s_slurp (path, NULL);
        assert_string_equal (got, "{\"seq\":1,\"received_at\":"
                                  "\"1970-01-01T00:00:00.000000Z\",\"topic\":\"t\","
                                  "\"body\":\"b\"}\n");
        free (got);
    }
}

typedef struct {
    const char *name;
    fanhub_option_t items[2];
    size_t count;
    const char *expected; /* the whole error; NULL: accepted */
} option_case_t;

static const fanhub_option_t s_list_items[] = {
    SCALAR (NULL, "a", "t.yaml:5:15"),
};
static const fanhub_option_t s_map_items[] = {
    SCALAR ("x", "1", "t.yaml:6:7"),
};
#define LIST(k)                                                                                    \
    {                                                                                              \
        FANHUB_OPTION_LIST, (k), NULL, "t.yaml:5:13", s_list_items, 1                              \
    }
#define SUBMAP(k)                                                                                  \
    {                                                                                              \
        FANHUB_OPTION_MAP, (k), NULL, "t.yaml:6:5", s_map_items, 1                                 \
    }
#define FLUSH_ERR(got, where)                                                                      \
    "options.flush_ms: expected a duration such as 250ms, 2s or 1m from 0 to 3600000 ms, got " got \
    " (" where ")"

static const option_case_t s_option_cases[] = {
    {"no options", {{0}}, 0, NULL},
    {"unknown key",
     {SCALAR ("colour", "red", "t.yaml:6:11")},
     1,
     "options.colour: unknown option; log takes path and flush_ms "
     "(t.yaml:6:11)"},
    {"unknown key after good ones",
     {SCALAR ("flush_ms", "5", "t.yaml:5:13"), SCALAR ("flush", "5", "t.yaml:6:10")},
     2,
     "options.flush: unknown option; log takes path and flush_ms "
     "(t.yaml:6:10)"},
    {"flush_ms 0", {SCALAR ("flush_ms", "0", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms max", {SCALAR ("flush_ms", "3600000", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms leading zero", {SCALAR ("flush_ms", "0100", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms a duration", {SCALAR ("flush_ms", "2s", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms an hour", {SCALAR ("flush_ms", "1h", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms word",
     {SCALAR ("flush_ms", "abc", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"abc\"", "t.yaml:5:13")},
    {"flush_ms negative",
     {SCALAR ("flush_ms", "-1", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"-1\"", "t.yaml:5:13")},
    {"flush_ms too big",
     {SCALAR ("flush_ms", "3600001", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"3600001\"", "t.yaml:5:13")},
    {"flush_ms far too big",
     {SCALAR ("flush_ms", "99999999999999999999", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"99999999999999999999\"", "t.yaml:5:13")},
    /* The hub's duration grammar: below a millisecond is dropped. */
    {"flush_ms fraction", {SCALAR ("flush_ms", "1.5", "t.yaml:5:13")}, 1, NULL},
    {"flush_ms hex",
     {SCALAR ("flush_ms", "0x10", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"0x10\"", "t.yaml:5:13")},
    {"flush_ms empty",
     {SCALAR ("flush_ms", "", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\"\"", "t.yaml:5:13")},
    {"flush_ms space",
     {SCALAR ("flush_ms", " 5", "t.yaml:5:13")},
     1,
     FLUSH_ERR ("\" 5\"", "t.yaml:5:13")},
    {"flush_ms list", {LIST ("flush_ms")}, 1, FLUSH_ERR ("a list", "t.yaml:5:13")},
    {"flush_ms map", {SUBMAP ("flush_ms")}, 1, FLUSH_ERR ("a map", "t.yaml:6:5")},
    {"path list",
     {LIST ("path")},
     1,
     "options.path: expected a file name, got a list "
     "(t.yaml:5:13)"},
    {"path map",
     {SUBMAP ("path")},
     1,
     "options.path: expected a file name, got a map (t.yaml:6:5)"},
    {"path empty",
     {SCALAR ("path", "", "t.yaml:5:13")},
     1,
     "options.path: must not be empty (t.yaml:5:13)"},
    {"path is a directory",
     {SCALAR ("path", "/", "t.yaml:5:13")},
     1,
     "options.path: /: cannot open: Is a directory (t.yaml:5:13)"},
};

static void
test_options_table (void **state)
{
    (void) state;
    size_t cases = sizeof s_option_cases / sizeof s_option_cases[0];
    for (size_t i = 0; i < cases; i++) {
        const option_case_t *c = &s_option_cases[i];
        fanhub_option_t map = MAP (c->count ? c->items : s_empty_items, c->count);
        fanhub_ctx_t ctx;
        fanhub_fake_ctx_init (&ctx);
        void *plugin = NULL;
        char err[512] = "";
        int rc = s_desc->init (&fanhub_fake_host, &ctx, &map, &plugin, err, sizeof err);
        bool ok = c->expected ? rc == -1 && strcmp (err, c->expected) == 0 : rc == 0;
        if (!ok) {
            print_error ("case \"%s\": rc %d\n got: %s\nwant: %s\n", c->name, rc, err,
                         c->expected ? c->expected : "(accepted)");
            fail ();
        }
        if (rc == 0)
            s_desc->fini (plugin);
    }
}

static void
test_unopenable_path (void **state)
{
    (void) state;
    char path[512], want[1024];
    snprintf (path, sizeof path, "%s/nonexistent/x", s_dir);
    snprintf (want, sizeof want,
              "options.path: %s: cannot open: No such file or directory "
              "(t.yaml:5:13)",
              path);
    fanhub_option_t items[] = {SCALAR ("path", path, "t.yaml:5:13")};
    fanhub_option_t map = MAP (items, 1);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = NULL;
    char err[1024] = "";
    assert_int_equal (s_desc->init (&fanhub_fake_host, &ctx, &map, &plugin, err, sizeof err), -1);
    assert_string_equal (err, want);
    assert_null (plugin);
}

/* /dev/full refuses every write: each message fails, the error is logged
   once for the streak. */
static void
test_write_error_logged_once (void **state)
{
    (void) state;
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, "/dev/full", "0");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_int_equal (ctx.lines, 1);
    assert_string_equal (ctx.last, "/dev/full: cannot write: No space left on device; "
                                   "messages fail until it can (logged once)");
    s_desc->fini (plugin);
    assert_int_equal (ctx.lines, 1); /* nothing was left to lose */

    /* Buffered: the message is accepted, the flush fails and the loss at
       shutdown is reported. */
    fanhub_ctx_t ctx2 = {0};
    plugin = s_start (&ctx2, "/dev/full", "3600000");
    assert_int_equal (s_desc->consume (plugin, &msg), FANHUB_OK);
    s_desc->idle (plugin);
    s_desc->idle (plugin);
    assert_int_equal (ctx2.lines, 1);
    s_desc->fini (plugin);
    assert_int_equal (ctx2.lines, 2);
    assert_non_null (strstr (ctx2.last, "buffered bytes lost at shutdown"));
}

/* With a file size limit a write can stop part way (the line is torn and
   gets its newline before the next) or fail outright (the line is taken
   back whole); when writing works again the plugin says so. */
static void
test_write_error_recovery (void **state)
{
    (void) state;
    static const char line1[] = "{\"seq\":1,\"received_at\":\"1970-01-01T00:00:00.000000Z\","
                                "\"topic\":\"t\",\"body\":\"b\"}\n";
    size_t len = sizeof line1 - 1;
    struct rlimit saved;
    assert_int_equal (getrlimit (RLIMIT_FSIZE, &saved), 0);
    void (*old) (int) = signal (SIGXFSZ, SIG_IGN);

    for (int torn = 0; torn < 2; torn++) {
        char path[512];
        s_temp (path, sizeof path);
        fanhub_ctx_t ctx;
        fanhub_fake_ctx_init (&ctx);
        void *plugin = s_start (&ctx, path, "0");
        struct rlimit limit = saved;
        limit.rlim_cur = torn ? len + 10 : len;
        assert_int_equal (setrlimit (RLIMIT_FSIZE, &limit), 0);

        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1, 0);
        int rc1 = s_desc->consume (plugin, &msg);
        msg.seq = 2;
        int rc2 = s_desc->consume (plugin, &msg);
        assert_int_equal (setrlimit (RLIMIT_FSIZE, &saved), 0);
        msg.seq = 3;
        int rc3 = s_desc->consume (plugin, &msg);
        s_desc->fini (plugin);

        assert_int_equal (rc1, FANHUB_OK);
        assert_int_equal (rc2, FANHUB_FAIL);
        assert_int_equal (rc3, FANHUB_OK);
        assert_int_equal (ctx.lines, 2);
        char want[1024];
        snprintf (want, sizeof want, "%s: writing again; 1 messages failed meanwhile", path);
        assert_string_equal (ctx.last, want);

        /* Lines 2 and 3 differ from line 1 in their seq digit only. */
        char line2[sizeof line1], line3[sizeof line1];
        memcpy (line2, line1, sizeof line1);
        memcpy (line3, line1, sizeof line1);
        line2[7] = '2';
        line3[7] = '3';
        char expect[512];
        if (torn)
            snprintf (expect, sizeof expect, "%s%.10s\n%s", line1, line2, line3);
        else
            snprintf (expect, sizeof expect, "%s%s", line1, line3);
        char *got = s_slurp (path, NULL);
        assert_string_equal (got, expect);
        free (got);
    }
    signal (SIGXFSZ, old);
}

#define THREADS 4
#define PER_THREAD 5000

typedef struct {
    void *plugin;
    int index;
} worker_t;

static void *
s_worker (void *arg)
{
    worker_t *w = (worker_t *) arg;
    char body[64];
    for (int i = 0; i < PER_THREAD; i++) {
        uint64_t seq = (uint64_t) w->index * PER_THREAD + (uint64_t) i + 1;
        int n = snprintf (body, sizeof body, "body \"%llu\"\n", (unsigned long long) seq);
        fanhub_msg_t msg
            = s_msg (BYTES ("org.test.threads"), body, (size_t) n, seq, (int64_t) seq * 1000);
        if (s_desc->consume (w->plugin, &msg) != FANHUB_OK)
            return arg;
        if (i % 1000 == 0)
            s_desc->idle (w->plugin);
    }
    return NULL;
}

/* Several threads at once (the plugin says it is thread-safe): every line
   whole, every message once. */
static void
test_threads (void **state)
{
    (void) state;
    char path[512];
    s_temp (path, sizeof path);
    fanhub_ctx_t ctx;
    fanhub_fake_ctx_init (&ctx);
    void *plugin = s_start (&ctx, path, "1");
    pthread_t threads[THREADS];
    worker_t workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker_t){plugin, i};
        assert_int_equal (pthread_create (&threads[i], NULL, s_worker, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *failed;
        pthread_join (threads[i], &failed);
        assert_null (failed);
    }
    s_desc->fini (plugin);

    size_t size;
    char *got = s_slurp (path, &size);
    assert_int_equal (s_count_lines (got, size), THREADS * PER_THREAD);
    bool *seen = calloc (THREADS * PER_THREAD + 1, sizeof *seen);
    char *p = got;
    while (p < got + size) {
        char *nl = memchr (p, '\n', size - (size_t) (p - got));
        assert_non_null (nl);
        jline_t line;
        assert_int_equal (s_jline (p, (size_t) (nl - p), &line), 0);
        assert_true (line.seq >= 1 && line.seq <= THREADS * PER_THREAD);
        assert_false (seen[line.seq]);
        seen[line.seq] = true;
        char body[64];
        int n = snprintf (body, sizeof body, "body \"%llu\"\n", (unsigned long long) line.seq);
        assert_int_equal (line.body.size, (size_t) n);
        assert_memory_equal (line.body.data, body, (size_t) n);
        s_jline_free (&line);
        p = nl + 1;
    }
    free (seen);
    free (got);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_descriptor),
        cmocka_unit_test (test_format_table),
        cmocka_unit_test (test_every_ascii_byte),
        cmocka_unit_test (test_large_lines),
        cmocka_unit_test (test_buffered_until_idle),
        cmocka_unit_test (test_flush_after_interval),
        cmocka_unit_test (test_appends_and_creates_0644),
        cmocka_unit_test (test_stdout),
        cmocka_unit_test (test_reopen_after_rename),
        cmocka_unit_test (test_reopen_failure),
        cmocka_unit_test (test_options_table),
        cmocka_unit_test (test_unopenable_path),
        cmocka_unit_test (test_write_error_logged_once),
        cmocka_unit_test (test_write_error_recovery),
        cmocka_unit_test (test_threads),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
