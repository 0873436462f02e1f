/*  evp_verify - the signatures case's yardstick: OpenSSL's RSA-2048
    verification of one signed fedmsg message, timed in a process of ours.

    Usage: evp_verify CERT.pem PAYLOAD SIGNATURE [COUNT]

    CERT.pem is the signer's certificate, PAYLOAD the canonical bytes that
    were signed (what the hub re-encodes a message to), SIGNATURE the raw
    RSA PKCS#1 v1.5 SHA-1 signature: the bench writes them from the same
    message it sends. The key is read once; then COUNT times (default
    20,000) EVP_DigestVerifyInit and EVP_DigestVerify over the payload (a
    verification as OpenSSL's one-shot EVP API does it), then COUNT times
    SHA-1 and EVP_PKEY_verify with a context made once (what the hub does
    a message: its context is made once per key). Each loop is timed on
    this thread's CPU clock; prints one JSON object:
    {"count": N, "digest_verify_ns": X, "pkey_verify_ns": Y}. Exit status 1
    when a verification fails.
*/
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned char *
s_slurp (const char *path, size_t *size)
{
    FILE *f = fopen (path, "rb");
    if (!f)
        return NULL;
    unsigned char *data = NULL;
    size_t cap = 0, used = 0;
    while (1) {
        if (used == cap) {
            cap = cap ? 2 * cap : 4096;
            unsigned char *more = realloc (data, cap);
            if (!more) {
                free (data);
                fclose (f);
                return NULL;
            }
            data = more;
        }
        size_t n = fread (data + used, 1, cap - used, f);
        used += n;
        if (n == 0)
            break;
    }
    fclose (f);
    *size = used;
    return data;
}

static int64_t
s_cpu_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int
main (int argc, char *argv[])
{
    if (argc < 4 || argc > 5) {
        fprintf (stderr, "usage: evp_verify CERT.pem PAYLOAD SIGNATURE [COUNT]\n");
        return 2;
    }
    long count = argc == 5 ? strtol (argv[4], NULL, 10) : 20000;
    if (count <= 0)
        count = 1;
    FILE *f = fopen (argv[1], "r");
    X509 *cert = f ? PEM_read_X509 (f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose (f);
    EVP_PKEY *key = cert ? X509_get_pubkey (cert) : NULL;
    size_t payload_size = 0, sig_size = 0;
    unsigned char *payload = s_slurp (argv[2], &payload_size);
    unsigned char *sig = s_slurp (argv[3], &sig_size);
    EVP_MD_CTX *md = EVP_MD_CTX_new ();
    EVP_PKEY_CTX *pkey = key ? EVP_PKEY_CTX_new (key, NULL) : NULL;
    if (!key || !payload || !sig || !md || !pkey || EVP_PKEY_verify_init (pkey) != 1
        || EVP_PKEY_CTX_set_rsa_padding (pkey, RSA_PKCS1_PADDING) != 1
        || EVP_PKEY_CTX_set_signature_md (pkey, EVP_sha1 ()) != 1) {
        fprintf (stderr, "evp_verify: cannot read the certificate, payload or signature\n");
        return 1;
    }
    int ok = 1;
    int64_t t0 = s_cpu_ns ();
    for (long i = 0; i < count && ok; i++)
        ok = EVP_DigestVerifyInit (md, NULL, EVP_sha1 (), NULL, key) == 1
             && EVP_DigestVerify (md, sig, sig_size, payload, payload_size) == 1;
    int64_t t1 = s_cpu_ns ();
    for (long i = 0; i < count && ok; i++) {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int digest_size = 0;
        ok = EVP_Digest (payload, payload_size, digest, &digest_size, EVP_sha1 (), NULL) == 1
             && EVP_PKEY_verify (pkey, sig, sig_size, digest, digest_size) == 1;
    }
    int64_t t2 = s_cpu_ns ();
    if (!ok) {
        fprintf (stderr, "evp_verify: the signature does not verify\n");
        return 1;
    }
    printf ("{\"count\": %ld, \"digest_verify_ns\": %.1f, \"pkey_verify_ns\": %.1f}\n", count,
            (double) (t1 - t0) / (double) count, (double) (t2 - t1) / (double) count);
    EVP_PKEY_CTX_free (pkey);
    EVP_MD_CTX_free (md);
    EVP_PKEY_free (key);
    X509_free (cert);
    free (payload);
    free (sig);
    return 0;
}
