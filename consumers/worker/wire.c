/*  wire - the frames of docs/worker-protocol.md: encoding and decoding,
    with nothing of processes or sockets, so that a unit test can hold
    them to the document. All integers big-endian. */
#define _GNU_SOURCE /* memmem, sigabbrev_np */

#include "worker.h"

#include <fanhub/sdk.h>
#include <endian.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

int
wbuf_reserve (wbuf_t *self, size_t more)
{
    if (self->cap - self->size >= more)
        return 0;
    size_t cap = self->cap ? self->cap : (more > 256 ? more : 256);
    while (cap - self->size < more) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    uint8_t *data = realloc (self->data, cap);
    if (!data)
        return -1;
    self->data = data;
    self->cap = cap;
    return 0;
}

int
wbuf_append (wbuf_t *self, const void *data, size_t size)
{
    if (wbuf_reserve (self, size) != 0)
        return -1;
    if (size)
        memcpy (self->data + self->size, data, size);
    self->size += size;
    return 0;
}

void
wbuf_shift (wbuf_t *self, size_t n)
{
    if (n >= self->size) {
        self->size = 0;
        return;
    }
    memmove (self->data, self->data + n, self->size - n);
    self->size -= n;
}

void
wbuf_free (wbuf_t *self)
{
    free (self->data);
    memset (self, 0, sizeof *self);
}

/* The low `bytes` (1 to 8) of value, big-endian, at at: one byte swap
   and one store, not a loop a byte at a time (a MESSAGE frame has six). */
static uint8_t *
s_put (uint8_t *at, uint64_t value, int bytes)
{
    uint64_t be = htobe64 (value << (64 - 8 * bytes));
    memcpy (at, &be, (size_t) bytes);
    return at + bytes;
}

static uint64_t
s_get (const uint8_t *at, int bytes)
{
    uint64_t be = 0;
    memcpy (&be, at, (size_t) bytes);
    return be64toh (be) >> (64 - 8 * bytes);
}

int
wire_frame (wbuf_t *out, uint8_t type, const void *payload, size_t size)
{
    if (size >= WORKER_FRAME_MAX_OUT || wbuf_reserve (out, 5 + size) != 0)
        return -1;
    uint8_t *at = out->data + out->size;
    at = s_put (at, size + 1, 4);
    *at++ = type;
    if (size)
        memcpy (at, payload, size);
    out->size += 5 + size;
    return 0;
}

int
wire_message (wbuf_t *out, const wire_msg_t *msg)
{
    size_t id_size = msg->id_size > UINT16_MAX ? 0 : msg->id_size;
    size_t size = 1 + 8 + 8 + 4 + 8 + 2 + id_size + 4;
    for (size_t i = 0; i < msg->count; i++) {
        if (msg->frames[i].size > UINT32_MAX)
            return -1;
        size += 4 + msg->frames[i].size;
    }
    if (size >= WORKER_FRAME_MAX_OUT || wbuf_reserve (out, 4 + size) != 0)
        return -1;
    uint8_t *at = out->data + out->size;
    at = s_put (at, size, 4);
    *at++ = 'M';
    at = s_put (at, msg->ticket, 8);
    at = s_put (at, msg->seq, 8);
    at = s_put (at, msg->attempt, 4);
    at = s_put (at, (uint64_t) msg->received_ns, 8);
    at = s_put (at, id_size, 2);
    if (id_size) {
        memcpy (at, msg->id, id_size);
        at += id_size;
    }
    at = s_put (at, msg->count, 4);
    for (size_t i = 0; i < msg->count; i++) {
        at = s_put (at, msg->frames[i].size, 4);
        if (msg->frames[i].size)
            memcpy (at, msg->frames[i].data, msg->frames[i].size);
        at += msg->frames[i].size;
    }
    out->size += 4 + size;
    return 0;
}

