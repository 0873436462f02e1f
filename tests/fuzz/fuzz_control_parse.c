/*  fuzz_control_parse - libFuzzer target for fh_control_parse, the
    parser of a control request (anyone who reaches the control socket
    writes its input).

    Self-contained; build and run from the repository root:

      clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
          -Ihub -Ihub/metrics -Ihub/storage -Iinclude tests/fuzz/fuzz_control_parse.c hub/control/control_parse.c \
          -o /tmp/fuzz_control_parse
      /tmp/fuzz_control_parse -max_total_time=60 $(mktemp -d) tests/fuzz/corpus/control_parse/

    (libFuzzer writes what it finds into the first directory: a scratch
    one keeps the seeds as they are, as ctest's fuzz.control_parse does.)

    Sources needed: this file and hub/control/control_parse.c (control_parse.h
    includes control.h, whose headers want zmq.h and jansson.h on the
    include path: add $(pkg-config --cflags libzmq jansson) where they are
    not in /usr/include; nothing of them is linked). It also builds with
    the project's -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE and
    warning flags.

    An input is one separator byte, then the request's frames split at
    every separator: nothing after it is no frame at all, "PING" one frame,
    "PING|" two ("PING" and ""). The seed corpus
    (tests/fuzz/corpus/control_parse/) has every command, right and wrong,
    with '\n' as the separator, and a command word past
    FH_CONTROL_MAX_COMMAND (which also lets libFuzzer's -max_len grow past
    it). Each frame gets a buffer of exactly its size (an empty one is
    NULL), so ASan catches a read past any of them. Checked for every input:

    1. On success: the kind is one of the five; every index is < count
       (the topic's and the body's, message and message + 1, included);
       the fields match the frames (the word, wait|nowait, the timeout's
       digits and range); err is empty.
    2. On a refusal: err is one line of printable ASCII starting "ERROR ",
       it is the line a reference parser written here expects, and *out is
       zeroed.
    3. With a short buffer (exactly errlen bytes) the answer is the same
       and err holds the start of the line; with none (NULL, 0) the answer
       is the same too.
*/
#include "control_parse.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMMANDS                                                                                   \
    " (commands: PING, STATS, METRICS, EMIT, INJECT, RELOAD, HEALTH, READY, STATUS, PAUSE, "       \
    "RESUME, RESTART)"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
s_check (bool ok, const char *what)
{
    if (!ok) {
        fprintf (stderr, "fuzz_control_parse: %s\n", what);
        abort ();
    }
}

static bool
s_word (const fanhub_bytes_t *frame, const char *word)
{
    size_t len = strlen (word);
    return frame->size == len && memcmp (frame->data, word, len) == 0;
}

/* The timeout rule as documented: 1 to 15 digits, at most a day. */
static bool
s_timeout_ok (const fanhub_bytes_t *frame, int64_t *value)
{
    if (frame->size < 1 || frame->size > 15)
        return false;
    const char *d = frame->data;
    *value = 0;
    for (size_t i = 0; i < frame->size; i++) {
        if (d[i] < '0' || d[i] > '9')
            return false;
        *value = *value * 10 + (d[i] - '0');
    }
    return *value <= 86400000;
}

/* What the hub answers a refused request with, from the rules in
   control_parse.h; "" when the request is fine. */
