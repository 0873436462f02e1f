/*  crc32c - CRC-32C, by instruction or by table. See crc32c.h.

    The portable path is slicing-by-8 (Intel's "Slicing-by-8" paper): eight
    256-entry tables, built once on first use, consume eight bytes per step
    with eight lookups. The hardware path feeds the CRC32 instruction eight
    bytes at a time; it is compiled for SSE 4.2 with a target attribute, so
    the rest of the hub keeps the baseline instruction set, and called only
    after __builtin_cpu_supports has said the processor has it.
*/
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u /* 0x1EDC6F41 bit-reversed */

static uint32_t s_table[8][256];
static pthread_once_t s_table_once = PTHREAD_ONCE_INIT;

static void
s_table_build (void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ POLY : crc >> 1;
        s_table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = s_table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = s_table[0][crc & 0xff] ^ (crc >> 8);
            s_table[k][n] = crc;
        }
    }
}

uint32_t
fh_crc32c_portable (uint32_t crc, const void *data, size_t size)
{
    pthread_once (&s_table_once, s_table_build);
    const uint8_t *p = data;
    crc = ~crc;
    while (size >= 8) {
        /* Little-endian assembly of the words keeps this correct on any
           byte order; compilers turn it into one load where they can. */
        uint32_t lo = (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
                      | (uint32_t) p[3] << 24;
        uint32_t hi = (uint32_t) p[4] | (uint32_t) p[5] << 8 | (uint32_t) p[6] << 16
                      | (uint32_t) p[7] << 24;
        lo ^= crc;
        crc = s_table[7][lo & 0xff] ^ s_table[6][(lo >> 8) & 0xff] ^ s_table[5][(lo >> 16) & 0xff]
              ^ s_table[4][lo >> 24] ^ s_table[3][hi & 0xff] ^ s_table[2][(hi >> 8) & 0xff]
              ^ s_table[1][(hi >> 16) & 0xff] ^ s_table[0][hi >> 24];
        p += 8;
        size -= 8;
    }
    while (size--)
        crc = s_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW 1

__attribute__ ((target ("sse4.2"))) static uint32_t
s_crc32c_hw (uint32_t crc, const void *data, size_t size)
{
    const uint8_t *p = data;
    uint64_t crc64 = ~crc;
    /* Byte steps up to an 8-byte boundary: aligned loads are faster. */
    while (size > 0 && ((uintptr_t) p & 7) != 0) {
        crc64 = __builtin_ia32_crc32qi ((uint32_t) crc64, *p++);
        size--;
    }
    while (size >= 8) {
        uint64_t word;
        memcpy (&word, p, 8);
        crc64 = __builtin_ia32_crc32di (crc64, word);
        p += 8;
        size -= 8;
    }
    uint32_t crc32 = (uint32_t) crc64;
    while (size--)
        crc32 = __builtin_ia32_crc32qi (crc32, *p++);
    return ~crc32;
}
#endif

bool
fh_crc32c_hardware (void)
{
#ifdef HAVE_HW
    /* The answer is a few loads from a table libgcc or compiler-rt fills
       before main runs: cheap enough to ask on every call. */
    return __builtin_cpu_supports ("sse4.2");
#else
    return false;
#endif
}

uint32_t
fh_crc32c (uint32_t crc, const void *data, size_t size)
{
#ifdef HAVE_HW
    if (__builtin_cpu_supports ("sse4.2"))
        return s_crc32c_hw (crc, data, size);
#endif
    return fh_crc32c_portable (crc, data, size);
}
