/*  fanhub/sdk.h - helpers for consumer plugins, header-only.

    What the shipped plugins need besides the ABI (consumer.h), installed
    with it so that an outside plugin gets the same: strict UTF-8, JSON
    string escaping, base64 (RFC 4648), RFC 3339 times, a monotonic
    clock, the name of an option node's kind, and `fanhub check`'s look at
    paths (would creating this file or directory work?) and at secret
    files. Every function is static inline and uses only libc (POSIX
    2008: build with _POSIX_C_SOURCE=200809L or the compiler's default GNU
    mode), so a plugin links nothing for them. One home each: the hub
    uses the same functions, and has no copy of its own.
*/
#ifndef FANHUB_SDK_H_INCLUDED
#define FANHUB_SDK_H_INCLUDED

#include <fanhub/consumer.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes one line into err (errlen bytes), cut when it is longer: how the
   SDK's helpers say why they failed. A message cut short is intended, so
   it goes through vsnprintf, which compilers do not warn about when the
   helper is inlined into a caller with a small buffer. */
static inline void FANHUB_PRINTF (3, 4)
    fanhub_error_line (char *err, size_t errlen, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    vsnprintf (err, errlen, fmt, args);
    va_end (args);
}

/* Strict UTF-8 (RFC 3629): refuses overlong forms, surrogates
   (U+D800..U+DFFF), code points above U+10FFFF and truncated sequences.
   NUL bytes are valid UTF-8. */
static inline bool
fanhub_utf8_valid (const void *data, size_t size)
{
    const uint8_t *s = (const uint8_t *) data;
    const uint8_t *end = s + size;
    while (s < end) {
        /* ASCII, nearly every topic, eight bytes at a time. */
        if (end - s >= 8) {
            uint64_t word;
            memcpy (&word, s, sizeof word);
            if (!(word & UINT64_C (0x8080808080808080))) {
                s += 8;
                continue;
            }
        }
        uint8_t c = *s;
        if (c < 0x80) {
            s++;
            continue;
        }
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the 2nd byte */
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0; /* overlong */
            else if (c == 0xED)
                hi = 0x9F; /* surrogates */
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90; /* overlong */
            else if (c == 0xF4)
                hi = 0x8F; /* above U+10FFFF */
        }
        else
            return false;
        if ((size_t) (end - s) <= need)
            return false;
        if (s[1] < lo || s[1] > hi)
            return false;
        for (size_t i = 2; i <= need; i++)
            if ((s[i] & 0xC0) != 0x80)
                return false;
        s += need + 1;
    }
    return true;
}

/* Where to cut text (len bytes) to keep at most max bytes without
   splitting a UTF-8 character: len when it fits, else max moved back
   over the continuation bytes (at most three) of a character that would
   straddle the cut. Text that is not UTF-8 is cut at max. The one rule
   of every cut the hub and its plugins make in a reason, an error or a
   log line: a character cut in two is invalid UTF-8, which JSON (STATS,
   a dead letter's reason) refuses. */
static inline size_t
fanhub_utf8_cut (const char *text, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t cut = max;
    for (int back = 0; back < 3 && cut > 0 && ((uint8_t) text[cut] & 0xC0) == 0x80; back++)
        cut--;
    if (((uint8_t) text[cut] & 0xC0) == 0x80)
        return max; /* four continuation bytes: not UTF-8 anyway */
    return cut;
}

/* Copies the NUL-terminated src into dst (size bytes, NUL included),
   cut at a character boundary when it does not fit: its length. */
static inline size_t
fanhub_utf8_copy (char *dst, size_t size, const char *src)
{
    if (!size)
        return 0;
    size_t len = fanhub_utf8_cut (src, strlen (src), size - 1);
    memmove (dst, src, len);
    dst[len] = '\0';
    return len;
}

/* vsnprintf into out (size bytes), then, when the text was cut, the cut
   moved back to a character boundary (fanhub_utf8_cut): its length. */
