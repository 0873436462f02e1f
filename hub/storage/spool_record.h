/*  spool_record - the on-disk record of the spool and the dead-letter
    store: framing, checksums, and the encoding of one message.

    A record is a 16-byte header and a payload, all integers little-endian:

        offset size
         0     4    magic, the bytes F5 46 48 31 ("\xF5" "FH1"; 0xF5 never
                    occurs in UTF-8, so JSON or text payloads cannot hold a
                    false magic)
         4     4    payload length L, at most FH_RECORD_MAX_PAYLOAD
         8     4    CRC-32C of the payload
        12     4    CRC-32C of bytes 0..11 (magic, length, payload CRC)
        16     L    payload

    The header checks itself, so a length is trusted only once its CRC
    verified: a flipped bit in a length never sends the reader past good
    records, and a damaged region is left by scanning forward for the next
    magic whose header and payload both verify. Records follow each other
    with no padding; a segment file is nothing but records.

    Payload of a message (type 1), as spooled and as dead-lettered:

         0     1    type = 1
         1     3    zero
         4     4    frame count N >= 1 (frame 0 is the topic, 1 the body)
         8     8    hub sequence number
        16     8    receive time, wall clock, ns since the Unix epoch (signed)
        24     ...  N times: u32 frame size S, then S bytes

    and nothing after the last frame. Payload of dead-letter metadata
    (type 2) is described in deadletter.h.

    fh_record_parse is the one function that finds records in bytes: the
    spool's reader, its start-up scan, the dead-letter store and the fuzz
    target all go through it. It is deterministic: the records and the
    damaged regions it reports do not depend on how the bytes are cut into
    buffers, so a scan at start-up and a later read agree.
*/
#ifndef FH_SPOOL_RECORD_H_INCLUDED
#define FH_SPOOL_RECORD_H_INCLUDED

#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_RECORD_MAGIC 0x314846F5u /* bytes F5 46 48 31 */
#define FH_RECORD_HEADER 16u
#define FH_RECORD_MAX_PAYLOAD (1u << 30) /* 1 GiB */

#define FH_RECORD_TYPE_MESSAGE 1
#define FH_RECORD_TYPE_DEADLETTER 2
#define FH_RECORD_MESSAGE_FIXED 24u /* message payload before the frames */

static inline void
fh_put_u32 (uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t) v;
    p[1] = (uint8_t) (v >> 8);
    p[2] = (uint8_t) (v >> 16);
    p[3] = (uint8_t) (v >> 24);
}

static inline void
fh_put_u64 (uint8_t *p, uint64_t v)
{
    fh_put_u32 (p, (uint32_t) v);
    fh_put_u32 (p + 4, (uint32_t) (v >> 32));
}

static inline uint32_t
fh_get_u32 (const uint8_t *p)
{
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static inline uint64_t
fh_get_u64 (const uint8_t *p)
{
    return (uint64_t) fh_get_u32 (p) | (uint64_t) fh_get_u32 (p + 4) << 32;
}

/* Writes the header of the record whose payload is payload[0..len-1] into
   header (16 bytes; payload usually follows it in the same buffer). */
void fh_record_seal (uint8_t *header, const uint8_t *payload, uint32_t len);

typedef enum {
    /* A whole verified record of *size bytes (header included). */
    FH_RECORD_OK,
    /* A record whose header verifies but whose payload does not: one
       damaged record of *size bytes, to skip. */
    FH_RECORD_BAD,
    /* *size bytes (>= 1) that are no record: skip them and parse again.
       Consecutive GARBAGE results are pieces of one damaged region. */
    FH_RECORD_GARBAGE,
    /* Only with at_end: the *size bytes left (all of them) hold nothing
       that verifies: a torn write, or damage running to the end. */
    FH_RECORD_TORN,
    /* Cannot tell yet: supply at least *size bytes from buf[0]. Only when
       not at_end. */
    FH_RECORD_NEED
} fh_record_status_t;

/* Looks at the bytes buf[0..len-1] that start at a presumed record
   boundary. at_end says nothing follows them (the end of the file, or of
   what may be read of it). With len == 0: TORN with *size 0 at the end,
   else NEED. On OK, *payload and *payload_len give the payload. */
fh_record_status_t fh_record_parse (const uint8_t *buf, size_t len, bool at_end, size_t *size,
                                    const uint8_t **payload, uint32_t *payload_len);

/* The payload size of a message of these frames, or 0 when it would
   exceed FH_RECORD_MAX_PAYLOAD. */
size_t fh_record_message_size (const fanhub_bytes_t *frames, uint32_t frame_count);

/* Writes a whole message record (header and payload) into out, which has
   FH_RECORD_HEADER + payload_size bytes; payload_size is what
   fh_record_message_size answered. */
void fh_record_encode_message (uint8_t *out, size_t payload_size, uint64_t seq,
                               int64_t received_wall_ns, const fanhub_bytes_t *frames,
                               uint32_t frame_count);

/* Checks and decodes a verified payload as a message. False when it is not
   a well-formed message. Else *frame_count is set, and frames[i] for
   i < min (*frame_count, max_frames) point into payload: when
   *frame_count > max_frames, call again with room for all. */
bool fh_record_decode_message (const uint8_t *payload, size_t len, uint64_t *seq,
                               int64_t *received_wall_ns, uint32_t *frame_count,
                               fanhub_bytes_t *frames, uint32_t max_frames);

#endif
