/*  control_parse - what a control request asks for. See control_parse.h.

    The answers are the ones the hub gave before the parser was split out
    of control.c, word for word (clients and scripts match on them), but
    for TIMEOUT_MS, which strtoll used to read with a sign, blanks or a NUL
    in it. A request comes from anyone who can
    reach the control socket, so nothing of it is trusted: frames may be
    empty, huge or binary, and what is echoed back goes through
    fh_control_show.
*/
#include "control_parse.h"

#include <stdio.h>
#include <string.h>

/* Room for the word in the unknown-command answer: 44 characters, "..."
   when cut, and the NUL (see fh_control_show). */
#define S_SHOW_COMMAND 48
/* As many digits as the hub ever read (a frame under 16 bytes); and
   10^15 is far inside int64_t, so no overflow to guard against. */
#define S_TIMEOUT_DIGITS_MAX 15

static const char s_emit_usage[]
    = "ERROR usage: EMIT, wait|nowait, TIMEOUT_MS, topic, body[, frames...]";
static const char s_inject_usage[] = "ERROR usage: INJECT, consumer, topic, body[, frames...]";
static const char s_consumer_usage[] = "ERROR usage: PAUSE|RESUME|RESTART, consumer";

static bool
s_is (const fanhub_bytes_t *frame, const char *word)
{
    size_t len = strlen (word);
    return frame->size == len && memcmp (frame->data, word, len) == 0;
}

/* A TIMEOUT_MS frame: digits only, so " 5", "+5", "-0" and "5\0" are
   refused rather than read the way strtoll happens to read them. */
static bool
s_timeout (const fanhub_bytes_t *frame, int64_t *timeout_ms)
{
    if (frame->size == 0 || frame->size > S_TIMEOUT_DIGITS_MAX)
        return false;
    const unsigned char *digits = frame->data;
    int64_t value = 0;
    for (size_t i = 0; i < frame->size; i++) {
        if (digits[i] < '0' || digits[i] > '9')
            return false;
        value = value * 10 + (digits[i] - '0');
    }
    if (value > FH_CONTROL_TIMEOUT_MAX_MS)
        return false;
    *timeout_ms = value;
    return true;
}

/* err gets the text, cut to fit; -1 to return. */
static int
s_refuse (char *err, size_t errlen, const char *text)
{
    if (err && errlen)
        snprintf (err, errlen, "%s", text);
    return -1;
}

void
fh_control_show (const void *data, size_t size, char *shown, size_t room)
{
    const unsigned char *bytes = data;
    size_t n = 0;
    for (size_t i = 0; i < size && n + 4 < room; i++)
        shown[n++] = bytes[i] >= 0x20 && bytes[i] < 0x7f ? (char) bytes[i] : '?';
    if (n < size && n + 4 <= room) {
        memcpy (shown + n, "...", 3);
        n += 3;
    }
    shown[n] = '\0';
}

int
fh_control_parse (const fanhub_bytes_t *frames, size_t count, fh_control_request_t *out, char *err,
                  size_t errlen)
{
    memset (out, 0, sizeof *out);
    if (err && errlen)
        err[0] = '\0';
    if (count == 0 || frames[0].size == 0)
        return s_refuse (err, errlen, "ERROR empty command (commands: " FH_CONTROL_COMMANDS ")");
    if (frames[0].size > FH_CONTROL_MAX_COMMAND) {
        if (err && errlen)
            snprintf (err, errlen, "ERROR command of %zu bytes, at most %d", frames[0].size,
                      FH_CONTROL_MAX_COMMAND);
        return -1;
    }

    fh_control_request_t request = {0};
    if (s_is (&frames[0], "PING") || s_is (&frames[0], "STATS") || s_is (&frames[0], "METRICS")
        || s_is (&frames[0], "RELOAD") || s_is (&frames[0], "HEALTH") || s_is (&frames[0], "READY")
        || s_is (&frames[0], "STATUS")) {
        if (count != 1)
            return s_refuse (err, errlen,
                             "ERROR PING, STATS, METRICS, RELOAD, HEALTH, READY and STATUS take no "
                             "arguments (a request "
                             "is one frame)");
        request.kind = s_is (&frames[0], "PING")      ? FH_CONTROL_PING
                       : s_is (&frames[0], "STATS")   ? FH_CONTROL_STATS
                       : s_is (&frames[0], "METRICS") ? FH_CONTROL_METRICS
                       : s_is (&frames[0], "HEALTH")  ? FH_CONTROL_HEALTH
                       : s_is (&frames[0], "READY")   ? FH_CONTROL_READY
                       : s_is (&frames[0], "STATUS")  ? FH_CONTROL_STATUS
                                                      : FH_CONTROL_RELOAD;
    }
    else if (s_is (&frames[0], "EMIT")) {
        /* EMIT, wait|nowait, TIMEOUT_MS, topic, body, more frames */
        if (count < 5 || !(s_is (&frames[1], "wait") || s_is (&frames[1], "nowait"))
            || !s_timeout (&frames[2], &request.timeout_ms))
            return s_refuse (err, errlen, s_emit_usage);
        request.kind = FH_CONTROL_EMIT;
        request.wait = s_is (&frames[1], "wait");
        request.message = 3;
    }
    else if (s_is (&frames[0], "INJECT")) {
        /* INJECT, consumer, topic, body, more frames: to that consumer only */
        if (count < 4)
            return s_refuse (err, errlen, s_inject_usage);
        request.kind = FH_CONTROL_INJECT;
        request.consumer = 1;
        request.message = 2;
    }
    else if (s_is (&frames[0], "PAUSE") || s_is (&frames[0], "RESUME")
             || s_is (&frames[0], "RESTART")) {
        /* PAUSE|RESUME|RESTART, consumer */
        if (count != 2)
            return s_refuse (err, errlen, s_consumer_usage);
        request.kind = s_is (&frames[0], "PAUSE")    ? FH_CONTROL_PAUSE
                       : s_is (&frames[0], "RESUME") ? FH_CONTROL_RESUME
                                                     : FH_CONTROL_RESTART;
        request.consumer = 1;
    }
    else {
        char shown[S_SHOW_COMMAND];
        fh_control_show (frames[0].data, frames[0].size, shown, sizeof shown);
        if (err && errlen)
            snprintf (err, errlen, "ERROR unknown command '%s' (commands: " FH_CONTROL_COMMANDS ")",
                      shown);
        return -1;
    }
    *out = request;
    return 0;
}
