/*  order_key - a consumer's `order_by`: the ordering key of a message.

    Parsing compiles a JSON pointer once into its unescaped tokens, each
    marked with the array index it names (if it is one), so extraction is
    a walk with no string work. Extraction parses the whole body with
    jansson: jansson checks UTF-8 and bounds its nesting depth, which a
    skipping scanner would have to get right on its own, and a scanner
    would still need a full parse of an object value to write it with
    sorted keys. A value's text is written straight into the caller's
    buffer, piece by piece as jansson writes it, and hashed on the way in
    in case it turns out longer than FH_ORDER_KEY_MAX. See order_key.h
    for the forms and the fallback.
*/
#include "order_key.h"

#include "fnv.h"

#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_DIGITS 16

typedef struct {
    const char *text; /* unescaped, inside fh_order_key.texts */
    size_t size;
    bool is_index; /* "0" or [1-9][0-9]*, small enough for size_t */
    size_t index;
} s_token_t;

struct fh_order_key {
    fh_order_kind_t kind;
    unsigned index;
    s_token_t *tokens;
    size_t token_count;
    char *texts;
};

static bool
s_is_space (char c)
{
    return c == ' ' || c == '\t';
}

/* A decimal K: digits only, then nothing but spaces. */
static bool
s_parse_index (const char *text, unsigned *out)
{
    if (*text < '0' || *text > '9')
        return false;
    uint64_t value = 0;
    while (*text >= '0' && *text <= '9') {
        value = value * 10 + (uint64_t) (*text++ - '0');
        if (value > UINT32_MAX)
            return false;
    }
    while (s_is_space (*text))
        text++;
    if (*text)
        return false;
    *out = (unsigned) value;
    return true;
}

/* RFC 6901 array index: "0" or no leading zero; too many digits is no
   index at all (no array is that long). */
static bool
s_array_index (const char *text, size_t size, size_t *out)
{
    if (size == 0 || size > 15 || (size > 1 && text[0] == '0'))
        return false;
    size_t value = 0;
    for (size_t i = 0; i < size; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        value = value * 10 + (size_t) (text[i] - '0');
    }
    *out = value;
    return true;
}

static int
s_compile_pointer (fh_order_key_t *self, const char *pointer, char *err, size_t errlen)
{
    if (*pointer == '\0')
        return 0; /* the whole document */
    if (*pointer != '/') {
        snprintf (err, errlen, "order_by: json pointer '%s' must start with '/'", pointer);
        return -1;
    }
    size_t count = 0;
    for (const char *p = pointer; *p; p++)
        count += *p == '/';
    self->tokens = calloc (count, sizeof *self->tokens);
    self->texts = malloc (strlen (pointer) + 1);
    if (!self->tokens || !self->texts) {
        snprintf (err, errlen, "order_by: out of memory");
        return -1;
    }
    char *out = self->texts;
    const char *p = pointer;
    while (*p == '/') {
        p++;
        s_token_t *token = &self->tokens[self->token_count++];
        token->text = out;
        while (*p && *p != '/') {
            if (*p == '~') {
                if (p[1] != '0' && p[1] != '1') {
                    snprintf (err, errlen,
                              "order_by: json pointer '%s': '~' at offset %zu must be "
                              "followed by 0 or 1 (~0 is '~', ~1 is '/')",
                              pointer, (size_t) (p - pointer));
                    return -1;
                }
                *out++ = p[1] == '0' ? '~' : '/';
                p += 2;
            }
            else
                *out++ = *p++;
        }
        token->size = (size_t) (out - token->text);
        token->is_index = s_array_index (token->text, token->size, &token->index);
    }
    assert (*p == '\0' && self->token_count == count);
    return 0;
}

fh_order_key_t *
fh_order_key_parse (const char *spec, char *err, size_t errlen)
{
    static const char *const expected
        = "expected topic, topic_segment:K, frame:K, json:/pointer or none";
    fh_order_key_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "order_by: out of memory");
        return NULL;
    }
    const char *name = spec;
    while (s_is_space (*name))
        name++;
    const char *colon = strchr (name, ':');
    size_t name_size = colon ? (size_t) (colon - name) : strlen (name);
    while (name_size && s_is_space (name[name_size - 1]))
        name_size--;
    const char *arg = colon ? colon + 1 : NULL;
    while (arg && s_is_space (*arg))
        arg++;
#define S_NAME_IS(s) (name_size == strlen (s) && memcmp (name, s, name_size) == 0)
    if (S_NAME_IS ("topic") || S_NAME_IS ("none")) {
        self->kind = S_NAME_IS ("topic") ? FH_ORDER_TOPIC : FH_ORDER_NONE;
        if (colon) {
            snprintf (err, errlen, "order_by: '%s': %.*s takes no argument", spec, (int) name_size,
                      name);
            goto fail;
        }
    }
    else if (S_NAME_IS ("topic_segment") || S_NAME_IS ("frame")) {
        self->kind = S_NAME_IS ("frame") ? FH_ORDER_FRAME : FH_ORDER_TOPIC_SEGMENT;
        if (!arg || !s_parse_index (arg, &self->index)) {
            snprintf (err, errlen,
                      "order_by: '%s': %.*s needs a number K from 0 (the first), "
                      "as in %.*s:2",
                      spec, (int) name_size, name, (int) name_size, name);
            goto fail;
        }
    }
    else if (S_NAME_IS ("json")) {
        self->kind = FH_ORDER_JSON;
        if (!arg) {
            snprintf (err, errlen, "order_by: '%s': json needs a pointer, as in json:/msg/id",
                      spec);
            goto fail;
        }
        if (s_compile_pointer (self, arg, err, errlen) != 0)
            goto fail;
    }
    else {
        snprintf (err, errlen, "order_by: '%s': %s", spec, expected);
        goto fail;
    }
