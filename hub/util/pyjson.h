/*  pyjson - JSON written exactly as Python's json.dumps writes it.

    fedmsg encoded bodies with json.dumps (sort_keys=True, separators=
    (",", ":"), ensure_ascii=True). jansson's dump with JSON_COMPACT |
    JSON_SORT_KEYS | JSON_ENSURE_ASCII is the same in spirit but not byte
    for byte: upper-case \u escapes, DEL (0x7f) left as it is, reals with
    17 significant digits (1359579067.617802 would come out as
    1359579067.6178019). Subscribers that compare or sign bodies need the
    exact bytes, so `fanhub pub --jsonl` and `fanhub replay` encode with
    this, walking jansson's tree.
*/
#ifndef FH_PYJSON_H_INCLUDED
#define FH_PYJSON_H_INCLUDED

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A growing byte buffer; {0} is an empty one. failed: out of memory at
   some point (the contents are then incomplete). Free data with free. */
typedef struct {
    char *data;
    size_t size;
    size_t cap;
    bool failed;
} fh_buf_t;

void fh_buf_put (fh_buf_t *buf, const void *data, size_t size);
/* Appends value as Python's json.dumps (sort_keys=True,
   separators=(",", ":"), ensure_ascii=True) would write it. */
void fh_pyjson_encode (fh_buf_t *buf, json_t *value);

#endif
