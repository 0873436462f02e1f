/*  fedmsg_sign - fedmsg's X.509 signatures, with OpenSSL. See
    fedmsg_sign.h. */
#include "fedmsg_sign.h"

#include <czmq.h>
#include <fanhub/sdk.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Past this many certificates the cache starts again: a bus has a few
   dozen signers, so only a flood of made-up certificates reaches it. */
#define S_CACHE_MAX 4096
/* fedmsg's _prep_crypto_msg: base64 in lines of 76 characters. */
#define S_LINE 76

struct fh_fedmsg_signer {
    EVP_PKEY *key;
    char *cert_b64; /* the certificate field, ready */
};

typedef struct {
    EVP_PKEY *key;         /* NULL when the certificate did not parse */
    fh_sig_reason_t chain; /* OK, BAD_CERTIFICATE, UNKNOWN_CA or REVOKED */
    char name[128];        /* its common name */
} s_cert_t;

typedef struct {
    char *topic;
    char **names;
    size_t name_count;
} s_rule_t;

struct fh_sig_verifier {
    X509_STORE *store;
    zhashx_t *cache; /* certificate field -> s_cert_t */
    s_rule_t *rules;
    size_t rule_count;
    bool nitpicky;
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

static void
s_cert_free (void **item_p)
{
    s_cert_t *cert = *item_p;
    if (cert) {
        EVP_PKEY_free (cert->key);
        free (cert);
        *item_p = NULL;
    }
}

/* Adds the CRL of crl_file to store and turns revocation checks on. */
static int
s_load_crl (X509_STORE *store, const char *crl_file, char *err, size_t errlen)
{
    BIO *in = BIO_new_file (crl_file, "r");
    X509_CRL *crl = in ? PEM_read_bio_X509_CRL (in, NULL, NULL, NULL) : NULL;
    BIO_free (in);
    int rc = crl && X509_STORE_add_crl (store, crl) == 1 ? 0 : -1;
    X509_CRL_free (crl);
    if (rc < 0)
        s_ssl_error (err, errlen, crl_file, "not a PEM CRL");
    else
        X509_STORE_set_flags (store, X509_V_FLAG_CRL_CHECK);
    return rc;
}

fh_sig_verifier_t *
fh_sig_verifier_new (const char *ca_file, const char *crl_file, const fh_sig_policy_t *policy,
                     size_t policy_count, bool nitpicky, char *err, size_t errlen)
{
    fh_sig_verifier_t *self = calloc (1, sizeof *self);
    if (!self || !(self->store = X509_STORE_new ()) || !(self->cache = zhashx_new ())
        || !(self->rules = s_rules_copy (policy, policy_count))) {
        snprintf (err, errlen, "out of memory");
        fh_sig_verifier_destroy (&self);
        return NULL;
    }
    self->rule_count = policy_count;
    self->nitpicky = nitpicky;
    zhashx_set_destructor (self->cache, s_cert_free);
    if (X509_STORE_load_file (self->store, ca_file) != 1) {
        s_ssl_error (err, errlen, ca_file, "no PEM certificate in it");
        fh_sig_verifier_destroy (&self);
        return NULL;
    }
    if (crl_file && s_load_crl (self->store, crl_file, err, errlen) < 0) {
        fh_sig_verifier_destroy (&self);
        return NULL;
    }
    return self;
}

void
fh_sig_verifier_destroy (fh_sig_verifier_t **self_p)
{
    fh_sig_verifier_t *self = *self_p;
    if (!self)
        return;
    X509_STORE_free (self->store);
    zhashx_destroy (&self->cache);
    if (self->rules)
        s_rules_free (self->rules, self->rule_count);
    free (self);
    *self_p = NULL;
}

size_t
fh_sig_verifier_cached (const fh_sig_verifier_t *self)
{
    return zhashx_size (self->cache);
}

/* Parses and checks a certificate field once: key, name, chain. */
static s_cert_t *
s_cert_check (fh_sig_verifier_t *self, const char *field, size_t size)
{
    s_cert_t *cert = calloc (1, sizeof *cert);
    if (!cert)
        return NULL;
    cert->chain = FH_SIG_BAD_CERTIFICATE;
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
        if (X509_verify_cert (ctx) == 1)
            cert->chain = FH_SIG_OK;
        else
            cert->chain = X509_STORE_CTX_get_error (ctx) == X509_V_ERR_CERT_REVOKED
                              ? FH_SIG_REVOKED
                              : FH_SIG_UNKNOWN_CA;
    }
    X509_STORE_CTX_free (ctx);
    X509_free (x509);
    ERR_clear_error ();
    return cert;
}

