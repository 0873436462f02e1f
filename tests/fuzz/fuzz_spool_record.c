/*  fuzz_spool_record - libFuzzer target for the spool's record reader.

    Self-contained; build and run from the repository root:

      clang -g -O1 -fsanitize=fuzzer,address -Ihub -Ihub/metrics -Ihub/storage -Iinclude \
          tests/fuzz/fuzz_spool_record.c hub/storage/spool.c hub/storage/spool_segment.c \
          hub/storage/spool_cursor.c hub/storage/spool_record.c hub/storage/crc32c.c \
          hub/util/log.c hub/util/fs.c -lpthread -o /tmp/fuzz_spool
      /tmp/fuzz_spool -max_total_time=60 tests/fuzz/corpus/spool_record/

    Sources needed: this file, hub/storage/spool.c, hub/storage/spool_segment.c,
    hub/storage/spool_cursor.c, hub/storage/spool_record.c,
    hub/storage/crc32c.c, hub/util/log.c, hub/util/fs.c (it also builds with the project's -std=c11
    -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE and warning flags).

    An input is one mode byte, then either the bytes of one segment file
    (mode even) or a list of payloads that the target frames into a segment
    with correct checksums (mode odd; see s_frame_payloads: mutations
    rarely get a CRC right, so this is how the fuzzer reaches the message
    decoder and the reader's record path). The segment goes through:

    1. fh_record_parse, the one parsing function of the reader and of the
       start-up scan, over the whole segment at once and again through a
       small window refilled on FH_RECORD_NEED as the reader refills its
       buffer. Both must report the same records and damage at the same
       offsets (what lets the scan and the reader count damage once),
       always make progress, and never point outside the bytes; every
       record's message decode must stay inside its payload.
    2. The real spool: the segment written as seg-0000000000000001.spool
       in a scratch directory, opened (scan and repair), read to the end
       (every frame byte touched), consumed, closed and opened again. The
       records and damage it counts must be those of step 1; reading must
       find no damage the scan did not; the reopened spool must be empty
       and clean.

    The seed corpus (tests/fuzz/corpus/spool_record/) holds segments written
    by the spool itself (mode 0): intact ones, empty, cut inside a record's
    payload and inside a header, a flipped byte in a length and in a
    payload; and payload lists (mode 1), one with a flip.
*/
#include "log.h"
#include "spool.h"
#include "spool_record.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    size_t ok, damage; /* records delivered, damage counted */
    size_t *offsets;   /* of each record and each damage start, in order */
    size_t count;
} s_events_t;

static char s_dir[256];

static void
s_remove_dir (void)
{
    DIR *dir = opendir (s_dir);
    if (!dir)
        return;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (entry->d_name[0] != '.') {
            char path[512];
            snprintf (path, sizeof path, "%s/%s", s_dir, entry->d_name);
            unlink (path);
        }
    closedir (dir);
    rmdir (s_dir);
}

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
    (void) argc;
    (void) argv;
    /* The spool warns about every damaged record: quiet, or the log is
       all there is to see. */
    fh_log_set_level ((fanhub_log_level_t) 0);
    const char *base = access ("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf (s_dir, sizeof s_dir, "%s/fuzz_spool.XXXXXX", base);
    if (!mkdtemp (s_dir))
        abort ();
    atexit (s_remove_dir);
    return 0;
}

/* Parses data[0..size-1] as a segment, seeing at most `window` bytes at a
   time (0 = all), as the spool's reader does. */
static void
s_parse (const uint8_t *data, size_t size, size_t window, s_events_t *events)
{
    memset (events, 0, sizeof *events);
    events->offsets = malloc ((size + 1) * sizeof *events->offsets);
    size_t off = 0, avail = 0;
    bool in_region = false;
    for (;;) {
        if (window == 0)
            avail = size - off;
        else if (avail == 0)
            avail = window < size - off ? window : size - off;
        bool at_end = off + avail == size;
        size_t step = 0;
        const uint8_t *payload = NULL;
        uint32_t payload_len = 0;
        fh_record_status_t status = fh_record_parse (avail ? data + off : NULL, avail, at_end,
                                                     &step, &payload, &payload_len);
        if (status == FH_RECORD_NEED) {
            if (at_end || step <= avail)
                abort (); /* NEED only for more than there is, never at the end */
            avail = step < size - off ? step : size - off;
            continue;
        }
        if (status == FH_RECORD_TORN) {
            if (!at_end || step != avail)
                abort ();
            if (step > 0 && !in_region) {
                events->damage++;
                events->offsets[events->count++] = off;
            }
            return;
        }
        if (step == 0 || step > avail)
            abort (); /* progress, inside what was seen */
        bool damage = status == FH_RECORD_BAD;
        if (status == FH_RECORD_OK) {
            if (payload != data + off + FH_RECORD_HEADER || payload_len + FH_RECORD_HEADER != step)
                abort ();
            uint64_t seq;
            int64_t wall;
            uint32_t count;
            fanhub_bytes_t frames[8];
            /* A verified record that is not a message of at least two
               frames (topic, body) is damage to the spool too. */
            if (fh_record_decode_message (payload, payload_len, &seq, &wall, &count, frames, 8)
                && count >= 2) {
                for (uint32_t i = 0; i < count && i < 8; i++) {
                    const uint8_t *p = frames[i].data;
                    if (p < payload || p + frames[i].size > payload + payload_len)
                        abort ();
                }
                events->ok++;
                events->offsets[events->count++] = off;
            }
            else
                damage = true;
            in_region = false;
        }
        if (damage) {
            events->damage++;
            events->offsets[events->count++] = off;
            in_region = false;
        }
        if (status == FH_RECORD_GARBAGE && !in_region) {
            events->damage++;
            events->offsets[events->count++] = off;
            in_region = true;
        }
        off += step;
        avail = window == 0 || step >= avail ? 0 : avail - step;
    }
}

