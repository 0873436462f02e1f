/*  fedmsg_sign - fedmsg's X.509 signatures (fedmsg.crypto.x509), with
    OpenSSL.

    Signing: "crypto": "x509" is added, then an RSA PKCS#1 v1.5 signature
    over SHA-1 of the canonical JSON of the message (pyjson.h), and the
    certificate's PEM; both are base64 in lines of 76 characters, each
    ended by '\n' (fedmsg's _prep_crypto_msg).

    Checking (the hub's bus.validate_signatures): the body without
    "signature" and "certificate", re-encoded canonically, must verify with
    the certificate's key; the envelope's topic must be the frame's; the
    certificate must chain to the CA and not be in the CRL, and the CRL be
    current (on_crl_expired); its common name must be allowed for the
    topic by the routing policy (a topic the policy does not list is
    allowed unless nitpicky). A certificate or signature field over the
    limit is refused before it is decoded. Certificates are parsed and
    checked once: those that verified are cached with their key, those
    that failed are remembered by hash and reason only (sig_cache.h), so a
    message costs a parse of its JSON, a hash of its certificate field and
    one signature verification, and memory stays bounded whatever comes.
    A verifier is used by one thread at a time (the enqueuer's).
*/
#ifndef FH_FEDMSG_SIGN_H_INCLUDED
#define FH_FEDMSG_SIGN_H_INCLUDED

#include "fedmsg.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    FH_SIG_OK,
    FH_SIG_MISSING_FIELDS,  /* not a JSON object, or no topic, signature or certificate */
    FH_SIG_BAD_CERTIFICATE, /* the certificate field is not a certificate */
    FH_SIG_BAD_SIGNATURE,   /* the signature does not match the body */
    FH_SIG_TOPIC_MISMATCH,  /* the envelope's topic is not the frame's */
    FH_SIG_UNKNOWN_CA,      /* the certificate does not chain to the CA */
    FH_SIG_REVOKED,         /* the certificate is in the CRL */
    FH_SIG_NOT_ALLOWED,     /* its name may not send this topic */
    FH_SIG_TOO_LARGE,       /* the certificate or signature field is over max_field_bytes */
    FH_SIG_BAD_CHAIN,       /* the chain fails otherwise: expired, not yet valid, not a CA */
    FH_SIG_CRL_EXPIRED,     /* the CRL is past its nextUpdate (on_crl_expired: reject) */
    FH_SIG_CRL_ISSUER,      /* no CRL of the certificate's issuer (a CA the CRL is not of) */
    FH_SIG_REASONS
} fh_sig_reason_t;

/* "missing_fields", "bad_signature", ... */
const char *fh_sig_reason_name (fh_sig_reason_t reason);

/* Loads a PEM private key and its PEM certificate. NULL with why in err. */
fh_fedmsg_signer_t *fh_fedmsg_signer_new (const char *key_file, const char *cert_file, char *err,
                                          size_t errlen);
void fh_fedmsg_signer_destroy (fh_fedmsg_signer_t **self_p);
/* Adds crypto, signature and certificate to message (a JSON object).
   Returns 0, or -1 with why in err. */
int fh_fedmsg_sign (fh_fedmsg_signer_t *self, json_t *message, char *err, size_t errlen);

typedef struct fh_sig_verifier fh_sig_verifier_t;

/* One entry of a routing policy: the certificate names allowed to send
   topic. */
typedef struct {
    const char *topic;
    const char *const *names;
    size_t name_count;
} fh_sig_policy_t;

/* The certificate and signature fields' default limit, bytes: a real
   fedmsg certificate field is under 3 KiB, a signature under 1 KiB. */
#define FH_SIG_FIELD_MAX_DEFAULT 16384

/* ca_file: PEM certificates (required); crl_file: PEM CRL or NULL. The
   policy is copied. NULL with why in err (naming the file). A CRL is
   refused unless a CA certificate of ca_file issued it (its subject is
   the CRL's issuer and its key verifies the CRL) and now is within its
   lastUpdate and nextUpdate: err says which, with the date. */
fh_sig_verifier_t *fh_sig_verifier_new (const char *ca_file, const char *crl_file,
                                        const fh_sig_policy_t *policy, size_t policy_count,
                                        bool nitpicky, char *err, size_t errlen);
void fh_sig_verifier_destroy (fh_sig_verifier_t **self_p);
/* max_field: the most bytes a certificate or signature field may have
   (more: FH_SIG_TOO_LARGE, before it is decoded); crl_expired_accept:
   once the CRL is past its nextUpdate, certificates it does not revoke
   still pass (else FH_SIG_CRL_EXPIRED). Defaults:
   FH_SIG_FIELD_MAX_DEFAULT, false. */
void fh_sig_verifier_set_limits (fh_sig_verifier_t *self, size_t max_field,
                                 bool crl_expired_accept);
/* The CRL's nextUpdate, seconds since the epoch; 0 when there is no CRL
   or it has none. */
int64_t fh_sig_verifier_crl_next_update (const fh_sig_verifier_t *self);
/* on_crl_expired: accept. */
bool fh_sig_verifier_crl_expired_accept (const fh_sig_verifier_t *self);

/* What a check found out, for the log line. */
typedef struct {
    char signer[128];               /* the certificate's common name, or "" */
    char msg_id[FH_FEDMSG_ID_SIZE]; /* or "" */
} fh_sig_detail_t;

/* Checks one bus message (its topic frame and body). detail may be NULL. */
fh_sig_reason_t fh_sig_verify (fh_sig_verifier_t *self, const void *topic, size_t topic_size,
                               const void *body, size_t body_size, fh_sig_detail_t *detail);

/* Good certificates in the cache and the bytes they count, for tests. */
size_t fh_sig_verifier_cached (const fh_sig_verifier_t *self);
size_t fh_sig_verifier_cached_bytes (const fh_sig_verifier_t *self);

#endif