static inline size_t FANHUB_PRINTF (3, 0)
    fanhub_utf8_vformat (char *out, size_t size, const char *fmt, va_list args)
{
    if (!size)
        return 0;
    int full = vsnprintf (out, size, fmt, args);
    if (full < 0) {
        out[0] = '\0';
        return 0;
    }
    if ((size_t) full < size)
        return (size_t) full;
    /* The byte after the cut is gone: a lead byte at the end is cut with
       the continuation bytes vsnprintf did not write. */
    size_t len = size - 1, cut = len;
    while (cut > 0 && len - cut < 3 && ((uint8_t) out[cut - 1] & 0xC0) == 0x80)
        cut--;
    if (cut > 0 && (uint8_t) out[cut - 1] >= 0xC0) {
        uint8_t lead = (uint8_t) out[cut - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (len - (cut - 1) < need)
            len = cut - 1; /* the character is not whole */
    }
    out[len] = '\0';
    return len;
}

/* fanhub_utf8_vformat with its arguments. */
static inline size_t FANHUB_PRINTF (3, 4)
    fanhub_utf8_format (char *out, size_t size, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    size_t len = fanhub_utf8_vformat (out, size, fmt, args);
    va_end (args);
    return len;
}

/* How byte c is written inside a JSON string: 0 when as it is, else the
   length (2 or 6) of its escape, written into out: `"` and `\` get a
   backslash, \b \f \n \r \t their short forms, other bytes below 0x20
   \u00XX. Bytes from 0x80 are copied: check UTF-8 first. */
static inline size_t
fanhub_json_escape_byte (unsigned char c, char out[6])
{
    static const char hex[] = "0123456789abcdef";
    if (c >= 0x20 && c != '"' && c != '\\')
        return 0;
    out[0] = '\\';
    switch (c) {
    case '"': out[1] = '"'; return 2;
    case '\\': out[1] = '\\'; return 2;
    case '\b': out[1] = 'b'; return 2;
    case '\f': out[1] = 'f'; return 2;
    case '\n': out[1] = 'n'; return 2;
    case '\r': out[1] = 'r'; return 2;
    case '\t': out[1] = 't'; return 2;
    default: break;
    }
    memcpy (out + 1, "u00", 3);
    out[4] = hex[c >> 4];
    out[5] = hex[c & 0xF];
    return 6;
}

/* The inside of a JSON string (no quotes) for size bytes of data, into
   out, which has room for 6 * size + 1 bytes; NUL-terminated. Returns the
   length written. */
static inline size_t
fanhub_json_escape (char *out, const void *data, size_t size)
{
    const unsigned char *p = (const unsigned char *) data;
    size_t len = 0;
    for (size_t i = 0; i < size; i++) {
        size_t n = fanhub_json_escape_byte (p[i], out + len);
        if (n == 0)
            out[len++] = (char) p[i];
        else
            len += n;
    }
    out[len] = '\0';
    return len;
}

/* RFC 4648 base64 (the standard alphabet, padded): the length of the
   text for size bytes of data. */
static inline size_t
fanhub_base64_size (size_t size)
{
    return (size + 2) / 3 * 4;
}

/* size bytes of data as base64 into out, which has room for
   fanhub_base64_size (size) bytes; no NUL is written (callers stream it
   into buffers). Returns the length written. */
static inline size_t
fanhub_base64_encode (char *out, const void *data, size_t size)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *) data;
    size_t n = 0;
    for (size_t i = 0; i < size; i += 3) {
        uint32_t v = (uint32_t) p[i] << 16;
        if (i + 1 < size)
            v |= (uint32_t) p[i + 1] << 8;
        if (i + 2 < size)
            v |= p[i + 2];
        out[n++] = digits[v >> 18 & 63];
        out[n++] = digits[v >> 12 & 63];
        out[n++] = i + 1 < size ? digits[v >> 6 & 63] : '=';
        out[n++] = i + 2 < size ? digits[v & 63] : '=';
    }
    return n;
}

/* The value of base64 digit c, or -1. */
static inline int
fanhub_base64_digit (unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes len bytes of base64 text into out, which has room for
   len / 4 * 3 + 3 bytes. Padding may be left out or cut short ("QQ",
   "QQ=", "QQ=="), but nothing may follow it; with lines, white space
   (' ', '\t', '\r', '\n') between digits is skipped, as in PEM-style
   lines. Leftover bits must be zero, so every byte string has one text.
   Returns the number of bytes, or -1 when the text is not base64. */
static inline ptrdiff_t
fanhub_base64_decode (void *out, const char *text, size_t len, bool lines)
{
    unsigned char *o = (unsigned char *) out;
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0, count = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) text[i];
        if (lines && (c == ' ' || c == '\t' || c == '\r' || c == '\n'))
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = fanhub_base64_digit (c);
        if (v < 0 || pad)
            return -1;
        acc = (acc << 6 | (uint32_t) v) & 0xFFFFFF;
        bits += 6;
        count++;
        if (bits >= 8) {
            bits -= 8;
            o[n++] = (unsigned char) (acc >> bits);
        }
    }
    if (count % 4 == 1 || (pad && (count % 4 == 0 || count % 4 + pad > 4)))
        return -1;
    return (acc & ((1u << bits) - 1)) == 0 ? (ptrdiff_t) n : -1;
}

