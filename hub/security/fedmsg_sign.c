/*  fedmsg_sign - fedmsg's X.509 signatures, with OpenSSL. See
    fedmsg_sign.h. */
#define _GNU_SOURCE /* timegm */
#include "fedmsg_sign.h"

#include "sig_cache.h"
#include "sig_skim.h"

#include <fanhub/sdk.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The good certificates' cache (sig_cache.h): a bus has a few dozen
   signers. Each counts its field's size and S_KEY_COST for its parsed
   key (an RSA-2048 key as OpenSSL holds it, about). */
#define S_CACHE_ENTRIES 1024
#define S_CACHE_BYTES (4u << 20)
#define S_KEY_COST 2048
/* fedmsg's _prep_crypto_msg: base64 in lines of 76 characters. */
#define S_LINE 76

struct fh_fedmsg_signer {
    EVP_PKEY *key;
    char *cert_b64; /* the certificate field, ready */
};

typedef struct {
    char *topic;
    char **names;
    size_t name_count;
} s_rule_t;

struct fh_sig_verifier {
    X509_STORE *store;
    fh_sig_cache_t *cache;
    s_rule_t *rules;
    size_t rule_count;
    bool nitpicky;
    size_t max_field;        /* certificate and signature fields: at most, bytes */
    int64_t crl_next_update; /* seconds since the epoch; 0: no CRL, or one without */
    bool crl_expired_accept; /* on_crl_expired: accept */
    /* Reused from message to message (one thread verifies). */
    fh_buf_t blank, sig_text, cert_text, canonical;
    /* The verification context of the last key used, set up once for
       it (EVP_DigestVerifyInit costs a tenth of the RSA operation). */
    EVP_PKEY *last_key; /* a reference of its own */
    EVP_PKEY_CTX *verify;
};

const char *
fh_sig_reason_name (fh_sig_reason_t reason)
{
    switch (reason) {
    case FH_SIG_OK: return "ok";
    case FH_SIG_MISSING_FIELDS: return "missing_fields";
    case FH_SIG_BAD_CERTIFICATE: return "bad_certificate";
    case FH_SIG_BAD_SIGNATURE: return "bad_signature";
    case FH_SIG_TOPIC_MISMATCH: return "topic_mismatch";
    case FH_SIG_UNKNOWN_CA: return "unknown_ca";
    case FH_SIG_REVOKED: return "revoked";
    case FH_SIG_NOT_ALLOWED: return "not_allowed";
    case FH_SIG_TOO_LARGE: return "too_large";
    case FH_SIG_BAD_CHAIN: return "bad_chain";
    case FH_SIG_CRL_EXPIRED: return "crl_expired";
    case FH_SIG_CRL_ISSUER: return "crl_issuer";
    case FH_SIG_REASONS: break;
    }
    return "unknown";
}

/* OpenSSL's last error, or fallback. */
static void
s_ssl_error (char *err, size_t errlen, const char *what, const char *fallback)
{
    unsigned long code = ERR_get_error ();
    char text[256];
    if (code)
        ERR_error_string_n (code, text, sizeof text);
    snprintf (err, errlen, "%s: %s", what, code ? text : fallback);
    ERR_clear_error ();
}

/* base64 of data in lines of 76, each ended by '\n'; NULL when out of
   memory. The SDK's base64, not OpenSSL's EVP_EncodeBlock/DecodeUpdate:
   one grammar for every base64 the hub reads, and the plugins, which do
   not link libcrypto, have it too. */
static char *
s_base64_lines (const unsigned char *data, size_t size)
{
    size_t flat_size = fanhub_base64_size (size);
    char *flat = malloc (flat_size + 1);
    char *out = malloc (flat_size + flat_size / S_LINE + 2);
    if (!flat || !out) {
        free (flat);
        free (out);
        return NULL;
    }
    fanhub_base64_encode (flat, data, size);
    size_t n = 0;
    for (size_t at = 0; at < flat_size; at += S_LINE) {
        size_t len = flat_size - at < S_LINE ? flat_size - at : S_LINE;
        memcpy (out + n, flat + at, len);
        n += len;
        out[n++] = '\n';
    }
    out[n] = '\0';
    free (flat);
    return out;
}