static void
s_spool (const uint8_t *data, size_t size, const s_events_t *expected)
{
    char path[512];
    snprintf (path, sizeof path, "%s/seg-0000000000000001.spool", s_dir);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (size && write (fd, data, size) != (ssize_t) size))
        abort ();
    close (fd);

    char err[512];
    uint64_t corrupt = 0;
    fh_spool_t *spool = fh_spool_open (s_dir, NULL, &corrupt, err, sizeof err);
    if (!spool) {
        fprintf (stderr, "fh_spool_open: %s\n", err);
        abort ();
    }
    if (corrupt != expected->damage || fh_spool_records (spool) != expected->ok)
        abort ();
    fh_spool_record_t rec;
    size_t read = 0;
    int rc;
    volatile uint8_t sink = 0;
    while ((rc = fh_spool_read (spool, &rec)) == 1) {
        if (rec.frame_count == 0)
            abort ();
        /* Touch every byte of every frame: ASan checks them. */
        for (uint32_t i = 0; i < rec.frame_count; i++)
            for (size_t k = 0; k < rec.frames[i].size; k++)
                sink ^= ((const uint8_t *) rec.frames[i].data)[k];
        read++;
    }
    (void) sink;
    if (rc != 0 || read != expected->ok || fh_spool_corrupt (spool) != corrupt)
        abort ();
    fh_spool_consumed (spool);
    fh_spool_close (&spool);

    spool = fh_spool_open (s_dir, NULL, &corrupt, err, sizeof err);
    if (!spool || corrupt != 0 || fh_spool_records (spool) != 0 || fh_spool_read (spool, &rec) != 0)
        abort ();
    fh_spool_close (&spool);

    /* Leave the directory empty for the next input. */
    DIR *dir = opendir (s_dir);
    struct dirent *entry;
    while (dir && (entry = readdir (dir)))
        if (entry->d_name[0] != '.') {
            snprintf (path, sizeof path, "%s/%s", s_dir, entry->d_name);
            unlink (path);
        }
    if (dir)
        closedir (dir);
}

/* Checks one segment's bytes both ways. */
static void
s_check_segment (const uint8_t *data, size_t size)
{
    s_events_t whole, windowed;
    s_parse (data, size, 0, &whole);
    /* A window from 1 byte up, so headers and payloads get cut anywhere. */
    size_t window = 1 + (size * 7919) % 97;
    s_parse (data, size, window, &windowed);
    if (whole.ok != windowed.ok || whole.damage != windowed.damage || whole.count != windowed.count
        || memcmp (whole.offsets, windowed.offsets, whole.count * sizeof *whole.offsets) != 0)
        abort ();
    s_spool (data, size, &whole);
    free (whole.offsets);
    free (windowed.offsets);
}

/* Frames a list of payloads (u16 length, little-endian, then the bytes;
   the last may be short) into a segment with correct checksums. A 0
   length ends the list; the u16 after it, if any, names an offset where
   one byte of the framed segment is flipped. */
static uint8_t *
s_frame_payloads (const uint8_t *data, size_t size, size_t *out_size)
{
    uint8_t *out = malloc (size / 2 * FH_RECORD_HEADER + size + 1);
    size_t n = 0, i = 0;
    while (i + 2 <= size) {
        size_t len = (size_t) data[i] | (size_t) data[i + 1] << 8;
        i += 2;
        if (len == 0) {
            if (i + 2 <= size && n > 0) {
                size_t at = ((size_t) data[i] | (size_t) data[i + 1] << 8) % n;
                out[at] ^= 0x20;
            }
            break;
        }
        if (len > size - i)
            len = size - i;
        memcpy (out + n + FH_RECORD_HEADER, data + i, len);
        fh_record_seal (out + n, out + n + FH_RECORD_HEADER, (uint32_t) len);
        n += FH_RECORD_HEADER + len;
        i += len;
    }
    *out_size = n;
    return out;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size == 0 || size > 1 << 20)
        return 0;
    /* The decoder on raw bytes: it must never point outside them. */
    uint64_t seq;
    int64_t wall;
    uint32_t count;
    fanhub_bytes_t frames[4];
    if (fh_record_decode_message (data + 1, size - 1, &seq, &wall, &count, frames, 4))
        for (uint32_t i = 0; i < count && i < 4; i++)
            if ((const uint8_t *) frames[i].data < data + 1
                || (const uint8_t *) frames[i].data + frames[i].size > data + size)
                abort ();
    if (data[0] & 1) {
        size_t framed_size;
        uint8_t *framed = s_frame_payloads (data + 1, size - 1, &framed_size);
        s_check_segment (framed, framed_size);
        free (framed);
    }
    else
        s_check_segment (data + 1, size - 1);
    return 0;
}
