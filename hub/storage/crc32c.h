/*  crc32c - CRC-32C (Castagnoli), the checksum of spool and dead-letter
    records.

    The polynomial of iSCSI (RFC 3720, appendix B.4), ext4 and SCTP:
    0x1EDC6F41, reflected 0x82F63B78, initial value and final XOR all ones.
    On x86-64 processors with SSE 4.2 the CRC32 instruction computes it
    (about 8 bytes per cycle); elsewhere a slicing-by-8 table does (about
    1 byte per cycle). Both give the same answer; the choice is made at run
    time, so one binary runs on every x86-64.

    Incremental use: crc = fh_crc32c (0, a, na); crc = fh_crc32c (crc, b, nb)
    equals fh_crc32c (0, ab, na + nb). Thread-safe.
*/
#ifndef FH_CRC32C_H_INCLUDED
#define FH_CRC32C_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of data[0..size-1], continuing from crc (0 to start). */
uint32_t fh_crc32c (uint32_t crc, const void *data, size_t size);

/* The same with the table, whatever the processor (for tests). */
uint32_t fh_crc32c_portable (uint32_t crc, const void *data, size_t size);

/* True when fh_crc32c uses the CRC32 instruction on this processor. */
bool fh_crc32c_hardware (void);

#endif