/* Decodes base64 (line ends and spaces allowed). Returns the size, or -1. */
static int
s_base64_decode (const char *text, size_t size, unsigned char **out)
{
    ptrdiff_t len = -1;
    *out = size <= INT32_MAX ? malloc (size / 4 * 3 + 3) : NULL;
    if (*out)
        len = fanhub_base64_decode (*out, text, size, true);
    if (len < 0) {
        free (*out);
        *out = NULL;
    }
    return (int) len;
}

fh_fedmsg_signer_t *
fh_fedmsg_signer_new (const char *key_file, const char *cert_file, char *err, size_t errlen)
{
    fh_fedmsg_signer_t *self = calloc (1, sizeof *self);
    BIO *in = BIO_new_file (key_file, "r");
    if (self && in)
        self->key = PEM_read_bio_PrivateKey (in, NULL, NULL, NULL);
    BIO_free (in);
    if (!self || !self->key) {
        s_ssl_error (err, errlen, key_file, "not a PEM private key");
        fh_fedmsg_signer_destroy (&self);
        return NULL;
    }
    X509 *cert = NULL;
    in = BIO_new_file (cert_file, "r");
    if (in)
        cert = PEM_read_bio_X509 (in, NULL, NULL, NULL);
    BIO_free (in);
    if (!cert) {
        s_ssl_error (err, errlen, cert_file, "not a PEM certificate");
        fh_fedmsg_signer_destroy (&self);
        return NULL;
    }
    bool matches = X509_check_private_key (cert, self->key) == 1;
    /* The PEM text as OpenSSL writes it, as fedmsg sent cert.as_pem(). */
    BIO *pem = BIO_new (BIO_s_mem ());
    char *data = NULL;
    long size = pem && PEM_write_bio_X509 (pem, cert) == 1 ? BIO_get_mem_data (pem, &data) : 0;
    if (matches && size > 0)
        self->cert_b64 = s_base64_lines ((const unsigned char *) data, (size_t) size);
    BIO_free (pem);
    X509_free (cert);
    if (!self->cert_b64) {
        ERR_clear_error ();
        snprintf (err, errlen, "%s: %s", cert_file,
                  matches ? "out of memory" : "the certificate is not the key's");
        fh_fedmsg_signer_destroy (&self);
        return NULL;
    }
    return self;
}

void
fh_fedmsg_signer_destroy (fh_fedmsg_signer_t **self_p)
{
    if (!*self_p)
        return;
    EVP_PKEY_free ((*self_p)->key);
    free ((*self_p)->cert_b64);
    free (*self_p);
    *self_p = NULL;
}

int
fh_fedmsg_sign (fh_fedmsg_signer_t *self, json_t *message, char *err, size_t errlen)
{
    json_object_del (message, "signature");
    json_object_del (message, "certificate");
    if (json_object_set_new (message, "crypto", json_string ("x509")) < 0) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    fh_buf_t canonical = {0};
    fh_pyjson_encode (&canonical, message);
    unsigned char sig[1024];
    size_t sig_size = sizeof sig;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    int ok = !canonical.failed && ctx
             && EVP_DigestSignInit (ctx, NULL, EVP_sha1 (), NULL, self->key) == 1
             && EVP_DigestSign (ctx, sig, &sig_size, (const unsigned char *) canonical.data,
                                canonical.size)
                    == 1;
    EVP_MD_CTX_free (ctx);
    free (canonical.data);
    char *sig_b64 = ok ? s_base64_lines (sig, sig_size) : NULL;
    if (!sig_b64) {
        s_ssl_error (err, errlen, "signing", "out of memory");
        return -1;
    }
    int rc = json_object_set_new (message, "signature", json_string (sig_b64));
    if (rc == 0)
        rc = json_object_set_new (message, "certificate", json_string (self->cert_b64));
    free (sig_b64);
    if (rc < 0)
        snprintf (err, errlen, "out of memory");
    return rc;
}

