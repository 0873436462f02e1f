/*  utf8 - strict UTF-8 validation (RFC 3629).

    Refuses overlong forms, surrogates (U+D800..U+DFFF), code points above
    U+10FFFF and truncated sequences. NUL bytes are valid UTF-8. Header-only
    so that plugins built like outside plugins can use it without linking
    the hub.
*/
#ifndef FH_UTF8_H_INCLUDED
#define FH_UTF8_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline bool
fh_utf8_valid (const void *data, size_t size)
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

#endif
