/*  fuzz_order_key - libFuzzer target for order_by: parsing a spec and
    extracting a key, JSON pointers into arbitrary bodies above all.

    Self-contained; build and run from the repository root:

      clang -g -O1 -fsanitize=fuzzer,address,undefined -Ihub -Ihub/metrics -Ihub/storage -Iinclude \
          tests/fuzz/fuzz_order_key.c hub/order_key.c \
          $(pkg-config --cflags --libs jansson libzmq) -o /tmp/fuzz_order_key
      /tmp/fuzz_order_key -max_total_time=60 tests/fuzz/corpus/order_key/

    Sources needed: this file and hub/order_key.c (with jansson and libzmq;
    the message is built by hand, so hub/message.c is not needed). It also
    builds with the project's -std=c11 -D_POSIX_C_SOURCE=200809L
    -D_DEFAULT_SOURCE and warning flags.

    An input is three parts split at the first two newlines: the order_by
    spec, the topic (frame 0) and the body (frame 1, the rest); with fewer
    newlines the spec is "json:/msg/0" and the whole input is the body.
    Checked for every input:

    1. A spec is compiled, or refused with an error line that starts with
       "order_by: ".
    2. Extraction answers within the buffer: true with at most
       FH_ORDER_KEY_MAX bytes, or false with the empty key; and the same
       answer twice (the compiled spec is read-only).
    3. The key is what the form says: the topic itself (or, when longer
       than FH_ORDER_KEY_MAX, its prefix and 16 hex digits); a segment
       holds no dot and is part of the topic; a frame is its bytes; a JSON
       key is found exactly when a plain reference walk of the pointer
       (split at '/', "~1" then "~0" replaced, as RFC 6901 words it) finds
       a value, and is that string's content or that value's compact
       JSON text with sorted keys.
*/
#include "order_key.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_check (bool ok, const char *what)
{
    if (!ok) {
        fprintf (stderr, "fuzz_order_key: %s\n", what);
        abort ();
    }
}

/* A message whose frames point into the input (no copy, nothing to
   free but the frames' bookkeeping). */
static fh_msg_t *
s_make_msg (const uint8_t *topic, size_t topic_size, const uint8_t *body, size_t body_size)
{
    fh_msg_t *msg = malloc (sizeof *msg + 2 * sizeof (zmq_msg_t));
    s_check (msg != NULL, "out of memory");
    atomic_init (&msg->holders, 1);
    msg->frame_count = 2;
    msg->seq = 1;
    msg->received_ns = 0;
    msg->emit = NULL;
    /* zmq_msg_init_data wants a non-const pointer; it only reads. */
    zmq_msg_init_data (&msg->frames[0], (void *) (uintptr_t) topic, topic_size, NULL, NULL);
    zmq_msg_init_data (&msg->frames[1], (void *) (uintptr_t) body, body_size, NULL, NULL);
    return msg;
}

static void
s_free_msg (fh_msg_t *msg)
{
    zmq_msg_close (&msg->frames[0]);
    zmq_msg_close (&msg->frames[1]);
    free (msg);
}

/* RFC 6901 the plain way, to compare with: split at '/', then replace
   "~1" by '/' and after that "~0" by '~' (the RFC's order), in place. */
static size_t
s_unescape (char *token, size_t size)
{
    static const char *const from[] = {"~1", "~0"};
    static const char to[] = {'/', '~'};
    for (int pass = 0; pass < 2; pass++) {
        size_t out = 0;
        for (size_t i = 0; i < size; i++) {
            if (i + 1 < size && token[i] == from[pass][0] && token[i + 1] == from[pass][1]) {
                token[out++] = to[pass];
                i++;
            }
            else
                token[out++] = token[i];
        }
        size = out;
    }
    return size;
}

/* The value the pointer in spec ("json:...") finds in doc, or NULL. */
static json_t *
s_reference_find (json_t *doc, const char *spec)
{
    const char *pointer = strchr (spec, ':') + 1;
    while (*pointer == ' ' || *pointer == '\t')
        pointer++;
    char copy[512];
    snprintf (copy, sizeof copy, "%s", pointer);
    json_t *value = doc;
    char *p = copy;
    while (value && *p == '/') {
        char *token = ++p;
        while (*p && *p != '/')
            p++;
        size_t size = s_unescape (token, (size_t) (p - token));
        if (json_is_object (value))
            value = json_object_getn (value, token, size);
        else if (json_is_array (value)) {
            bool digits = size > 0 && (size == 1 || token[0] != '0');
            unsigned long long index = 0;
            for (size_t i = 0; digits && i < size; i++) {
                digits = token[i] >= '0' && token[i] <= '9';
                if (index < 1000000000000ULL) /* past any array: stop growing */
                    index = index * 10 + (unsigned) (token[i] - '0');
            }
            value = digits ? json_array_get (value, (size_t) index) : NULL;
        }
        else
            value = NULL;
    }
    return value;
}

