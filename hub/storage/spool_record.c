/*  spool_record - record framing and the message payload. See
    spool_record.h.

    Resynchronisation after damage looks for the next position whose 16
    bytes form a header that verifies (magic and header CRC); the payload
    is checked when the parse reaches that position. Positions that cannot
    be checked yet (fewer than 16 bytes left in the buffer) end a GARBAGE
    piece, so the next call, with more bytes, starts exactly there: that is
    what makes the outcome independent of buffer boundaries.
*/
#include "spool_record.h"

#include "crc32c.h"

#include <string.h>

void
fh_record_seal (uint8_t *header, const uint8_t *payload, uint32_t len)
{
    fh_put_u32 (header, FH_RECORD_MAGIC);
    fh_put_u32 (header + 4, len);
    fh_put_u32 (header + 8, fh_crc32c (0, payload, len));
    fh_put_u32 (header + 12, fh_crc32c (0, header, 12));
}

/* True when p[0..15] is a header that verifies; then *len is its payload
   length. */
static bool
s_header_ok (const uint8_t *p, uint32_t *len)
{
    if (fh_get_u32 (p) != FH_RECORD_MAGIC)
        return false;
    if (fh_crc32c (0, p, 12) != fh_get_u32 (p + 12))
        return false;
    uint32_t length = fh_get_u32 (p + 4);
    if (length > FH_RECORD_MAX_PAYLOAD)
        return false;
    *len = length;
    return true;
}

fh_record_status_t
fh_record_parse (const uint8_t *buf, size_t len, bool at_end, size_t *size, const uint8_t **payload,
                 uint32_t *payload_len)
{
    if (len < FH_RECORD_HEADER) {
        /* Too short for a header: wait for more, or, at the end, these
           few bytes are what is left of a torn write. */
        *size = at_end ? len : FH_RECORD_HEADER;
        return at_end ? FH_RECORD_TORN : FH_RECORD_NEED;
    }
    uint32_t length;
    if (s_header_ok (buf, &length)) {
        size_t total = FH_RECORD_HEADER + (size_t) length;
        if (len < total) {
            *size = at_end ? len : total;
            return at_end ? FH_RECORD_TORN : FH_RECORD_NEED;
        }
        *size = total;
        if (fh_crc32c (0, buf + FH_RECORD_HEADER, length) != fh_get_u32 (buf + 8))
            return FH_RECORD_BAD;
        *payload = buf + FH_RECORD_HEADER;
        *payload_len = length;
        return FH_RECORD_OK;
    }
    /* Damage: the next position with a header that verifies ends it. */
    const uint8_t first = (uint8_t) FH_RECORD_MAGIC;
    size_t i = 1;
    while (i + FH_RECORD_HEADER <= len) {
        const uint8_t *hit = memchr (buf + i, first, len - FH_RECORD_HEADER + 1 - i);
        if (!hit)
            break;
        i = (size_t) (hit - buf);
        if (s_header_ok (hit, &length)) {
            *size = i;
            return FH_RECORD_GARBAGE;
        }
        i++;
    }
    if (at_end) {
        *size = len;
        return FH_RECORD_TORN;
    }
    /* Positions from len - 15 on could not be checked: stop before them. */
    *size = len - FH_RECORD_HEADER + 1;
    return FH_RECORD_GARBAGE;
}

size_t
fh_record_message_size (const fanhub_bytes_t *frames, uint32_t frame_count)
{
    size_t size = FH_RECORD_MESSAGE_FIXED;
    for (uint32_t i = 0; i < frame_count; i++) {
        if (frames[i].size > FH_RECORD_MAX_PAYLOAD - size
            || FH_RECORD_MAX_PAYLOAD - size - frames[i].size < 4)
            return 0;
        size += 4 + frames[i].size;
    }
    return size;
}

void
fh_record_encode_message (uint8_t *out, size_t payload_size, uint64_t seq, int64_t received_wall_ns,
                          const fanhub_bytes_t *frames, uint32_t frame_count)
{
    uint8_t *payload = out + FH_RECORD_HEADER;
    payload[0] = FH_RECORD_TYPE_MESSAGE;
    payload[1] = payload[2] = payload[3] = 0;
    fh_put_u32 (payload + 4, frame_count);
    fh_put_u64 (payload + 8, seq);
    fh_put_u64 (payload + 16, (uint64_t) received_wall_ns);
    uint8_t *p = payload + FH_RECORD_MESSAGE_FIXED;
    for (uint32_t i = 0; i < frame_count; i++) {
        fh_put_u32 (p, (uint32_t) frames[i].size);
        if (frames[i].size)
            memcpy (p + 4, frames[i].data, frames[i].size);
        p += 4 + frames[i].size;
    }
    fh_record_seal (out, payload, (uint32_t) payload_size);
}

bool
fh_record_decode_message (const uint8_t *payload, size_t len, uint64_t *seq,
                          int64_t *received_wall_ns, uint32_t *frame_count, fanhub_bytes_t *frames,
                          uint32_t max_frames)
{
    if (len < FH_RECORD_MESSAGE_FIXED || payload[0] != FH_RECORD_TYPE_MESSAGE || payload[1]
        || payload[2] || payload[3])
        return false;
    uint32_t count = fh_get_u32 (payload + 4);
    if (count == 0 || count > (len - FH_RECORD_MESSAGE_FIXED) / 4)
        return false;
    size_t off = FH_RECORD_MESSAGE_FIXED;
    for (uint32_t i = 0; i < count; i++) {
        if (len - off < 4)
            return false;
        uint32_t size = fh_get_u32 (payload + off);
        off += 4;
        if (size > len - off)
            return false;
        if (i < max_frames)
            frames[i] = (fanhub_bytes_t){payload + off, size};
        off += size;
    }
    if (off != len)
        return false;
    *seq = fh_get_u64 (payload + 8);
    *received_wall_ns = (int64_t) fh_get_u64 (payload + 16);
    *frame_count = count;
    return true;
}