static s_cert_t *
s_cert_lookup (fh_sig_verifier_t *self, const char *field, size_t size)
{
    s_cert_t *cert = zhashx_lookup (self->cache, field);
    if (cert)
        return cert;
    if (!(cert = s_cert_check (self, field, size)))
        return NULL;
    if (zhashx_size (self->cache) >= S_CACHE_MAX)
        zhashx_purge (self->cache);
    zhashx_insert (self->cache, field, cert);
    return cert;
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

static bool
s_signature_ok (EVP_PKEY *key, json_t *message, const char *sig_field, size_t sig_size)
{
    unsigned char *sig = NULL;
    int size = s_base64_decode (sig_field, sig_size, &sig);
    json_object_del (message, "signature");
    json_object_del (message, "certificate");
    fh_buf_t canonical = {0};
    fh_pyjson_encode (&canonical, message);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
    bool ok = size > 0 && !canonical.failed && ctx
              && EVP_DigestVerifyInit (ctx, NULL, EVP_sha1 (), NULL, key) == 1
              && EVP_DigestVerify (ctx, sig, (size_t) size, (const unsigned char *) canonical.data,
                                   canonical.size)
                     == 1;
    EVP_MD_CTX_free (ctx);
    free (canonical.data);
    free (sig);
    ERR_clear_error ();
    return ok;
}

fh_sig_reason_t
fh_sig_verify (fh_sig_verifier_t *self, const void *topic, size_t topic_size, const void *body,
               size_t body_size, fh_sig_detail_t *detail)
{
    fh_sig_detail_t scratch;
    if (!detail)
        detail = &scratch;
    detail->signer[0] = detail->msg_id[0] = '\0';
    json_t *message = json_loadb (body, body_size, JSON_ALLOW_NUL, NULL);
    json_t *topic_json = json_object_get (message, "topic");
    json_t *sig = json_object_get (message, "signature");
    json_t *cert_json = json_object_get (message, "certificate");
    fh_fedmsg_id_copy (json_object_get (message, "msg_id"), detail->msg_id, sizeof detail->msg_id);
    fh_sig_reason_t reason = FH_SIG_OK;
    s_cert_t *cert = NULL;
    if (!json_is_string (topic_json) || !json_is_string (sig) || !json_is_string (cert_json))
        reason = FH_SIG_MISSING_FIELDS;
    else if (json_string_length (topic_json) != topic_size
             || memcmp (json_string_value (topic_json), topic, topic_size) != 0)
        reason = FH_SIG_TOPIC_MISMATCH;
    else if (!(cert = s_cert_lookup (self, json_string_value (cert_json),
                                     json_string_length (cert_json))))
        reason = FH_SIG_BAD_CERTIFICATE; /* out of memory: refused all the same */
    else {
        snprintf (detail->signer, sizeof detail->signer, "%s", cert->name);
        if (cert->chain != FH_SIG_OK)
            reason = cert->chain;
        else {
            /* The signature text outlives its removal from message. */
            json_incref (sig);
            if (!s_signature_ok (cert->key, message, json_string_value (sig),
                                 json_string_length (sig)))
                reason = FH_SIG_BAD_SIGNATURE;
            else if (!s_allowed (self, topic, topic_size, cert->name))
                reason = FH_SIG_NOT_ALLOWED;
            json_decref (sig);
        }
    }
    json_decref (message);
    return reason;
}