/* Room for fanhub_rfc3339's longest text and its NUL:
   "2026-11-28T03:09:01.123456789Z". */
#define FANHUB_RFC3339_SIZE 32

/* ns since the epoch as an RFC 3339 time in UTC into out, which has
   room for 22 + digits bytes (FANHUB_RFC3339_SIZE is room for any):
   "YYYY-MM-DDTHH:MM:SS", then '.' and
   `digits` digits of the fraction when digits is 1 to 9 (truncated
   towards the past, as for times before 1970), then 'Z'. NUL-terminated;
   returns the length. */
static inline size_t
fanhub_rfc3339 (char *out, int64_t ns, int digits)
{
    int64_t sec = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        sec--;
    }
    time_t t = (time_t) sec;
    struct tm tm;
    if (!gmtime_r (&t, &tm)) /* only for a 32-bit time_t */
        memset (&tm, 0, sizeof tm);
    int v[6] = {
        (tm.tm_year + 1900) % 10000, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
    static const char seps[] = "--T::";
    size_t n = 0;
    for (int i = 0; i < 6; i++) {
        int width = i == 0 ? 4 : 2;
        for (int d = width - 1; d >= 0; d--, v[i] /= 10)
            out[n + (size_t) d] = (char) ('0' + v[i] % 10);
        n += (size_t) width;
        if (i < 5)
            out[n++] = seps[i];
    }
    if (digits > 9)
        digits = 9;
    if (digits > 0) {
        out[n++] = '.';
        for (int d = 9; d > digits; d--)
            frac /= 10;
        for (int d = digits - 1; d >= 0; d--, frac /= 10)
            out[n + (size_t) d] = (char) ('0' + frac % 10);
        n += (size_t) digits;
    }
    out[n++] = 'Z';
    out[n] = '\0';
    return n;
}

/* CLOCK_MONOTONIC in nanoseconds: for intervals and deadlines. */
static inline int64_t
fanhub_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* "a scalar", "a list", "a map" (or "nothing"), for error messages. */
static inline const char *
fanhub_option_kind_name (fanhub_option_kind_t kind)
{
    switch (kind) {
    case FANHUB_OPTION_SCALAR: return "a scalar";
    case FANHUB_OPTION_LIST: return "a list";
    case FANHUB_OPTION_MAP: return "a map";
    }
    return "nothing";
}

/* Paths, for check: asked without creating, opening or locking anything.
   The answers come from stat(2) and faccessat(2) with the effective ids
   (AT_EACCESS), so they say what the permission bits say; a read-only
   mount, a full disk or a sandbox (systemd's ProtectSystem=) can still
   refuse at run time. */

/* The deepest existing ancestor of path (path itself excluded) into
   ancestor: "." for a relative path whose first part is missing. */
static inline void
fanhub_probe_existing_ancestor (const char *path, char *ancestor, size_t size)
{
    /* A path of PATH_MAX or more was refused by stat(2) before this. */
    size_t len = strnlen (path, size - 1);
    memcpy (ancestor, path, len);
    ancestor[len] = '\0';
    for (;;) {
        char *slash = strrchr (ancestor, '/');
        while (slash && slash > ancestor && slash[1] == '\0') { /* trailing '/' */
            *slash = '\0';
            slash = strrchr (ancestor, '/');
        }
        if (!slash) {
            snprintf (ancestor, size, ".");
            return;
        }
        if (slash == ancestor) {
            ancestor[1] = '\0'; /* "/" */
            return;
        }
        *slash = '\0';
        struct stat st;
        if (stat (ancestor, &st) == 0)
            return;
    }
}

/* 0 when a directory one may write into is at path, or can be made there
   with its missing parents (then *exists is false); else -1 with why,
   e.g. "/var/log is not writable". */
static inline int
fanhub_probe_directory (const char *path, bool *exists, char *why, size_t whylen)
{
    struct stat st;
    *exists = stat (path, &st) == 0;
    const char *target = path;
    char ancestor[PATH_MAX];
    if (!*exists) {
        /* ENOTDIR: a file where a parent should be; said below by name. */
        if (errno != ENOENT && errno != ENOTDIR) {
            snprintf (why, whylen, "%s: %s", path, strerror (errno));
            return -1;
        }
        fanhub_probe_existing_ancestor (path, ancestor, sizeof ancestor);
        target = ancestor;
        if (stat (target, &st) != 0) {
            snprintf (why, whylen, "%s: %s", target, strerror (errno));
            return -1;
        }
    }
    if (!S_ISDIR (st.st_mode)) {
        snprintf (why, whylen, "%s is not a directory", target);
        return -1;
    }
    if (faccessat (AT_FDCWD, target, W_OK | X_OK, AT_EACCESS) != 0) {
        snprintf (why, whylen, "%s is not writable: %s", target, strerror (errno));
        return -1;
    }
    return 0;
}