/* ---- checking ---------------------------------------------------------- */

static void
s_rules_free (s_rule_t *rules, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free (rules[i].topic);
        for (size_t j = 0; j < rules[i].name_count; j++)
            free (rules[i].names[j]);
        free (rules[i].names);
    }
    free (rules);
}

static s_rule_t *
s_rules_copy (const fh_sig_policy_t *policy, size_t count)
{
    s_rule_t *rules = calloc (count ? count : 1, sizeof *rules);
    for (size_t i = 0; rules && i < count; i++) {
        rules[i].topic = strdup (policy[i].topic);
        rules[i].names = calloc (policy[i].name_count ? policy[i].name_count : 1, sizeof (char *));
        bool ok = rules[i].topic && rules[i].names;
        for (size_t j = 0; ok && j < policy[i].name_count; j++, rules[i].name_count++)
            ok = (rules[i].names[j] = strdup (policy[i].names[j])) != NULL;
        if (!ok) {
            s_rules_free (rules, i + 1);
            return NULL;
        }
    }
    return rules;
}

/* An ASN.1 time as seconds since the epoch; fallback when it does not
   read. */
static int64_t
s_epoch (const ASN1_TIME *at, int64_t fallback)
{
    struct tm tm;
    if (!at || ASN1_TIME_to_tm (at, &tm) != 1)
        return fallback;
    return (int64_t) timegm (&tm);
}