#undef S_NAME_IS
    return self;
fail:
    fh_order_key_destroy (&self);
    return NULL;
}

void
fh_order_key_destroy (fh_order_key_t **self_p)
{
    fh_order_key_t *self = *self_p;
    if (!self)
        return;
    free (self->tokens);
    free (self->texts);
    free (self);
    *self_p = NULL;
}

fh_order_kind_t
fh_order_key_kind (const fh_order_key_t *self)
{
    return self->kind;
}

unsigned
fh_order_key_index (const fh_order_key_t *self)
{
    return self->index;
}

/* Writes a key into the caller's buffer as it comes, in pieces (from
   jansson's dump) or whole. FNV-1a, 64 bits, over every byte: a fixed
   hash, so every hub (and every run) agrees on what a long key becomes. */
typedef struct {
    char *buf;
    size_t size;
    uint64_t hash;
} s_key_t;

static void
s_key_begin (s_key_t *key, char *buf)
{
    key->buf = buf;
    key->size = 0;
    key->hash = FH_FNV1A_OFFSET;
}

static void
s_key_add (s_key_t *key, const void *data, size_t size)
{
    const unsigned char *p = data;
    if (key->size < FH_ORDER_KEY_MAX) {
        size_t room = FH_ORDER_KEY_MAX - key->size;
        memcpy (key->buf + key->size, p, size < room ? size : room);
    }
    key->hash = fh_fnv1a_add (key->hash, p, size);
    key->size += size;
}

/* The key's length in the buffer: a long one ends in its hash. */
static size_t
s_key_end (s_key_t *key)
{
    if (key->size <= FH_ORDER_KEY_MAX)
        return key->size;
    static const char hex[] = "0123456789abcdef";
    char *digits = key->buf + FH_ORDER_KEY_MAX - HASH_DIGITS;
    for (int i = 0; i < HASH_DIGITS; i++)
        digits[i] = hex[(key->hash >> (4 * (HASH_DIGITS - 1 - i))) & 0xf];
    return FH_ORDER_KEY_MAX;
}

static void
s_emit (const void *data, size_t size, char *buf, size_t *len)
{
    s_key_t key;
    s_key_begin (&key, buf);
    if (size)
        s_key_add (&key, data, size);
    *len = s_key_end (&key);
}

static int
s_dump_piece (const char *data, size_t size, void *arg)
{
    s_key_add (arg, data, size);
    return 0;
}

static bool
s_segment (const fanhub_bytes_t *topic, unsigned k, const char **start, size_t *size)
{
    const char *p = topic->data ? topic->data : "";
    const char *end = p + topic->size;
    for (unsigned i = 0; i < k; i++) {
        const char *dot = memchr (p, '.', (size_t) (end - p));
        if (!dot)
            return false;
        p = dot + 1;
    }
    const char *dot = memchr (p, '.', (size_t) (end - p));
    *start = p;
    *size = (size_t) ((dot ? dot : end) - p);
    return true;
}

static bool
s_json (const fh_order_key_t *self, const fh_msg_t *msg, char *buf, size_t *len)
{
    fanhub_bytes_t body = fh_msg_frame (msg, 1);
    json_error_t error;
    json_t *doc = json_loadb (body.data ? body.data : "", body.size,
                              JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (!doc)
        return false;
    json_t *value = doc;
    for (size_t i = 0; value && i < self->token_count; i++) {
        const s_token_t *token = &self->tokens[i];
        if (json_is_object (value))
            value = json_object_getn (value, token->text, token->size);
        else if (json_is_array (value) && token->is_index)
            value = json_array_get (value, token->index);
        else
            value = NULL;
    }
    bool found = value != NULL;
    if (found && json_is_string (value))
        s_emit (json_string_value (value), json_string_length (value), buf, len);
    else if (found) {
        /* Written in pieces straight into buf (and the hash): no copy of
           a long value is ever made. jansson fails only when out of
           memory (sorting keys allocates). */
        s_key_t key;
        s_key_begin (&key, buf);
        found = json_dump_callback (value, s_dump_piece, &key,
                                    JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)
                == 0;
        *len = s_key_end (&key);
    }
    json_decref (doc);
    return found;
}

bool
fh_order_key_extract (const fh_order_key_t *self, const fh_msg_t *msg, char *buf, size_t *len)
{
    assert (*len >= FH_ORDER_KEY_MAX);
    bool found = true;
    switch (self->kind) {
    case FH_ORDER_NONE: {
        for (int i = 0; i < 8; i++)
            buf[i] = (char) (msg->seq >> (8 * (7 - i)));
        *len = 8;
        break;
    }
    case FH_ORDER_TOPIC: {
        fanhub_bytes_t topic = fh_msg_frame (msg, 0);
        s_emit (topic.data, topic.size, buf, len);
        break;
    }
    case FH_ORDER_TOPIC_SEGMENT: {
        fanhub_bytes_t topic = fh_msg_frame (msg, 0);
        const char *start;
        size_t size;
        found = s_segment (&topic, self->index, &start, &size);
        if (found)
            s_emit (start, size, buf, len);
        break;
    }
    case FH_ORDER_FRAME: {
        found = self->index < msg->frame_count;
        if (found) {
            fanhub_bytes_t frame = fh_msg_frame (msg, self->index);
            s_emit (frame.data, frame.size, buf, len);
        }
        break;
    }
    case FH_ORDER_JSON: found = s_json (self, msg, buf, len); break;
    }
    if (!found)
        *len = 0;
    return found;
}
