/*  log_kit - what the log plugin's tests share: log.so and a directory for
    its files (a cmocka group setup and teardown), options, messages,
    reading back what the plugin wrote, and a strict reader for the one
    shape of line it writes. Include it once, after <cmocka.h> and
    <fanhub/testing.h>.
*/
#ifndef LOG_KIT_H_INCLUDED
#define LOG_KIT_H_INCLUDED

#include "plugin_kit.h"

/* -------------------------------------------------------------------------
   Helpers */

static int s_files; /* numbers the temp files */

/* A fresh temp file name. */
static inline void
s_temp (char *path, size_t size)
{
    snprintf (path, size, "%s/out-%d.jsonl", s_plugin.dir, ++s_files);
}

/* Starts an instance with options path=PATH and flush_ms=FLUSH_MS (NULL
   leaves the option out). */
static inline void *
s_start (fanhub_ctx_t *ctx, const char *path, const char *flush_ms)
{
    fanhub_option_t items[2];
    size_t n = 0;
    if (path)
        items[n++] = (fanhub_option_t) SCALAR ("path", path, "t.yaml:5:13");
    if (flush_ms)
        items[n++] = (fanhub_option_t) SCALAR ("flush_ms", flush_ms, "t.yaml:6:13");
    return s_start_map (ctx, items, n);
}

static inline fanhub_msg_t
s_msg (const void *topic, size_t topic_size, const void *body, size_t body_size, uint64_t seq,
       int64_t ns)
{
    return fanhub_fake_msg (topic, topic_size, body, body_size, seq, ns);
}

static inline off_t
s_file_size (const char *path)
{
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    return st.st_size;
}

static inline size_t
s_count_lines (const char *data, size_t size)
{
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    return lines;
}

#define BYTES(s) (s), sizeof (s) - 1

#define NS 1700000000123456789

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

static inline void
s_jline_free (jline_t *line)
{
    free (line->received_at.data);
    free (line->topic.data);
    free (line->body.data);
    free (line->body_base64.data);
    memset (line, 0, sizeof *line);
}

static inline int
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
static inline int
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
static inline int
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

/* -------------------------------------------------------------------------
   Setup */

static inline int
s_group_setup (void **state)
{
    (void) state;
    return fanhub_fake_plugin_open (&s_plugin, SHIPPED_PLUGIN_DIR "/log.so", "fanhub-test-log");
}

static inline int
s_group_teardown (void **state)
{
    (void) state;
    fanhub_fake_plugin_close (&s_plugin);
    return 0;
}

#endif
