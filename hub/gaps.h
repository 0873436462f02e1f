/*  gaps - publisher gap detection: what PUB/SUB lost before the hub saw it.

    A PUB socket drops messages silently at its high-water mark, and a
    subscriber that joins late misses what came first. When producers
    number their messages (fedmsg puts a per-process counter `i` in every
    body), a jump in one producer's numbers is messages lost upstream.
    With bus.gap_detection set, the enqueuer reads the counter member of
    each body that is a JSON object, finds the producer (the topic, its
    first N segments, or a JSON pointer into the body), and counts:
      lost      numbers skipped: counter - last - 1 when it jumps ahead
      restarts  a counter at or below the last one: the producer started
                over (a restart resets fedmsg's i), or messages came out
                of order; or one more than FH_GAPS_MAX_JUMP ahead of it,
                which no bus loses (a bogus or renumbered counter): not
                counted as lost, so that one bad number cannot pin lost;
                the new number is taken as the last
      untracked bodies with no usable counter or producer, or producers
                beyond max_producers (the table does not grow past it)
    Limits: several processes that share a producer key interleave their
    counters and look like restarts; a producer's first message after the
    hub starts cannot show what came before it.
    One writer, the enqueuer; the figures are read by anyone.
*/
#ifndef FH_GAPS_H_INCLUDED
#define FH_GAPS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

/* A jump ahead past this many numbers is a restart, not a loss: far more
   than a PUB socket's and the network's buffers hold. */
#define FH_GAPS_MAX_JUMP (UINT64_C (1) << 20)

typedef struct fh_gaps fh_gaps_t;

typedef struct {
    uint64_t lost;
    uint64_t restarts;
    uint64_t untracked;
    uint64_t producers;
} fh_gaps_counts_t;

/* counter: the member name; producer: "topic", "topic_prefix:N" or
   "json:/pointer" (NULL = topic). NULL when out of memory. */
fh_gaps_t *fh_gaps_new (const char *counter, const char *producer, size_t max_producers);
void fh_gaps_destroy (fh_gaps_t **self_p);
/* One well-formed bus message. */
void fh_gaps_check (fh_gaps_t *self, const void *topic, size_t topic_size, const void *body,
                    size_t body_size);
void fh_gaps_counts (fh_gaps_t *self, fh_gaps_counts_t *out);

#endif
