/*  order_key - a consumer's `order_by`: the ordering key of a message.

    With `workers: N` a consumer runs messages of different keys in
    parallel and messages of one key one at a time (keyed.h). order_by
    says what the key of a message is, in one of these forms (the YAML
    map form {topic_segment: 3} is written "topic_segment:3"; spaces
    after the colon are allowed):

      "topic"            the whole topic (frame 0), "" included.
      "topic_segment:K"  the K-th dot-separated segment of the topic,
                         counting from 0: in "org.fedoraproject.prod.x"
                         segment 0 is "org" and segment 2 is "prod". An
                         empty segment ("a..b", segment 1) is the key "".
                         A topic with K or fewer dots has no segment K.
      "frame:K"          the bytes of frame K, counting from 0 like
                         fh_msg_frame: frame 0 is the topic, 1 the body.
      "json:/pointer"    the value at an RFC 6901 pointer into the body
                         (frame 1) parsed as JSON ("json:" alone is the
                         whole document). "~0" stands for '~' and "~1"
                         for '/' in a token; in an array a token must be
                         a decimal index without leading zeros ("-", the
                         element past the end, is never found). The key
                         is the value's text: a string's own UTF-8
                         content without quotes or escapes (NUL bytes
                         included); a number, true, false or null as
                         jansson writes it (integers in decimal, reals
                         with the 17 digits that make them round-trip:
                         equal values give equal keys, but 1 and 1.0
                         differ); an object or array as compact JSON
                         with keys sorted.
      "none"             no ordering: every message is its own key (its
                         hub sequence number, 8 bytes big-endian), so
                         messages run in any order, as parallel as the
                         workers allow.

    The fallback key. When the key cannot be extracted (no such segment or
    frame; a body that is not JSON, not UTF-8, or holds an integer beyond
    64 bits, which jansson refuses; a pointer that finds nothing),
    fh_order_key_extract returns false and gives the empty key "", which
    the caller uses as is and counts. Every such message shares that one
    key, so they keep their arrival order among themselves.

    Long keys. A key longer than FH_ORDER_KEY_MAX bytes is replaced by its
    first FH_ORDER_KEY_MAX - 16 bytes followed by the 16 lowercase hex
    digits of the 64-bit FNV-1a hash of the whole key: exactly
    FH_ORDER_KEY_MAX bytes. Two keys may then merge into one (as may any
    two keys that collide on the fallback); merging only costs
    parallelism, never order, since messages of one key stay ordered.
    Keys are never truncated without the hash.

    A compiled order_by is read-only: fh_order_key_extract may run on many
    threads at once with the same one.
*/
#ifndef FH_ORDER_KEY_H_INCLUDED
#define FH_ORDER_KEY_H_INCLUDED

#include "message.h"

#include <stdbool.h>
#include <stddef.h>

#define FH_ORDER_KEY_MAX 256

typedef enum {
    FH_ORDER_NONE,
    FH_ORDER_TOPIC,
    FH_ORDER_TOPIC_SEGMENT,
    FH_ORDER_FRAME,
    FH_ORDER_JSON
} fh_order_kind_t;

/* A compiled order_by. */
typedef struct fh_order_key fh_order_key_t;

/* Compiles spec. On error NULL, with one line in err saying what is wrong
   (the caller prefixes where: "hub.yaml:12:7: consumer 'x': "). */
fh_order_key_t *fh_order_key_parse (const char *spec, char *err, size_t errlen);
/* Safe with NULL and twice. */
void fh_order_key_destroy (fh_order_key_t **self_p);

fh_order_kind_t fh_order_key_kind (const fh_order_key_t *self);
/* The segment or frame number K (0 for the other kinds). */
unsigned fh_order_key_index (const fh_order_key_t *self);

/* Writes the key of msg into buf, whose size *len gives on the way in
   (at least FH_ORDER_KEY_MAX), and its length into *len. Returns true;
   or false when the key cannot be extracted, with *len = 0: the fallback
   key "", to be counted by the caller. */
bool fh_order_key_extract (const fh_order_key_t *self, const fh_msg_t *msg, char *buf, size_t *len);

#endif
