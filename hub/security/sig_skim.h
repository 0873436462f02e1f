/*  sig_skim - the two long fields of a signed fedmsg body, found without
    parsing it.

    A fedmsg envelope is about 2 KiB, of which the "certificate" (about
    1.6 KiB of PEM) and the "signature" are most; jansson reads a string
    a byte at a time, so parsing them costs as much as the RSA
    verification itself. One pass here finds both members as written (no
    allocation), so that a field too large is refused before any parse
    (max_field_bytes), and, in the plain case that every real message is,
    the verifier parses the body with those two values emptied
    (fh_sig_blanked) and takes their texts from here, unescaped by
    fh_sig_unescape, or looks the certificate up by its text as written.

    Plain means: the body is one JSON object read to its end, its
    top-level keys have no escapes (an escaped key could spell
    "certificate"), and "certificate" and "signature" are there once
    each, as strings of printable ASCII. Anything else takes the whole
    parse, as before, and gets the same verdict.
*/
#ifndef FH_SIG_SKIM_H_INCLUDED
#define FH_SIG_SKIM_H_INCLUDED

#include "pyjson.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *text; /* between its quotes, as written; NULL when absent */
    size_t size;      /* bytes as written */
    size_t least;     /* bytes once unescaped, at least (each escape one) */
} fh_sig_raw_t;

typedef struct {
    fh_sig_raw_t cert, sig;
    bool plain;
} fh_sig_fields_t;

/* Finds the top-level "certificate" and "signature" strings of body. */
void fh_sig_skim (const char *body, size_t size, fh_sig_fields_t *out);
/* Into out (emptied first): body with those two strings' values made ""
   (a plain body only). False when out of memory. */
bool fh_sig_blanked (const char *body, size_t size, const fh_sig_fields_t *fields, fh_buf_t *out);
/* Into out (emptied first): a string as written, unescaped. False on a
   \u escape or a bad one: the caller takes the whole parse then. */
bool fh_sig_unescape (const fh_sig_raw_t *raw, fh_buf_t *out);

#endif
