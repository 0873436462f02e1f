/*  control_parse - what a control request asks for, or why it is refused.

    A pure parser of the frames of one request (after the envelope), so
    that the rules are unit-tested and fuzzed apart from the socket. The
    control actor (control.c) answers a refusal with the text as it is, and
    runs an accepted request. Requests (control.h has their answers):

      PING                                          no arguments
      STATS                                         no arguments
      METRICS                                       no arguments
      RELOAD                                        no arguments
      HEALTH, READY, STATUS                         no arguments
      EMIT, wait|nowait, TIMEOUT_MS, topic, body[, frames...]
      INJECT, consumer, topic, body[, frames...]
      PAUSE, consumer / RESUME, consumer / RESTART, consumer

    The command word is matched byte for byte (case matters). TIMEOUT_MS is
    1 to 15 ASCII digits, no sign and no blanks, worth at most
    FH_CONTROL_TIMEOUT_MAX_MS. Whether the consumer of an INJECT exists is
    not the parser's business: it names the frame, the hub looks it up.
*/
#ifndef FH_CONTROL_PARSE_H_INCLUDED
#define FH_CONTROL_PARSE_H_INCLUDED

#include "control.h"
#include "fanhub/consumer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The command words, as error answers list them. */
#define FH_CONTROL_COMMANDS                                                                        \
    "PING, STATS, METRICS, EMIT, INJECT, RELOAD, HEALTH, READY, STATUS, PAUSE, RESUME, RESTART"
/* The longest EMIT timeout: one day. */
#define FH_CONTROL_TIMEOUT_MAX_MS 86400000

typedef enum {
    FH_CONTROL_PING,
    FH_CONTROL_STATS,
    FH_CONTROL_METRICS,
    FH_CONTROL_EMIT,
    FH_CONTROL_INJECT,
    FH_CONTROL_RELOAD,
    FH_CONTROL_HEALTH, /* liveness (health.h) */
    FH_CONTROL_READY,  /* readiness (health.h) */
    FH_CONTROL_STATUS, /* the status page's JSON (status.h) */
    FH_CONTROL_PAUSE,  /* one consumer's delivery stops (fanhub pause) */
    FH_CONTROL_RESUME, /* ... and goes on */
    FH_CONTROL_RESTART /* one consumer gets a new instance (fanhub restart) */
} fh_control_kind_t;

typedef struct {
    fh_control_kind_t kind;
    bool wait;          /* EMIT: "wait" (true) or "nowait" */
    int64_t timeout_ms; /* EMIT: 0..FH_CONTROL_TIMEOUT_MAX_MS; else 0 */
    size_t consumer;    /* INJECT, PAUSE, RESUME, RESTART: index of the
                           consumer-name frame (1); else 0 */
    size_t message;     /* EMIT, INJECT: index of the first message frame, the
                           topic (EMIT 3, INJECT 2; the body follows it);
                           else 0 */
} fh_control_request_t;

/* Parses frames[0..count-1]: the command word, then its arguments. On
   success returns 0 and fills *out; every index in it is < count. On a
   refusal returns -1 and writes the answer the hub sends to err: one line
   of printable ASCII starting "ERROR " (cut to errlen - 1 bytes; err may
   be NULL when errlen is 0); *out is then zeroed. The frames are read,
   never kept: their bytes need not outlive the call. frames may be NULL
   when count is 0. */
int fh_control_parse (const fanhub_bytes_t *frames, size_t count, fh_control_request_t *out,
                      char *err, size_t errlen);

/* Writes bytes as they are safe to show in an answer: printable ASCII
   kept, anything else as '?', at most room - 4 characters and then "..."
   when cut; always NUL-terminated (room >= 1). The unknown-command answer
   shows the word with room 48 (44 characters); control.c shows an unknown
   INJECT consumer with it too. */
void fh_control_show (const void *data, size_t size, char *shown, size_t room);

#endif