static void
s_reference (const fanhub_bytes_t *frames, size_t count, char *line, size_t room)
{
    int64_t timeout;
    line[0] = '\0';
    if (count == 0 || frames[0].size == 0)
        snprintf (line, room, "ERROR empty command" COMMANDS);
    else if (frames[0].size > FH_CONTROL_MAX_COMMAND)
        snprintf (line, room, "ERROR command of %zu bytes, at most %d", frames[0].size,
                  FH_CONTROL_MAX_COMMAND);
    else if ((s_word (&frames[0], "PING") || s_word (&frames[0], "STATS")
              || s_word (&frames[0], "METRICS") || s_word (&frames[0], "RELOAD")
              || s_word (&frames[0], "HEALTH") || s_word (&frames[0], "READY")
              || s_word (&frames[0], "STATUS"))
             && count > 1)
        snprintf (line, room,
                  "ERROR PING, STATS, METRICS, RELOAD, HEALTH, READY and STATUS take no arguments "
                  "(a request is one frame)");
    else if (s_word (&frames[0], "EMIT")
             && (count < 5 || (!s_word (&frames[1], "wait") && !s_word (&frames[1], "nowait"))
                 || !s_timeout_ok (&frames[2], &timeout)))
        snprintf (line, room,
                  "ERROR usage: EMIT, wait|nowait, TIMEOUT_MS, topic, body[, "
                  "frames...]");
    else if (s_word (&frames[0], "INJECT") && count < 4)
        snprintf (line, room, "ERROR usage: INJECT, consumer, topic, body[, frames...]");
    else if ((s_word (&frames[0], "PAUSE") || s_word (&frames[0], "RESUME")
              || s_word (&frames[0], "RESTART"))
             && count != 2)
        snprintf (line, room, "ERROR usage: PAUSE|RESUME|RESTART, consumer");
    else if (!s_word (&frames[0], "PING") && !s_word (&frames[0], "STATS")
             && !s_word (&frames[0], "METRICS") && !s_word (&frames[0], "RELOAD")
             && !s_word (&frames[0], "EMIT") && !s_word (&frames[0], "INJECT")
             && !s_word (&frames[0], "HEALTH") && !s_word (&frames[0], "READY")
             && !s_word (&frames[0], "STATUS") && !s_word (&frames[0], "PAUSE")
             && !s_word (&frames[0], "RESUME") && !s_word (&frames[0], "RESTART")) {
        /* The word: 44 characters shown at most, then "..." if cut. */
        char shown[48];
        size_t n = 0;
        const unsigned char *w = frames[0].data;
        for (; n < frames[0].size && n < 44; n++)
            shown[n] = w[n] >= ' ' && w[n] <= '~' ? (char) w[n] : '?';
        if (frames[0].size > 44) {
            memcpy (shown + n, "...", 3);
            n += 3;
        }
        shown[n] = '\0';
        snprintf (line, room, "ERROR unknown command '%s'" COMMANDS, shown);
    }
}

