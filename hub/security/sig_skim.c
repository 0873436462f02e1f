/*  sig_skim - the long fields of a signed body, found as written. See
    sig_skim.h. */
#include "sig_skim.h"

#include <string.h>

static const char *
s_skim_space (const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* A string from just after its opening quote: the position after its
   closing quote, or NULL; *least: its length once unescaped, at least
   (each escape counts one byte). */
static const char *
s_skim_string (const char *p, const char *end, size_t *least)
{
    const char *start = p;
    size_t extra = 0;
    /* memchr runs a word at a time: the long base64 strings have no
       escape but their line ends. */
    const char *quote = memchr (p, '"', (size_t) (end - p));
    while (quote) {
        const char *slash = memchr (p, '\\', (size_t) (quote - p));
        if (!slash) {
            *least = (size_t) (quote - start) - extra;
            return quote + 1;
        }
        size_t len = slash + 1 < end && slash[1] == 'u' ? 6 : 2;
        if ((size_t) (end - slash) < len)
            return NULL;
        extra += len - 1;
        p = slash + len;
        if (p > quote) /* that quote was escaped */
            quote = memchr (p, '"', (size_t) (end - p));
    }
    return NULL;
}

/* A member's value: the position after it (at the ',' or '}' that
   follows), or NULL. A string's least length into *least. */
static const char *
s_skim_value (const char *p, const char *end, size_t *least, bool *is_string)
{
    *is_string = p < end && *p == '"';
    if (*is_string)
        return s_skim_string (p + 1, end, least);
    int depth = 0;
    size_t ignored;
    while (p < end) {
        char c = *p;
        if (c == '"') {
            if (!(p = s_skim_string (p + 1, end, &ignored)))
                return NULL;
            continue;
        }
        if ((c == '}' || c == ']' || c == ',') && depth == 0)
            return p;
        depth += c == '{' || c == '[' ? 1 : c == '}' || c == ']' ? -1 : 0;
        p++;
    }
    return NULL;
}

static bool
s_printable (const char *p, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if ((unsigned char) p[i] < 0x20 || (unsigned char) p[i] > 0x7e)
            return false;
    return true;
}

/* Notes a member found: the first of its name, or plain no more. */
static void
s_found (fh_sig_raw_t *raw, const char *value, size_t size, size_t least, bool *plain)
{
    if (raw->text || !s_printable (value, size))
        *plain = false;
    raw->text = value;
    raw->size = size;
    raw->least = least;
}

void
fh_sig_skim (const char *p, size_t size, fh_sig_fields_t *out)
{
    const char *end = p + size;
    *out = (fh_sig_fields_t){.plain = true};
    p = s_skim_space (p, end);
    if (p == end || *p++ != '{') {
        out->plain = false;
        return;
    }
    for (;;) {
        p = s_skim_space (p, end);
        const char *key = p + 1;
        size_t key_size, least = 0;
        bool is_string;
        if (p == end || *p != '"' || !(p = s_skim_string (key, end, &key_size)))
            break;
        size_t raw = (size_t) (p - 1 - key);
        if (memchr (key, '\\', raw))
            out->plain = false;
        p = s_skim_space (p, end);
        if (p == end || *p != ':')
            break;
        const char *value = s_skim_space (p + 1, end);
        p = s_skim_value (value, end, &least, &is_string);
        if (!p)
            break;
        size_t value_size = is_string ? (size_t) (p - 1 - (value + 1)) : 0;
        if (is_string && raw == 11 && memcmp (key, "certificate", 11) == 0)
            s_found (&out->cert, value + 1, value_size, least, &out->plain);
        else if (is_string && raw == 9 && memcmp (key, "signature", 9) == 0)
            s_found (&out->sig, value + 1, value_size, least, &out->plain);
        p = s_skim_space (p, end);
        if (p < end && *p == '}') {
            /* The object's end, and nothing but space after it. */
            out->plain = out->plain && s_skim_space (p + 1, end) == end && out->cert.text
                         && out->sig.text;
            return;
        }
        if (p == end || *p++ != ',')
            break;
    }
    out->plain = false; /* not read to its end: the whole parse says why */
}

bool
fh_sig_blanked (const char *body, size_t size, const fh_sig_fields_t *fields, fh_buf_t *out)
{
    const fh_sig_raw_t *first = fields->cert.text < fields->sig.text ? &fields->cert : &fields->sig;
    const fh_sig_raw_t *second = first == &fields->cert ? &fields->sig : &fields->cert;
    const char *end = body + size;
    out->size = 0;
    out->failed = false;
    fh_buf_put (out, body, (size_t) (first->text - body));
    fh_buf_put (out, first->text + first->size,
                (size_t) (second->text - (first->text + first->size)));
    fh_buf_put (out, second->text + second->size, (size_t) (end - (second->text + second->size)));
    return !out->failed;
}

bool
fh_sig_unescape (const fh_sig_raw_t *raw, fh_buf_t *out)
{
    out->size = 0;
    out->failed = false;
    const char *p = raw->text, *end = raw->text + raw->size;
    while (p < end) {
        const char *slash = memchr (p, '\\', (size_t) (end - p));
        const char *stop = slash ? slash : end;
        fh_buf_put (out, p, (size_t) (stop - p));
        if (!slash)
            break;
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *which = slash + 1 < end && slash[1] ? strchr (from, slash[1]) : NULL;
        if (!which)
            return false; /* \u, or not an escape */
        fh_buf_put (out, &to[which - from], 1);
        p = slash + 2;
    }
    return !out->failed;
}
