/*  pyjson - JSON written exactly as Python's json.dumps writes it.
    See pyjson.h. */
#include "pyjson.h"

#include <fanhub/sdk.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
fh_buf_put (fh_buf_t *buf, const void *data, size_t size)
{
    if (buf->failed)
        return;
    if (buf->size + size > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 256;
        while (cap < buf->size + size)
            cap *= 2;
        char *data_new = realloc (buf->data, cap);
        if (!data_new) {
            buf->failed = true;
            return;
        }
        buf->data = data_new;
        buf->cap = cap;
    }
    memcpy (buf->data + buf->size, data, size);
    buf->size += size;
}

static void
s_buf_puts (fh_buf_t *buf, const char *text)
{
    fh_buf_put (buf, text, strlen (text));
}

static void
s_encode_string (fh_buf_t *buf, const char *text, size_t size)
{
    const uint8_t *s = (const uint8_t *) text;
    const uint8_t *end = s + size;
    fh_buf_put (buf, "\"", 1);
    while (s < end) {
        /* Copy the run that needs no escape in one go. */
        const uint8_t *run = s;
        while (s < end && *s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\')
            s++;
        fh_buf_put (buf, run, (size_t) (s - run));
        if (s == end)
            break;
        uint8_t c = *s;
        /* The SDK's escapes below 0x20 and of '"' and '\\' are Python's
           too; DEL and non-ASCII (ensure_ascii) are Python's own, below. */
        char esc[16];
        size_t n = fanhub_json_escape_byte (c, esc);
        if (n) {
            fh_buf_put (buf, esc, n);
            s++;
            continue;
        }
        /* jansson hands us valid UTF-8 only; decode one code point. */
        uint32_t cp;
        size_t len;
        if (c < 0x80) {
            cp = c;
            len = 1;
        }
        else if (c < 0xE0) {
            cp = c & 0x1Fu;
            len = 2;
        }
        else if (c < 0xF0) {
            cp = c & 0x0Fu;
            len = 3;
        }
        else {
            cp = c & 0x07u;
            len = 4;
        }
        if ((size_t) (end - s) < len)
            len = (size_t) (end - s);
        for (size_t i = 1; i < len; i++)
            cp = (cp << 6) | (s[i] & 0x3Fu);
        s += len;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf (esc, sizeof esc, "\\u%04x\\u%04x", (unsigned) (0xD800 | (cp >> 10)),
                      (unsigned) (0xDC00 | (cp & 0x3FF)));
        }
        else
            snprintf (esc, sizeof esc, "\\u%04x", (unsigned) cp);
        s_buf_puts (buf, esc);
    }
    fh_buf_put (buf, "\"", 1);
}

/* Python's repr of a float: the shortest digits that read back to the
   same double, in fixed notation when the decimal exponent is in
   (-4, 16], else as 1.5e-05 / 1e+16; always with a '.' or an 'e'. */
static void
s_encode_real (fh_buf_t *buf, double value)
{
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf (tmp, sizeof tmp, "%.*e", prec - 1, value);
        if (strtod (tmp, NULL) == value)
            break;
    }
    const char *p = tmp;
    bool negative = *p == '-';
    if (negative)
        p++;
    char digits[24];
    int count = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && count < (int) sizeof digits)
            digits[count++] = *p;
    int exponent = *p == 'e' ? atoi (p + 1) : 0;
    while (count > 1 && digits[count - 1] == '0')
        count--;
    int decpt = exponent + 1; /* digits are 0.DDD x 10^decpt */

    char out[64];
    size_t n = 0;
    if (negative)
        out[n++] = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[n++] = '0';
            out[n++] = '.';
            for (int i = 0; i < -decpt; i++)
                out[n++] = '0';
            memcpy (out + n, digits, (size_t) count);
            n += (size_t) count;
        }
        else if (decpt >= count) {
            memcpy (out + n, digits, (size_t) count);
            n += (size_t) count;
            for (int i = count; i < decpt; i++)
                out[n++] = '0';
            out[n++] = '.';
            out[n++] = '0';
        }
        else {
            memcpy (out + n, digits, (size_t) decpt);
            n += (size_t) decpt;
            out[n++] = '.';
            memcpy (out + n, digits + decpt, (size_t) (count - decpt));
            n += (size_t) (count - decpt);
        }
    }
    else {
        out[n++] = digits[0];
        if (count > 1) {
            out[n++] = '.';
            memcpy (out + n, digits + 1, (size_t) (count - 1));
            n += (size_t) (count - 1);
        }
        n += (size_t) snprintf (out + n, sizeof out - n, "e%c%02d", decpt - 1 < 0 ? '-' : '+',
                                abs (decpt - 1));
    }
    fh_buf_put (buf, out, n);
}

typedef struct {
    const char *key;
    size_t size;
    json_t *value;
} s_member_t;

/* Python sorts keys by code point; UTF-8 byte order is the same order. */
static int
s_member_compare (const void *a, const void *b)
{
    const s_member_t *x = a, *y = b;
    size_t common = x->size < y->size ? x->size : y->size;
    int rc = memcmp (x->key, y->key, common);
    if (rc)
        return rc;
    return x->size < y->size ? -1 : x->size > y->size;
}

/* Recursion is bounded: jansson refuses nesting deeper than 2048. */
void
fh_pyjson_encode (fh_buf_t *buf, json_t *value)
{
    char tmp[32];
    switch (json_typeof (value)) {
    case JSON_OBJECT: {
        size_t count = json_object_size (value);
        s_member_t *members = calloc (count ? count : 1, sizeof *members);
        if (!members) {
            buf->failed = true;
            return;
        }
        size_t i = 0;
        const char *key;
        size_t key_size;
        json_t *member;
        json_object_keylen_foreach (value, key, key_size, member)
        {
            members[i++] = (s_member_t){key, key_size, member};
        }
        qsort (members, i, sizeof *members, s_member_compare);
        fh_buf_put (buf, "{", 1);
        for (size_t j = 0; j < i; j++) {
            if (j)
                fh_buf_put (buf, ",", 1);
            s_encode_string (buf, members[j].key, members[j].size);
            fh_buf_put (buf, ":", 1);
            fh_pyjson_encode (buf, members[j].value);
        }
        fh_buf_put (buf, "}", 1);
        free (members);
        break;
    }
    case JSON_ARRAY: {
        fh_buf_put (buf, "[", 1);
        for (size_t i = 0; i < json_array_size (value); i++) {
            if (i)
                fh_buf_put (buf, ",", 1);
            fh_pyjson_encode (buf, json_array_get (value, i));
        }
        fh_buf_put (buf, "]", 1);
        break;
    }
    case JSON_STRING:
        s_encode_string (buf, json_string_value (value), json_string_length (value));
        break;
    case JSON_INTEGER:
        snprintf (tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value (value));
        s_buf_puts (buf, tmp);
        break;
    case JSON_REAL: s_encode_real (buf, json_real_value (value)); break;
    case JSON_TRUE: s_buf_puts (buf, "true"); break;
    case JSON_FALSE: s_buf_puts (buf, "false"); break;
    case JSON_NULL: s_buf_puts (buf, "null"); break;
    }
}
