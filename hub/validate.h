/*  validate - is a bus message well-formed? The enqueuer's checks as one
    pure function, so that they can be unit-tested, fuzzed and reused.

    A bus message is well-formed when it has a body (at least two frames:
    topic, body), at most bus.max_frames frames, at most
    bus.max_message_bytes bytes in all its frames together, and a topic
    (frame 0) that is strict UTF-8 (fanhub_utf8_valid, fanhub/sdk.h). The checks run in that
    order and the first that fails is the reason: a message of one
    non-UTF-8 frame is no_body, a message over both limits is
    too_many_frames.
*/
#ifndef FH_VALIDATE_H_INCLUDED
#define FH_VALIDATE_H_INCLUDED

#include "enqueuer.h"

#include <stddef.h>

/* Checks a message of frames_seen frames, total_bytes bytes in all of
   them, whose frame 0 is topic[0..topic_size-1]. Returns
   FH_MALFORMED_REASONS when it is well-formed, else why it is not.

   The counts are of everything that arrived: a receiver that keeps only
   the first max_frames frames still counts the rest. The topic is read
   only when the counts pass, so it may be NULL when frames_seen is 0 (or
   topic_size is 0). Pure: no state, no allocation, safe from any thread. */
fh_malformed_reason_t fh_bus_check (size_t frames_seen, size_t total_bytes, const void *topic,
                                    size_t topic_size, size_t max_frames, size_t max_message_bytes);

#endif