int
wire_next (const uint8_t *data, size_t size, uint32_t max, uint8_t *type, const uint8_t **payload,
           size_t *payload_size, size_t *used, char *err, size_t errlen)
{
    if (size < 4)
        return 0;
    uint64_t length = s_get (data, 4);
    if (length == 0) {
        snprintf (err, errlen, "a frame of length 0 (every frame has a type byte)");
        return -1;
    }
    if (length > max) {
        snprintf (err, errlen, "a frame of %llu bytes (the limit is %lu)",
                  (unsigned long long) length, (unsigned long) max);
        return -1;
    }
    if (size - 4 < length)
        return 0;
    *type = data[4];
    *payload = data + 5;
    *payload_size = length - 1;
    *used = 4 + length;
    return 1;
}

int
wire_answer (const uint8_t *payload, size_t size, uint64_t *ticket, uint8_t *verdict,
             const char **reason, size_t *reason_size)
{
    if (size < 8 + 1 + 2)
        return -1;
    *ticket = s_get (payload, 8);
    *verdict = payload[8];
    *reason_size = s_get (payload + 9, 2);
    if (size != 11 + *reason_size || *verdict > WORKER_VERDICT_DROP)
        return -1;
    *reason = (const char *) payload + 11;
    return 0;
}

int
wire_publish (const uint8_t *payload, size_t size, const char **topic, size_t *topic_size,
              const uint8_t **body, size_t *body_size, char *err, size_t errlen)
{
    if (size < 2) {
        snprintf (err, errlen, "a PUBLISH of %zu bytes: no topic length", size);
        return -1;
    }
    *topic_size = s_get (payload, 2);
    if (*topic_size == 0 || *topic_size > size - 2) {
        snprintf (err, errlen, "a PUBLISH whose topic length %zu is %s", *topic_size,
                  *topic_size ? "past its end" : "zero");
        return -1;
    }
    *topic = (const char *) payload + 2;
    if (!fanhub_utf8_valid (*topic, *topic_size) || memchr (*topic, '\0', *topic_size)) {
        snprintf (err, errlen, "a PUBLISH whose topic is not UTF-8 (or holds a NUL)");
        return -1;
    }
    *body = payload + 2 + *topic_size;
    *body_size = size - 2 - *topic_size;
    return 0;
}

size_t
wire_msg_id (const void *body, size_t body_size, char *id, size_t size)
{
    id[0] = '\0';
    /* Parse only what may have one: a JSON object that names msg_id. */
    const char *text = body;
    size_t at = 0;
    while (at < body_size
           && (text[at] == ' ' || text[at] == '\n' || text[at] == '\t' || text[at] == '\r'))
        at++;
    if (at == body_size || text[at] != '{' || !memmem (body, body_size, "\"msg_id\"", 8))
        return 0;
    json_t *root = json_loadb (body, body_size, JSON_ALLOW_NUL, NULL);
    const char *value = json_string_value (json_object_get (root, "msg_id"));
    size_t length = 0;
    if (value && (length = json_string_length (json_object_get (root, "msg_id"))) < size)
        memcpy (id, value, length + 1);
    else
        length = 0;
    json_decref (root);
    return length;
}

const char *
wire_signal_name (int sig)
{
    const char *abbrev = sigabbrev_np (sig);
    static _Thread_local char name[16];
    snprintf (name, sizeof name, "SIG%s", abbrev ? abbrev : "?");
    return name;
}

void
wire_status_text (int status, char *out, size_t size)
{
    if (status < 0)
        snprintf (out, size, "vanished (no exit status)");
    else if (WIFSIGNALED (status))
        snprintf (out, size, "killed by signal %d (%s)", WTERMSIG (status),
                  wire_signal_name (WTERMSIG (status)));
    else if (WIFEXITED (status))
        snprintf (out, size, "exited with status %d", WEXITSTATUS (status));
    else
        snprintf (out, size, "ended (wait status %d)", status);
}
