/*  sig_cache - the certificates bus.validate_signatures remembers. See
    sig_cache.h. */
#include "sig_cache.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    fh_sig_cert_t cert;
    size_t cost;
} s_good_t;

typedef struct {
    fh_sig_hash_t hash;
    uint8_t reason; /* 0: an empty slot */
    char name[63];  /* for the log line */
} s_bad_t;

typedef struct {
    char *text; /* the field as written; NULL: an empty slot */
    size_t size;
    fh_sig_cert_t cert; /* its own reference to the key */
} s_recent_t;

struct fh_sig_cache {
    zhashx_t *good; /* hex of the hash -> s_good_t */
    size_t max_entries, max_bytes, bytes;
    s_bad_t bad[FH_SIG_BAD_SLOTS];
    s_recent_t recent[FH_SIG_RECENT];
    size_t recent_next; /* the slot the next one takes */
};

static void
s_recent_clear (s_recent_t *recent)
{
    free (recent->text);
    EVP_PKEY_free (recent->cert.key);
    *recent = (s_recent_t){0};
}

static void
s_good_free (void **item_p)
{
    s_good_t *good = *item_p;
    if (good) {
        EVP_PKEY_free (good->cert.key);
        free (good);
        *item_p = NULL;
    }
}

fh_sig_cache_t *
fh_sig_cache_new (size_t max_entries, size_t max_bytes)
{
    fh_sig_cache_t *self = calloc (1, sizeof *self);
    if (!self || !(self->good = zhashx_new ())) {
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->good, s_good_free);
    self->max_entries = max_entries ? max_entries : 1;
    self->max_bytes = max_bytes;
    return self;
}

void
fh_sig_cache_destroy (fh_sig_cache_t **self_p)
{
    if (!*self_p)
        return;
    zhashx_destroy (&(*self_p)->good);
    for (size_t i = 0; i < FH_SIG_RECENT; i++)
        s_recent_clear (&(*self_p)->recent[i]);
    free (*self_p);
    *self_p = NULL;
}

void
fh_sig_hash (const void *data, size_t size, fh_sig_hash_t *hash)
{
    unsigned int len = sizeof hash->bytes;
    if (EVP_Digest (data, size, hash->bytes, &len, EVP_sha256 (), NULL) != 1)
        memset (hash->bytes, 0, sizeof hash->bytes); /* out of memory: one shared name */
}

static void
s_hex (const fh_sig_hash_t *hash, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof hash->bytes; i++) {
        hex[2 * i] = digits[hash->bytes[i] >> 4];
        hex[2 * i + 1] = digits[hash->bytes[i] & 0xF];
    }
    hex[64] = '\0';
}

const fh_sig_cert_t *
fh_sig_cache_good (fh_sig_cache_t *self, const fh_sig_hash_t *hash)
{
    char hex[65];
    s_hex (hash, hex);
    s_good_t *good = zhashx_lookup (self->good, hex);
    return good ? &good->cert : NULL;
}

const fh_sig_cert_t *
fh_sig_cache_add_good (fh_sig_cache_t *self, const fh_sig_hash_t *hash, const fh_sig_cert_t *cert,
                       size_t cost)
{
    s_good_t *good = malloc (sizeof *good);
    if (!good) {
        EVP_PKEY_free (cert->key);
        return NULL;
    }
    good->cert = *cert;
    good->cost = cost;
    if (zhashx_size (self->good) + 1 > self->max_entries || self->bytes + cost > self->max_bytes) {
        zhashx_purge (self->good);
        self->bytes = 0;
    }
    char hex[65];
    s_hex (hash, hex);
    if (zhashx_insert (self->good, hex, good) != 0) {
        void *item = good;
        s_good_free (&item);
        return NULL;
    }
    self->bytes += cost;
    return &good->cert;
}

static size_t
s_slot (const fh_sig_hash_t *hash)
{
    uint32_t at;
    memcpy (&at, hash->bytes, sizeof at);
    return at % FH_SIG_BAD_SLOTS;
}

int
fh_sig_cache_bad (const fh_sig_cache_t *self, const fh_sig_hash_t *hash, char *name,
                  size_t name_size)
{
    const s_bad_t *slot = &self->bad[s_slot (hash)];
    if (!slot->reason || memcmp (&slot->hash, hash, sizeof *hash) != 0)
        return 0;
    snprintf (name, name_size, "%s", slot->name);
    return slot->reason;
}

void
fh_sig_cache_add_bad (fh_sig_cache_t *self, const fh_sig_hash_t *hash, int reason, const char *name)
{
    s_bad_t *slot = &self->bad[s_slot (hash)];
    slot->hash = *hash;
    slot->reason = (uint8_t) reason;
    snprintf (slot->name, sizeof slot->name, "%s", name);
}

size_t
fh_sig_cache_entries (const fh_sig_cache_t *self)
{
    return zhashx_size (self->good);
}

size_t
fh_sig_cache_bytes (const fh_sig_cache_t *self)
{
    return self->bytes;
}

const fh_sig_cert_t *
fh_sig_cache_recent (fh_sig_cache_t *self, const char *text, size_t size)
{
    for (size_t i = 0; i < FH_SIG_RECENT; i++) {
        const s_recent_t *recent = &self->recent[i];
        if (recent->text && recent->size == size && memcmp (recent->text, text, size) == 0)
            return &recent->cert;
    }
    return NULL;
}

void
fh_sig_cache_add_recent (fh_sig_cache_t *self, const char *text, size_t size,
                         const fh_sig_cert_t *cert)
{
    if (size > FH_SIG_RECENT_BYTES || EVP_PKEY_up_ref (cert->key) != 1)
        return;
    char *copy = malloc (size ? size : 1);
    if (!copy) {
        EVP_PKEY_free (cert->key);
        return;
    }
    memcpy (copy, text, size);
    s_recent_t *slot = &self->recent[self->recent_next];
    self->recent_next = (self->recent_next + 1) % FH_SIG_RECENT;
    s_recent_clear (slot);
    *slot = (s_recent_t){.text = copy, .size = size, .cert = *cert};
}