static void
s_utc_text (int64_t seconds, char *text, size_t size)
{
    time_t t = (time_t) seconds;
    struct tm tm;
    if (!gmtime_r (&t, &tm) || !strftime (text, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf (text, size, "%lld", (long long) seconds);
}

/* Whether a certificate of store (the configured CA) issued crl: the
   issuer's name is its subject and its key verifies the CRL. */
static bool
s_crl_issued_by_ca (X509_STORE *store, X509_CRL *crl)
{
    STACK_OF (X509_OBJECT) *objects = X509_STORE_get0_objects (store);
    for (int i = 0; i < sk_X509_OBJECT_num (objects); i++) {
        X509 *ca = X509_OBJECT_get0_X509 (sk_X509_OBJECT_value (objects, i));
        if (ca && X509_NAME_cmp (X509_get_subject_name (ca), X509_CRL_get_issuer (crl)) == 0
            && X509_CRL_verify (crl, X509_get0_pubkey (ca)) == 1) {
            ERR_clear_error (); /* another CA's key may have failed first */
            return true;
        }
    }
    ERR_clear_error ();
    return false;
}

/* Why crl may not be used now ("" when it may); its nextUpdate (0: none)
   into *next. */
static void
s_crl_refusal (X509_STORE *store, X509_CRL *crl, int64_t now, int64_t *next, char *why, size_t size)
{
    char when[64], issuer[256];
    int64_t last = s_epoch (X509_CRL_get0_lastUpdate (crl), INT64_MAX);
    *next = X509_CRL_get0_nextUpdate (crl) ? s_epoch (X509_CRL_get0_nextUpdate (crl), 0) : 0;
    why[0] = '\0';
    if (!s_crl_issued_by_ca (store, crl)) {
        X509_NAME_oneline (X509_CRL_get_issuer (crl), issuer, sizeof issuer);
        snprintf (why, size, "not issued by the configured CA (crl_issuer): its issuer is %s",
                  issuer);
    }
    else if (last > now) {
        s_utc_text (last, when, sizeof when);
        snprintf (why, size, "not valid before %s (its lastUpdate)", when);
    }
    else if (X509_CRL_get0_nextUpdate (crl) && *next <= now) {
        s_utc_text (*next, when, sizeof when);
        snprintf (why, size, "expired at %s (its nextUpdate; crl_expired): a current CRL is needed",
                  when);
    }
}

/* Adds the CRL of crl_file to the store and turns revocation checks on.
   Refused when it is not the CA's or not within its dates. */
static int
s_load_crl (fh_sig_verifier_t *self, const char *crl_file, char *err, size_t errlen)
{
    BIO *in = BIO_new_file (crl_file, "r");
    X509_CRL *crl = in ? PEM_read_bio_X509_CRL (in, NULL, NULL, NULL) : NULL;
    BIO_free (in);
    if (!crl) {
        s_ssl_error (err, errlen, crl_file, "not a PEM CRL");
        return -1;
    }
    char why[512];
    s_crl_refusal (self->store, crl, (int64_t) time (NULL), &self->crl_next_update, why,
                   sizeof why);
    int rc = !why[0] && X509_STORE_add_crl (self->store, crl) == 1 ? 0 : -1;
    X509_CRL_free (crl);
    if (rc < 0 && why[0])
        snprintf (err, errlen, "%s: %s", crl_file, why);
    else if (rc < 0)
        s_ssl_error (err, errlen, crl_file, "cannot be used");
    else
        X509_STORE_set_flags (self->store, X509_V_FLAG_CRL_CHECK);
    return rc;
}

/* An expired CRL still says what it revoked: its expiry is judged by
   fh_sig_verify at each message (on_crl_expired), not cached with the
   certificates. */
static int
s_verify_cb (int ok, X509_STORE_CTX *ctx)
{
    if (!ok && X509_STORE_CTX_get_error (ctx) == X509_V_ERR_CRL_HAS_EXPIRED)
        return 1;
    return ok;
}

fh_sig_verifier_t *
fh_sig_verifier_new (const char *ca_file, const char *crl_file, const fh_sig_policy_t *policy,
                     size_t policy_count, bool nitpicky, char *err, size_t errlen)
{
    fh_sig_verifier_t *self = calloc (1, sizeof *self);
    if (!self || !(self->store = X509_STORE_new ())
        || !(self->cache = fh_sig_cache_new (S_CACHE_ENTRIES, S_CACHE_BYTES))
        || !(self->rules = s_rules_copy (policy, policy_count))) {
        snprintf (err, errlen, "out of memory");
        fh_sig_verifier_destroy (&self);
        return NULL;
    }
    self->rule_count = policy_count;
    self->nitpicky = nitpicky;
    self->max_field = FH_SIG_FIELD_MAX_DEFAULT;
    X509_STORE_set_verify_cb (self->store, s_verify_cb);
    if (X509_STORE_load_file (self->store, ca_file) != 1) {
        s_ssl_error (err, errlen, ca_file, "no PEM certificate in it");
        fh_sig_verifier_destroy (&self);
        return NULL;
    }
    if (crl_file && s_load_crl (self, crl_file, err, errlen) < 0) {
        fh_sig_verifier_destroy (&self);
        return NULL;
    }
    return self;
}

void
fh_sig_verifier_set_limits (fh_sig_verifier_t *self, size_t max_field, bool crl_expired_accept)
{
    self->max_field = max_field;
    self->crl_expired_accept = crl_expired_accept;
}

void
fh_sig_verifier_destroy (fh_sig_verifier_t **self_p)
{
    fh_sig_verifier_t *self = *self_p;
    if (!self)
        return;
    X509_STORE_free (self->store);
    fh_sig_cache_destroy (&self->cache);
    free (self->blank.data);
    free (self->sig_text.data);
    free (self->cert_text.data);
    free (self->canonical.data);
    EVP_PKEY_CTX_free (self->verify);
    EVP_PKEY_free (self->last_key);
    if (self->rules)
        s_rules_free (self->rules, self->rule_count);
    free (self);
    *self_p = NULL;
}

size_t
fh_sig_verifier_cached (const fh_sig_verifier_t *self)
{
    return fh_sig_cache_entries (self->cache);
}

size_t
fh_sig_verifier_cached_bytes (const fh_sig_verifier_t *self)
{
    return fh_sig_cache_bytes (self->cache);
}

int64_t
fh_sig_verifier_crl_next_update (const fh_sig_verifier_t *self)
{
    return self->crl_next_update;
}

bool
fh_sig_verifier_crl_expired_accept (const fh_sig_verifier_t *self)
{
    return self->crl_expired_accept;
}

/* What a failed chain is called. */
static fh_sig_reason_t
s_chain_reason (int error)
{
    switch (error) {
    case X509_V_ERR_CERT_REVOKED: return FH_SIG_REVOKED;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_UNTRUSTED: return FH_SIG_UNKNOWN_CA;
    case X509_V_ERR_UNABLE_TO_GET_CRL:
    case X509_V_ERR_UNABLE_TO_GET_CRL_ISSUER:
    case X509_V_ERR_CRL_SIGNATURE_FAILURE:
    case X509_V_ERR_UNABLE_TO_DECRYPT_CRL_SIGNATURE:
    case X509_V_ERR_KEYUSAGE_NO_CRL_SIGN: return FH_SIG_CRL_ISSUER;
    case X509_V_ERR_CRL_HAS_EXPIRED:
    case X509_V_ERR_CRL_NOT_YET_VALID: return FH_SIG_CRL_EXPIRED;
    default: return FH_SIG_BAD_CHAIN; /* expired, not yet valid, not a CA, ... */
    }
}

/* Parses and checks a certificate field: key, name, end, chain. The key
   is kept only when the answer is FH_SIG_OK. */
static fh_sig_reason_t
s_cert_check (fh_sig_verifier_t *self, const char *field, size_t size, fh_sig_cert_t *cert)
{
    memset (cert, 0, sizeof *cert);
    fh_sig_reason_t reason = FH_SIG_BAD_CERTIFICATE;
    unsigned char *pem = NULL;
    int pem_size = s_base64_decode (field, size, &pem);
    BIO *in = pem_size > 0 ? BIO_new_mem_buf (pem, pem_size) : NULL;
    X509 *x509 = in ? PEM_read_bio_X509 (in, NULL, NULL, NULL) : NULL;
    BIO_free (in);
    free (pem);
    X509_STORE_CTX *ctx = x509 ? X509_STORE_CTX_new () : NULL;
    if (ctx && (cert->key = X509_get_pubkey (x509))
        && X509_STORE_CTX_init (ctx, self->store, x509, NULL) == 1) {
        X509_NAME_get_text_by_NID (X509_get_subject_name (x509), NID_commonName, cert->name,
                                   sizeof cert->name);
        cert->not_after = s_epoch (X509_get0_notAfter (x509), INT64_MAX);
        reason = X509_verify_cert (ctx) == 1 ? FH_SIG_OK
                                             : s_chain_reason (X509_STORE_CTX_get_error (ctx));
    }
    X509_STORE_CTX_free (ctx);
    X509_free (x509);
    ERR_clear_error ();
    if (reason != FH_SIG_OK) {
        EVP_PKEY_free (cert->key);
        cert->key = NULL;
    }
    return reason;
}

/* The certificate of a field, from the cache or checked now; its name
   into name. Failures are remembered by hash only. */
static fh_sig_reason_t
s_cert_lookup (fh_sig_verifier_t *self, const char *field, size_t size, int64_t now,
               const fh_sig_cert_t **cert_p, char *name, size_t name_size)
{
    fh_sig_hash_t hash;
    fh_sig_hash (field, size, &hash);
    const fh_sig_cert_t *cert = fh_sig_cache_good (self->cache, &hash);
    if (!cert) {
        int bad = fh_sig_cache_bad (self->cache, &hash, name, name_size);
        if (bad)
            return (fh_sig_reason_t) bad;
        fh_sig_cert_t fresh;
        fh_sig_reason_t reason = s_cert_check (self, field, size, &fresh);
        snprintf (name, name_size, "%s", fresh.name);
        if (reason != FH_SIG_OK) {
            fh_sig_cache_add_bad (self->cache, &hash, (int) reason, fresh.name);
            return reason;
        }
        cert = fh_sig_cache_add_good (self->cache, &hash, &fresh, size + S_KEY_COST);
        if (!cert)
            return FH_SIG_BAD_CERTIFICATE; /* out of memory: refused all the same */
    }
    snprintf (name, name_size, "%s", cert->name);
    if (now >= cert->not_after)
        return FH_SIG_BAD_CHAIN; /* it expired since it was checked */
    *cert_p = cert;
    return FH_SIG_OK;
}

/* topic is the envelope's (a \u0000 in it is a byte of it). */
static bool
s_allowed (const fh_sig_verifier_t *self, const char *topic, size_t topic_size, const char *name)
{
    for (size_t i = 0; i < self->rule_count; i++)
        if (strlen (self->rules[i].topic) == topic_size
            && memcmp (self->rules[i].topic, topic, topic_size) == 0) {
            for (size_t j = 0; j < self->rules[i].name_count; j++)
                if (strcmp (self->rules[i].names[j], name) == 0)
                    return true;
            return false;
        }
    return !self->nitpicky;
}

/* A context that verifies SHA-1 PKCS #1 v1.5 signatures of key: the
   last one's, or a new one. NULL when it cannot be made. */
static EVP_PKEY_CTX *
s_verify_context (fh_sig_verifier_t *self, EVP_PKEY *key)
{
    if (self->verify && self->last_key == key)
        return self->verify;
    EVP_PKEY_CTX_free (self->verify);
    EVP_PKEY_free (self->last_key);
    self->last_key = NULL;
    self->verify = EVP_PKEY_CTX_new (key, NULL);
    if (!self->verify || EVP_PKEY_verify_init (self->verify) != 1
        || EVP_PKEY_CTX_set_rsa_padding (self->verify, RSA_PKCS1_PADDING) != 1
        || EVP_PKEY_CTX_set_signature_md (self->verify, EVP_sha1 ()) != 1
        || EVP_PKEY_up_ref (key) != 1) {
        EVP_PKEY_CTX_free (self->verify);
        self->verify = NULL;
        return NULL;
    }
    self->last_key = key;
    return self->verify;
}

/* fedmsg's check: the SHA-1 of the message less its signature and
   certificate, re-encoded as fedmsg does, against the signature. */
static bool
s_signature_ok (fh_sig_verifier_t *self, EVP_PKEY *key, json_t *message, const char *sig_field,
                size_t sig_size)
{
    unsigned char *sig = NULL;
    int size = s_base64_decode (sig_field, sig_size, &sig);
    json_object_del (message, "signature");
    json_object_del (message, "certificate");
    fh_buf_t *canonical = &self->canonical;
    canonical->size = 0;
    canonical->failed = false;
    fh_pyjson_encode (canonical, message);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_size = 0;
    EVP_PKEY_CTX *verify = size > 0 && !canonical->failed ? s_verify_context (self, key) : NULL;
    bool ok
        = verify
          && EVP_Digest (canonical->data, canonical->size, digest, &digest_size, EVP_sha1 (), NULL)
                 == 1
          && EVP_PKEY_verify (verify, sig, (size_t) size, digest, digest_size) == 1;
    free (sig);
    ERR_clear_error ();
    return ok;
}

/* The checks once the envelope's fields are there: certificate (cert,
   or when NULL the field as written in raw, looked up among the recent
   ones first), CRL, signature, policy. */
static fh_sig_reason_t
s_check_signed (fh_sig_verifier_t *self, json_t *message, const fh_sig_raw_t *raw,
                const fh_buf_t *cert_field, const char *sig, size_t sig_size, const void *topic,
                size_t topic_size, fh_sig_detail_t *detail)
{
    const fh_sig_cert_t *cert = raw ? fh_sig_cache_recent (self->cache, raw->text, raw->size)
                                    : NULL;
    if ((!cert && cert_field->size > self->max_field) || sig_size > self->max_field)
        return FH_SIG_TOO_LARGE;
    int64_t now = (int64_t) time (NULL);
    fh_sig_reason_t reason = FH_SIG_OK;
    if (cert) {
        snprintf (detail->signer, sizeof detail->signer, "%s", cert->name);
        if (now >= cert->not_after)
            return FH_SIG_BAD_CHAIN; /* it expired since it was checked */
    }
    else {
        reason = s_cert_lookup (self, cert_field->data, cert_field->size, now, &cert,
                                detail->signer, sizeof detail->signer);
        if (reason != FH_SIG_OK)
            return reason;
        if (raw)
            fh_sig_cache_add_recent (self->cache, raw->text, raw->size, cert);
    }
    if (self->crl_next_update && now >= self->crl_next_update && !self->crl_expired_accept)
        return FH_SIG_CRL_EXPIRED;
    if (!s_signature_ok (self, cert->key, message, sig, sig_size))
        reason = FH_SIG_BAD_SIGNATURE;
    else if (!s_allowed (self, topic, topic_size, cert->name))
        reason = FH_SIG_NOT_ALLOWED;
    return reason;
}

/* A field of a message parsed whole, as text (the signature's stays
   alive after its removal from message: the caller holds a reference). */
static void
s_field_text (json_t *field, fh_buf_t *out)
{
    out->size = 0;
    out->failed = false;
    fh_buf_put (out, json_string_value (field), json_string_length (field));
}

fh_sig_reason_t
fh_sig_verify (fh_sig_verifier_t *self, const void *topic, size_t topic_size, const void *body,
               size_t body_size, fh_sig_detail_t *detail)
{
    fh_sig_detail_t scratch;
    if (!detail)
        detail = &scratch;
    detail->signer[0] = detail->msg_id[0] = '\0';
    fh_sig_fields_t fields;
    fh_sig_skim (body, body_size, &fields);
    if (fields.cert.least > self->max_field || fields.sig.least > self->max_field)
        return FH_SIG_TOO_LARGE; /* before any parsing */
    /* Plain (every real message): jansson reads the body without the two
       long strings, which are taken as written (sig_skim.h). */
    bool plain = fields.plain && fh_sig_blanked (body, body_size, &fields, &self->blank)
                 && fh_sig_unescape (&fields.sig, &self->sig_text);
    json_t *message = plain ? json_loadb (self->blank.data, self->blank.size, JSON_ALLOW_NUL, NULL)
                            : json_loadb (body, body_size, JSON_ALLOW_NUL, NULL);
    json_t *topic_json = json_object_get (message, "topic");
    json_t *sig = json_object_get (message, "signature");
    json_t *cert_json = json_object_get (message, "certificate");
    fh_fedmsg_id_copy (json_object_get (message, "msg_id"), detail->msg_id, sizeof detail->msg_id);
    fh_sig_reason_t reason;
    if (!json_is_string (topic_json) || !json_is_string (sig) || !json_is_string (cert_json))
        reason = FH_SIG_MISSING_FIELDS;
    else if (json_string_length (topic_json) != topic_size
             || memcmp (json_string_value (topic_json), topic, topic_size) != 0)
        reason = FH_SIG_TOPIC_MISMATCH;
    else if (plain) {
        /* The certificate's text is needed only when it is not a recent
           one (a recent one's text, as written, was read before). */
        bool cert_ok = fh_sig_cache_recent (self->cache, fields.cert.text, fields.cert.size)
                       || fh_sig_unescape (&fields.cert, &self->cert_text);
        if (!cert_ok) { /* a \u in it: the whole parse, as without the skim */
            json_t *whole = json_loadb (body, body_size, JSON_ALLOW_NUL, NULL);
            json_t *field = json_object_get (whole, "certificate");
            if ((cert_ok = json_is_string (field)))
                s_field_text (field, &self->cert_text);
            json_decref (whole);
        }
        reason = !cert_ok ? FH_SIG_MISSING_FIELDS
                          : s_check_signed (self, message, &fields.cert, &self->cert_text,
                                            self->sig_text.data, self->sig_text.size, topic,
                                            topic_size, detail);
    }
    else {
        s_field_text (cert_json, &self->cert_text);
        s_field_text (sig, &self->sig_text);
        reason = s_check_signed (self, message, NULL, &self->cert_text, self->sig_text.data,
                                 self->sig_text.size, topic, topic_size, detail);
    }
    json_decref (message);
    return reason;
}