/* The key must be what the reference walk finds, written the documented
   way: a string's content, or else compact JSON with sorted keys. */
static void
s_check_json_key (const char *spec, const uint8_t *body, size_t body_size, bool found,
                  const char *key, size_t len)
{
    json_error_t error;
    json_t *doc = json_loadb (body_size ? (const char *) body : "", body_size,
                              JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    json_t *value = doc ? s_reference_find (doc, spec) : NULL;
    s_check (found == (value != NULL), "json: found differs from the reference walk");
    if (value && len < FH_ORDER_KEY_MAX) {
        if (json_is_string (value))
            s_check (len == json_string_length (value)
                         && (len == 0 || memcmp (key, json_string_value (value), len) == 0),
                     "json: string key is not the string's content");
        else {
            char *text = json_dumps (value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
            s_check (text && strlen (text) == len && memcmp (key, text, len) == 0,
                     "json: key is not the value's compact sorted text");
            free (text);
        }
    }
    json_decref (doc);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char spec[512] = "json:/msg/0";
    const uint8_t *topic = (const uint8_t *) "", *body = data;
    size_t topic_size = 0, body_size = size;
    const uint8_t *nl1 = memchr (data, '\n', size);
    const uint8_t *nl2 = nl1 ? memchr (nl1 + 1, '\n', size - (size_t) (nl1 + 1 - data)) : NULL;
    if (nl2) {
        size_t spec_size = (size_t) (nl1 - data);
        if (spec_size >= sizeof spec || memchr (data, '\0', spec_size))
            return 0;
        memcpy (spec, data, spec_size);
        spec[spec_size] = '\0';
        topic = nl1 + 1;
        topic_size = (size_t) (nl2 - topic);
        body = nl2 + 1;
        body_size = size - (size_t) (body - data);
    }

    char err[256] = "";
    fh_order_key_t *order = fh_order_key_parse (spec, err, sizeof err);
    if (!order) {
        s_check (strncmp (err, "order_by: ", 10) == 0, "refused without an error line");
        return 0;
    }
    fh_msg_t *msg = s_make_msg (topic, topic_size, body, body_size);

    char key[FH_ORDER_KEY_MAX], key2[FH_ORDER_KEY_MAX];
    size_t len = sizeof key, len2 = sizeof key2;
    bool found = fh_order_key_extract (order, msg, key, &len);
    bool found2 = fh_order_key_extract (order, msg, key2, &len2);
    s_check (found == found2 && len == len2 && memcmp (key, key2, len) == 0,
             "two extractions differ");
    s_check (len <= FH_ORDER_KEY_MAX, "key longer than FH_ORDER_KEY_MAX");
    s_check (found || len == 0, "fallback is not the empty key");

    bool hashed = false;
    if (len == FH_ORDER_KEY_MAX) {
        hashed = true;
        for (size_t i = FH_ORDER_KEY_MAX - 16; i < FH_ORDER_KEY_MAX; i++)
            hashed &= (key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f');
    }

    switch (fh_order_key_kind (order)) {
    case FH_ORDER_TOPIC:
        s_check (found, "topic not found");
        if (topic_size <= FH_ORDER_KEY_MAX)
            s_check (len == topic_size && (len == 0 || memcmp (key, topic, len) == 0),
                     "topic key is not the topic");
        else
            s_check (hashed && memcmp (key, topic, FH_ORDER_KEY_MAX - 16) == 0,
                     "long topic not hashed");
        break;
    case FH_ORDER_TOPIC_SEGMENT:
        if (found && len < FH_ORDER_KEY_MAX) {
            s_check (memchr (key, '.', len) == NULL, "segment holds a dot");
            bool inside = len == 0;
            for (size_t i = 0; !inside && i + len <= topic_size; i++)
                inside = memcmp (topic + i, key, len) == 0;
            s_check (inside, "segment is not part of the topic");
        }
        break;
    case FH_ORDER_FRAME: {
        unsigned k = fh_order_key_index (order);
        s_check (found == (k < 2), "frame found or not found wrongly");
        if (found && len < FH_ORDER_KEY_MAX) {
            const uint8_t *frame = k ? body : topic;
            size_t frame_size = k ? body_size : topic_size;
            s_check (len == frame_size && (len == 0 || memcmp (key, frame, len) == 0),
                     "frame key is not the frame");
        }
        break;
    }
    case FH_ORDER_JSON: s_check_json_key (spec, body, body_size, found, key, len); break;
    case FH_ORDER_NONE: s_check (found && len == 8, "none is not 8 bytes"); break;
    }

    s_free_msg (msg);
    fh_order_key_destroy (&order);
    return 0;
}
