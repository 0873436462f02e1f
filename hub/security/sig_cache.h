/*  sig_cache - what bus.validate_signatures remembers of the certificates
    it has checked, at a bounded cost.

    Certificates are named by the SHA-256 of their field's text (every
    byte of it, a \u0000 too), never by the text itself, so a remembered
    certificate costs the same however long its field was.

    - good: certificates that verified (parsed, chained to the CA, not
      revoked), with their public key, common name and end of validity.
      Bounded in entries and in bytes (each entry counts its field's size
      and its key's); a certificate that would pass either bound empties
      the cache first (a bus has a few dozen signers: only a flood of
      CA-signed certificates gets there).
    - bad: certificates that failed, by hash and reason only, in a fixed
      table of FH_SIG_BAD_SLOTS slots (a newer failure takes an older
      one's slot): a flood of made-up certificates costs a fixed, small
      amount of memory, and each of them a hash.

    Used by one thread at a time (the verifier's).
*/
#ifndef FH_SIG_CACHE_H_INCLUDED
#define FH_SIG_CACHE_H_INCLUDED

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FH_SIG_BAD_SLOTS 1024

typedef struct fh_sig_cache fh_sig_cache_t;

typedef struct {
    unsigned char bytes[32];
} fh_sig_hash_t;

/* A certificate that verified. */
typedef struct {
    EVP_PKEY *key;
    char name[128];    /* its common name */
    int64_t not_after; /* the end of its validity, seconds since the epoch */
} fh_sig_cert_t;

/* NULL when out of memory. */
fh_sig_cache_t *fh_sig_cache_new (size_t max_entries, size_t max_bytes);
void fh_sig_cache_destroy (fh_sig_cache_t **self_p);

/* The SHA-256 of size bytes of data. */
void fh_sig_hash (const void *data, size_t size, fh_sig_hash_t *hash);

/* The good certificate of hash, or NULL. */
const fh_sig_cert_t *fh_sig_cache_good (fh_sig_cache_t *self, const fh_sig_hash_t *hash);
/* Remembers a good certificate (the cache takes cert->key); cost is the
   bytes it stands for. Returns the cache's copy, or NULL when out of
   memory (the key is freed then). */
const fh_sig_cert_t *fh_sig_cache_add_good (fh_sig_cache_t *self, const fh_sig_hash_t *hash,
                                            const fh_sig_cert_t *cert, size_t cost);

/* The reason (> 0) a certificate of hash failed, or 0 when not known;
   its common name (if it had one, truncated) into name. */
int fh_sig_cache_bad (const fh_sig_cache_t *self, const fh_sig_hash_t *hash, char *name,
                      size_t name_size);
/* Remembers that the certificate of hash (named name) failed with
   reason (> 0). */
void fh_sig_cache_add_bad (fh_sig_cache_t *self, const fh_sig_hash_t *hash, int reason,
                           const char *name);

/* Recent: the certificates of the last FH_SIG_RECENT signers seen, by
   their field as written in the body (sig_skim.h), compared whole: a
   message of a recent signer costs a memcmp, not a hash nor a parse.
   Each holds its own copy of the text and a reference to the key, so it
   outlives a flush of the good ones; a field over FH_SIG_RECENT_BYTES
   is not kept. NULL when not there. */
#define FH_SIG_RECENT 8
#define FH_SIG_RECENT_BYTES 16384
const fh_sig_cert_t *fh_sig_cache_recent (fh_sig_cache_t *self, const char *text, size_t size);
/* Remembers cert (a good one) for that field, in the oldest's place. */
void fh_sig_cache_add_recent (fh_sig_cache_t *self, const char *text, size_t size,
                              const fh_sig_cert_t *cert);

/* Good certificates held, and the bytes they count. */
size_t fh_sig_cache_entries (const fh_sig_cache_t *self);
size_t fh_sig_cache_bytes (const fh_sig_cache_t *self);

#endif
