/*  fuzz_bus_message - libFuzzer target for fh_bus_check, the enqueuer's
    test of whether a bus message is well-formed.

    Self-contained; build and run from the repository root:

      clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
          -Ihub -Ihub/metrics -Ihub/storage -Iinclude tests/fuzz/fuzz_bus_message.c hub/validate.c \
          -o /tmp/fuzz_bus_message
      /tmp/fuzz_bus_message -max_total_time=60 $(mktemp -d) tests/fuzz/corpus/bus_message/

    (libFuzzer writes what it finds into the first directory: a scratch
    one keeps the seeds as they are, as ctest's fuzz.bus_message does.)

    Sources needed: this file and hub/validate.c (validate.h includes
    enqueuer.h, whose headers want zmq.h and jansson.h on the include path:
    add $(pkg-config --cflags libzmq jansson) where they are not in
    /usr/include; nothing of them is linked). It also builds with the
    project's -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE and
    warning flags.

    An input is a 4-byte header and the frames:

        byte 0      bus.max_frames (0..255; the config allows 2..1024, the
                    function must not care)
        bytes 1..2  bus.max_message_bytes, u16 little-endian
        byte 3      the separator
        the rest    the frames, split at every separator byte: nothing is
                    no frame at all, "a" one frame, "a|" two ("a" and "")

    Checked for every input:

    1. fh_bus_check gives what a reference written here gives: the same
       checks in the same order, with a UTF-8 validator of its own that
       decodes each code point and judges its value (shortest form, not a
       surrogate, at most U+10FFFF), where fanhub_utf8_valid judges lead and second
       bytes by range. Two formulations of RFC 3629 that must agree.
    2. The topic is handed over in a buffer of exactly its size (NULL with
       no frames), so ASan catches a read past it; the answer is one of
       the reasons or FH_MALFORMED_REASONS.
*/
#include "validate.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
s_check (bool ok, const char *what)
{
    if (!ok) {
        fprintf (stderr, "fuzz_bus_message: %s\n", what);
        abort ();
    }
}

/* RFC 3629 by decoding: the length from the lead byte's high bits, the
   continuation bytes by their 10xxxxxx form, then the code point's value
   judged. */
static bool
s_reference_utf8 (const uint8_t *s, size_t size)
{
    size_t i = 0;
    while (i < size) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp, least;
        if ((c & 0x80) == 0) {
            i++;
            continue;
        }
        else if ((c & 0xE0) == 0xC0)
            len = 2, cp = c & 0x1F, least = 0x80;
        else if ((c & 0xF0) == 0xE0)
            len = 3, cp = c & 0x0F, least = 0x800;
        else if ((c & 0xF8) == 0xF0)
            len = 4, cp = c & 0x07, least = 0x10000;
        else
            return false; /* a continuation byte, or F8..FF */
        if (size - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < least || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            return false;
        i += len;
    }
    return true;
}

static fh_malformed_reason_t
s_reference (size_t frames, size_t bytes, const uint8_t *topic, size_t topic_size,
             size_t max_frames, size_t max_bytes)
{
    if (frames < 2)
        return FH_MALFORMED_NO_BODY;
    if (frames > max_frames)
        return FH_MALFORMED_TOO_MANY_FRAMES;
    if (bytes > max_bytes)
        return FH_MALFORMED_TOO_LARGE;
    if (!s_reference_utf8 (topic, topic_size))
        return FH_MALFORMED_TOPIC_NOT_UTF8;
    return FH_MALFORMED_REASONS;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t max_frames = data[0];
    size_t max_bytes = (size_t) data[1] | (size_t) data[2] << 8;
    uint8_t separator = data[3];
    const uint8_t *rest = data + 4;
    size_t rest_size = size - 4;

    /* Count the frames and their bytes as the enqueuer does (every frame
       seen, however many it keeps); frame 0 is the topic. */
    size_t frames = 0, bytes = 0, topic_size = 0;
    if (rest_size > 0) {
        frames = 1;
        for (size_t i = 0; i < rest_size; i++) {
            if (rest[i] == separator) {
                frames++;
                continue;
            }
            bytes++;
            if (frames == 1)
                topic_size++;
        }
    }
    uint8_t *topic = NULL;
    if (frames > 0) {
        topic = malloc (topic_size ? topic_size : 1);
        s_check (topic != NULL, "out of memory");
        if (topic_size)
            memcpy (topic, rest, topic_size);
    }

    fh_malformed_reason_t got
        = fh_bus_check (frames, bytes, topic, topic_size, max_frames, max_bytes);
    fh_malformed_reason_t expected
        = s_reference (frames, bytes, topic, topic_size, max_frames, max_bytes);
    s_check (got <= FH_MALFORMED_REASONS, "not a reason");
    if (got != expected) {
        fprintf (stderr,
                 "fuzz_bus_message: %zu frames, %zu bytes, topic of %zu, limits %zu "
                 "and %zu: got %d, the reference says %d\n",
                 frames, bytes, topic_size, max_frames, max_bytes, (int) got, (int) expected);
        abort ();
    }
    /* The topic alone, with counts that pass: straight at the validator. */
    if (topic) {
        got = fh_bus_check (2, 0, topic, topic_size, 2, 0);
        s_check (got
                     == (s_reference_utf8 (topic, topic_size) ? FH_MALFORMED_REASONS
                                                              : FH_MALFORMED_TOPIC_NOT_UTF8),
                 "topic validation differs from the reference");
    }
    free (topic);
    return 0;
}
