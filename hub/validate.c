/*  validate - is a bus message well-formed? See validate.h.

    The order of the checks is part of the contract: the malformed counters
    by reason and the operator's log line name the first check that fails,
    and the cheap counts come before the one check that reads bytes.
*/
#include "validate.h"

#include <fanhub/sdk.h>

fh_malformed_reason_t
fh_bus_check (size_t frames_seen, size_t total_bytes, const void *topic, size_t topic_size,
              size_t max_frames, size_t max_message_bytes)
{
    if (frames_seen < 2)
        return FH_MALFORMED_NO_BODY;
    if (frames_seen > max_frames)
        return FH_MALFORMED_TOO_MANY_FRAMES;
    if (total_bytes > max_message_bytes)
        return FH_MALFORMED_TOO_LARGE;
    /* An empty topic is valid UTF-8, and may come as NULL: NULL + 0 is
       undefined in C, so it never reaches the validator. */
    if (topic_size > 0 && !fanhub_utf8_valid (topic, topic_size))
        return FH_MALFORMED_TOPIC_NOT_UTF8;
    return FH_MALFORMED_REASONS;
}