static void
s_check_accepted (const fanhub_bytes_t *frames, size_t count, const fh_control_request_t *out)
{
    int64_t timeout = -1;
    switch (out->kind) {
    case FH_CONTROL_PING:
    case FH_CONTROL_STATS:
    case FH_CONTROL_METRICS:
    case FH_CONTROL_RELOAD:
    case FH_CONTROL_HEALTH:
    case FH_CONTROL_READY:
    case FH_CONTROL_STATUS:
        s_check (count == 1, "no-argument command with arguments");
        s_check (s_word (&frames[0], out->kind == FH_CONTROL_PING      ? "PING"
                                     : out->kind == FH_CONTROL_STATS   ? "STATS"
                                     : out->kind == FH_CONTROL_METRICS ? "METRICS"
                                     : out->kind == FH_CONTROL_HEALTH  ? "HEALTH"
                                     : out->kind == FH_CONTROL_READY   ? "READY"
                                     : out->kind == FH_CONTROL_STATUS  ? "STATUS"
                                                                       : "RELOAD"),
                 "kind is not the word");
        s_check (!out->wait && out->timeout_ms == 0 && out->consumer == 0 && out->message == 0,
                 "fields set for a no-argument command");
        break;
    case FH_CONTROL_EMIT:
        s_check (s_word (&frames[0], "EMIT"), "kind is not the word");
        s_check (count >= 5 && out->message == 3 && out->message + 1 < count,
                 "EMIT message index past the frames");
        s_check (out->consumer == 0, "EMIT with a consumer index");
        s_check (out->wait ? s_word (&frames[1], "wait") : s_word (&frames[1], "nowait"),
                 "EMIT wait flag is not the frame");
        s_check (s_timeout_ok (&frames[2], &timeout) && timeout == out->timeout_ms,
                 "EMIT timeout is not the frame's digits");
        s_check (out->timeout_ms >= 0 && out->timeout_ms <= FH_CONTROL_TIMEOUT_MAX_MS,
                 "EMIT timeout out of range");
        break;
    case FH_CONTROL_INJECT:
        s_check (s_word (&frames[0], "INJECT"), "kind is not the word");
        s_check (count >= 4 && out->consumer == 1 && out->message == 2 && out->message + 1 < count
                     && out->consumer < count,
                 "INJECT index past the frames");
        s_check (!out->wait && out->timeout_ms == 0, "INJECT with EMIT fields");
        break;
    case FH_CONTROL_PAUSE:
    case FH_CONTROL_RESUME:
    case FH_CONTROL_RESTART:
        s_check (s_word (&frames[0], out->kind == FH_CONTROL_PAUSE    ? "PAUSE"
                                     : out->kind == FH_CONTROL_RESUME ? "RESUME"
                                                                      : "RESTART"),
                 "kind is not the word");
        s_check (count == 2 && out->consumer == 1 && out->message == 0,
                 "consumer command index past the frames");
        s_check (!out->wait && out->timeout_ms == 0, "consumer command with EMIT fields");
        break;
    default: s_check (false, "kind out of range");
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t separator = data[0];
    const uint8_t *rest = data + 1;
    size_t rest_size = size - 1;

    size_t count = rest_size ? 1 : 0;
    for (size_t i = 0; i < rest_size; i++)
        count += rest[i] == separator;
    fanhub_bytes_t *frames = calloc (count ? count : 1, sizeof *frames);
    s_check (frames != NULL, "out of memory");
    size_t start = 0, k = 0;
    for (size_t i = 0; i <= rest_size && rest_size; i++)
        if (i == rest_size || rest[i] == separator) {
            size_t len = i - start;
            void *copy = len ? malloc (len) : NULL;
            s_check (len == 0 || copy != NULL, "out of memory");
            if (len)
                memcpy (copy, rest + start, len);
            frames[k++] = (fanhub_bytes_t){copy, len};
            start = i + 1;
        }
    s_check (k == count, "frame split");

    fh_control_request_t out;
    memset (&out, 0x5a, sizeof out);
    char err[512];
    memset (err, 'Z', sizeof err);
    int rc = fh_control_parse (count ? frames : NULL, count, &out, err, sizeof err);
    s_check (rc == 0 || rc == -1, "neither 0 nor -1");
    char expected[512];
    s_reference (frames, count, expected, sizeof expected);
    if (rc == 0) {
        s_check (err[0] == '\0', "accepted, but err is set");
        s_check (expected[0] == '\0', "accepted, but the reference refuses");
        s_check_accepted (frames, count, &out);
    }
    else {
        size_t len = strnlen (err, sizeof err);
        s_check (len < sizeof err, "err not NUL-terminated");
        s_check (strncmp (err, "ERROR ", 6) == 0, "err does not start with 'ERROR '");
        for (size_t i = 0; i < len; i++)
            s_check (err[i] >= 0x20 && err[i] <= 0x7e, "err is not one printable line");
        if (strcmp (err, expected) != 0) {
            fprintf (stderr, "fuzz_control_parse: got '%s', the reference says '%s'\n", err,
                     expected);
            abort ();
        }
        s_check (out.kind == 0 && !out.wait && out.timeout_ms == 0 && out.consumer == 0
                     && out.message == 0,
                 "out not zeroed on a refusal");
    }

    /* A short buffer of exactly errlen bytes: ASan sees any write past it. */
    size_t errlen = 1 + (size * 31) % 64;
    char *shortbuf = malloc (errlen);
    s_check (shortbuf != NULL, "out of memory");
    fh_control_request_t again;
    s_check (fh_control_parse (count ? frames : NULL, count, &again, shortbuf, errlen) == rc,
             "another answer with a short buffer");
    s_check (strlen (shortbuf) < errlen, "short err not NUL-terminated");
    s_check (strncmp (shortbuf, rc ? err : "", strlen (shortbuf)) == 0
                 && strlen (shortbuf)
                        == (rc ? (strlen (err) < errlen ? strlen (err) : errlen - 1) : 0),
             "short err is not the start of the line");
    s_check (again.kind == out.kind && again.wait == out.wait && again.timeout_ms == out.timeout_ms
                 && again.consumer == out.consumer && again.message == out.message,
             "another request with a short buffer");
    free (shortbuf);
    s_check (fh_control_parse (count ? frames : NULL, count, &again, NULL, 0) == rc,
             "another answer without a buffer");

    for (size_t i = 0; i < count; i++)
        free ((void *) frames[i].data);
    free (frames);
    return 0;
}