/* 0 when open (path, O_WRONLY | O_CREAT) would work: the file is there
   and writable, or its directory is there and writable (*exists tells
   which); else -1 with why, in open(2)'s words where it has them. */
static inline int
fanhub_probe_file (const char *path, bool *exists, char *why, size_t whylen)
{
    struct stat st;
    *exists = stat (path, &st) == 0;
    if (*exists) {
        if (S_ISDIR (st.st_mode)) {
            snprintf (why, whylen, "%s", strerror (EISDIR));
            return -1;
        }
        if (faccessat (AT_FDCWD, path, W_OK, AT_EACCESS) != 0) {
            snprintf (why, whylen, "%s", strerror (errno));
            return -1;
        }
        return 0;
    }
    if (errno != ENOENT && errno != ENOTDIR) {
        snprintf (why, whylen, "%s", strerror (errno));
        return -1;
    }
    char dir[PATH_MAX];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (!slash)
        snprintf (dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat (dir, &st) != 0) {
        snprintf (why, whylen, "%s (directory %s)", strerror (errno), dir);
        return -1;
    }
    if (!S_ISDIR (st.st_mode)) {
        snprintf (why, whylen, "%s (%s)", strerror (ENOTDIR), dir);
        return -1;
    }
    if (faccessat (AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
        snprintf (why, whylen, "%s (directory %s)", strerror (errno), dir);
        return -1;
    }
    return 0;
}

/* 0 when path is a regular file that only its owner may read or change
   (as ssh asks of its keys), for any file that holds a secret; else -1
   with one line in err naming `what` and path. */
static inline int
fanhub_secret_file_check (const char *path, const char *what, char *err, size_t errlen)
{
    struct stat st;
    if (stat (path, &st) != 0) {
        fanhub_error_line (err, errlen, "%s %s: %s", what, path, strerror (errno));
        return -1;
    }
    if (!S_ISREG (st.st_mode)) {
        fanhub_error_line (err, errlen, "%s %s: not a regular file", what, path);
        return -1;
    }
    if (st.st_mode & 077) {
        fanhub_error_line (err, errlen,
                           "%s %s: mode %04o lets other users read or change it; refusing it "
                           "(chmod 600 %s)",
                           what, path, (unsigned) (st.st_mode & 07777), path);
        return -1;
    }
    return 0;
}

/* A secret (a password, a token) from a file or from the environment:
   exactly one of file and env is given. From a file, its first line
   (without the line end), the file a regular file that only its owner may
   read or change (fanhub_secret_file_check); from env, the variable's
   value, which must be set and not empty. Returns the secret, malloc'd
   (wipe and free it), or NULL with one line in err that names the file or
   the variable and never holds the secret. The hub reads its own secrets
   (bus.amqp) with it too, so every secret is refused alike. */
static inline char *
fanhub_secret_read (const char *file, const char *env, char *err, size_t errlen)
{
    const char *value = NULL;
    char line[1024];
    if (env) {
        value = getenv (env);
        if (!value || !*value) {
            fanhub_error_line (err, errlen, "the environment variable %s is not set, or empty",
                               env);
            return NULL;
        }
    }
    else {
        FILE *f = fopen (file, "r");
        struct stat st;
        if (!f || fstat (fileno (f), &st) != 0) {
            fanhub_error_line (err, errlen, "%s: %s", file, strerror (errno));
            if (f)
                fclose (f);
            return NULL;
        }
        if (!S_ISREG (st.st_mode) || (st.st_mode & 077)) {
            fanhub_error_line (err, errlen, "%s: %s; refusing it (chmod 600 %s)", file,
                               S_ISREG (st.st_mode) ? "other users may read or change it"
                                                    : "not a regular file",
                               file);
            fclose (f);
            return NULL;
        }
        bool got = fgets (line, sizeof line, f) != NULL;
        fclose (f);
        line[got ? strcspn (line, "\r\n") : 0] = '\0';
        if (!line[0]) {
            fanhub_error_line (err, errlen, "%s: empty first line", file);
            return NULL;
        }
        value = line;
    }
    size_t size = strlen (value) + 1;
    char *copy = (char *) malloc (size);
    if (copy)
        memcpy (copy, value, size);
    else
        fanhub_error_line (err, errlen, "out of memory");
    if (value == line)
        memset (line, 0, sizeof line);
    return copy;
}

#ifdef __cplusplus
}
#endif

#endif
