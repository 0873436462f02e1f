/*  fedmsg_sign and fedmsg: the envelope, signing and checking agree, the
    certificate cache makes a check a signature verification, msg_id is
    found where a message is named. Keys and certificates are made here
    with OpenSSL (the integration test test_fedmsg.py makes them with the
    openssl command and checks against Python's cryptography).
*/
#include "fedmsg.h"
#include "fedmsg_sign.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char s_dir[] = "/tmp/fanhub-fedmsg-XXXXXX";

static EVP_PKEY *
s_key (void)
{
    EVP_PKEY *key = EVP_RSA_gen (2048);
    assert_non_null (key);
    return key;
}

/* A certificate for key named cn, signed by issuer (self-signed when
   issuer_key is key). */
static X509 *
s_cert (EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, long serial)
{
    X509 *cert = X509_new ();
    assert_non_null (cert);
    ASN1_INTEGER_set (X509_get_serialNumber (cert), serial);
    X509_gmtime_adj (X509_getm_notBefore (cert), -60);
    X509_gmtime_adj (X509_getm_notAfter (cert), 3600);
    X509_set_pubkey (cert, key);
    X509_NAME *name = X509_get_subject_name (cert);
    X509_NAME_add_entry_by_txt (name, "CN", MBSTRING_ASC, (const unsigned char *) cn, -1, -1, 0);
    X509_set_issuer_name (cert, issuer ? X509_get_subject_name (issuer) : name);
    assert_true (X509_sign (cert, issuer_key, EVP_sha256 ()) > 0);
    return cert;
}

static char *
s_write (const char *file, EVP_PKEY *key, X509 *cert)
{
    static char path[256];
    snprintf (path, sizeof path, "%s/%s", s_dir, file);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    if (key)
        assert_int_equal (PEM_write_PrivateKey (out, key, NULL, NULL, 0, NULL, NULL), 1);
    if (cert)
        assert_int_equal (PEM_write_X509 (out, cert), 1);
    fclose (out);
    return path;
}

typedef struct {
    fh_fedmsg_signer_t *alice, *eve;
    fh_sig_verifier_t *verifier;
} s_pki_t;

static int
s_setup (void **state)
{
    assert_non_null (mkdtemp (s_dir));
    static s_pki_t pki;
    EVP_PKEY *ca_key = s_key (), *alice_key = s_key (), *eve_key = s_key ();
    X509 *ca = s_cert (ca_key, "ca", NULL, ca_key, 1);
    X509 *alice = s_cert (alice_key, "alice", ca, ca_key, 2);
    X509 *eve = s_cert (eve_key, "eve", NULL, eve_key, 3); /* her own CA */
    char err[512], key_path[256];
    snprintf (key_path, sizeof key_path, "%s", s_write ("alice.key", alice_key, NULL));
    pki.alice
        = fh_fedmsg_signer_new (key_path, s_write ("alice.crt", NULL, alice), err, sizeof err);
    assert_non_null (pki.alice);
    snprintf (key_path, sizeof key_path, "%s", s_write ("eve.key", eve_key, NULL));
    pki.eve = fh_fedmsg_signer_new (key_path, s_write ("eve.crt", NULL, eve), err, sizeof err);
    assert_non_null (pki.eve);
    static const char *const names[] = {"alice"};
    fh_sig_policy_t policy = {"org.a", names, 1};
    pki.verifier = fh_sig_verifier_new (s_write ("ca.crt", NULL, ca), NULL, &policy, 1, false, err,
                                        sizeof err);
    assert_non_null (pki.verifier);
    X509_free (ca);
    X509_free (alice);
    X509_free (eve);
    EVP_PKEY_free (ca_key);
    EVP_PKEY_free (alice_key);
    EVP_PKEY_free (eve_key);
    *state = &pki;
    return 0;
}

static int
s_teardown (void **state)
{
    s_pki_t *pki = *state;
    fh_fedmsg_signer_destroy (&pki->alice);
    fh_fedmsg_signer_destroy (&pki->eve);
    fh_sig_verifier_destroy (&pki->verifier);
    char command[512];
    snprintf (command, sizeof command, "rm -rf %s", s_dir);
    return system (command) == 0 ? 0 : -1;
}

static fh_sig_reason_t
s_check (s_pki_t *pki, const char *topic, fh_fedmsg_signer_t *signer, const char *body)
{
    fh_buf_t buf = {0};
    char err[256];
    assert_int_equal (fh_fedmsg_wrap (topic, strlen (topic), body, strlen (body), 1, 1700000000,
                                      "me", signer, &buf, err, sizeof err),
                      0);
    fh_sig_reason_t reason
        = fh_sig_verify (pki->verifier, topic, strlen (topic), buf.data, buf.size, NULL);
    free (buf.data);
    return reason;
}

static void
test_sign_and_check_agree (void **state)
{
    s_pki_t *pki = *state;
    assert_int_equal (s_check (pki, "org.a", pki->alice, "{\"x\":1.5}"), FH_SIG_OK);
    assert_int_equal (s_check (pki, "org.other", pki->alice, "text"), FH_SIG_OK);
    assert_int_equal (s_check (pki, "org.a", pki->eve, "{}"), FH_SIG_UNKNOWN_CA);
    assert_int_equal (s_check (pki, "org.a", NULL, "{}"), FH_SIG_MISSING_FIELDS);
    fh_sig_detail_t detail;
    const char *body = "[1]";
    assert_int_equal (fh_sig_verify (pki->verifier, "t", 1, body, strlen (body), &detail),
                      FH_SIG_MISSING_FIELDS);
    assert_string_equal (detail.signer, "");
}

/* A hundred checks of one signer's messages parse its certificate once. */
static void
test_cache_keeps_one_parse_per_certificate (void **state)
{
    s_pki_t *pki = *state;
    size_t before = fh_sig_verifier_cached (pki->verifier);
    for (int i = 0; i < 100; i++)
        assert_int_equal (s_check (pki, "org.a", pki->alice, "{}"), FH_SIG_OK);
    assert_int_equal (fh_sig_verifier_cached (pki->verifier), before ? before : 1);
}

/* Fields over the limit are too_large, read before the parse or after it
   (a key written with escapes); a nested "certificate" is no field of the
   envelope. Failed certificates never enter the cache of good ones. */
static void
test_limits_and_failed_certificates (void **state)
{
    s_pki_t *pki = *state;
    fh_sig_verifier_set_limits (pki->verifier, 2048, false);
    char big[3001];
    memset (big, 'A', 3000);
    big[3000] = '\0';
    char body[4096];
    snprintf (body, sizeof body,
              "{\"topic\":\"org.a\",\"signature\":\"c2ln\",\"certificate\":\"%s\"}", big);
    assert_int_equal (fh_sig_verify (pki->verifier, "org.a", 5, body, strlen (body), NULL),
                      FH_SIG_TOO_LARGE);
    snprintf (body, sizeof body,
              "{\"topic\":\"org.a\",\"certificate\":\"bm90\",\"signatur\\u0065\":\"%s\"}", big);
    assert_int_equal (fh_sig_verify (pki->verifier, "org.a", 5, body, strlen (body), NULL),
                      FH_SIG_TOO_LARGE);
    snprintf (body, sizeof body,
              "{\"msg\":{\"certificate\":\"%s\"},\"topic\":\"org.a\",\"signature\":\"c2ln\","
              "\"certificate\":\"bm90\"}",
              big);
    assert_int_equal (fh_sig_verify (pki->verifier, "org.a", 5, body, strlen (body), NULL),
                      FH_SIG_BAD_CERTIFICATE);
    size_t cached = fh_sig_verifier_cached (pki->verifier);
    for (int i = 0; i < 100; i++) {
        snprintf (body, sizeof body,
                  "{\"topic\":\"org.a\",\"signature\":\"c2ln\",\"certificate\":\"%08d\"}", i);
        assert_int_equal (fh_sig_verify (pki->verifier, "org.a", 5, body, strlen (body), NULL),
                          FH_SIG_BAD_CERTIFICATE);
    }
    assert_int_equal (fh_sig_verifier_cached (pki->verifier), cached);
    fh_sig_verifier_set_limits (pki->verifier, FH_SIG_FIELD_MAX_DEFAULT, false);
    assert_int_equal (s_check (pki, "org.a", pki->alice, "{}"), FH_SIG_OK);
    assert_true (fh_sig_verifier_cached_bytes (pki->verifier) > 2048);
}

static void
test_tampering_is_named (void **state)
{
    s_pki_t *pki = *state;
    fh_buf_t buf = {0};
    char err[256];
    assert_int_equal (fh_fedmsg_wrap ("org.a", 5, "{\"n\":1}", 7, 7, 1700000000, "me", pki->alice,
                                      &buf, err, sizeof err),
                      0);
    fh_buf_put (&buf, "", 1); /* a C string for strstr; not part of the body */
    buf.size--;
    fh_sig_detail_t detail;
    assert_int_equal (fh_sig_verify (pki->verifier, "org.b", 5, buf.data, buf.size, &detail),
                      FH_SIG_TOPIC_MISMATCH);
    char *at = strstr (buf.data, "\"n\":1");
    assert_non_null (at);
    at[4] = '2';
    assert_int_equal (fh_sig_verify (pki->verifier, "org.a", 5, buf.data, buf.size, &detail),
                      FH_SIG_BAD_SIGNATURE);
    assert_string_equal (detail.signer, "alice");
    char id[FH_FEDMSG_ID_SIZE];
    assert_true (fh_fedmsg_msg_id (buf.data, buf.size, id, sizeof id));
    assert_string_equal (detail.msg_id, id);
    free (buf.data);
}

static void
test_msg_id (void **state)
{
    (void) state;
    char id[FH_FEDMSG_ID_SIZE], note[80];
    const char *body = "{\"msg\":{\"msg_id\":\"inner\"},\"msg_id\":\"2026-a\\u0001b\"}";
    assert_true (fh_fedmsg_msg_id (body, strlen (body), id, sizeof id));
    assert_string_equal (id, "2026-a?b"); /* a control character cannot reach a log */
    body = "{\"s\":\"\\u0000\",\"msg_id\":\"2026-a\\u0000b\"}"; /* JSON, NULs and all */
    assert_true (fh_fedmsg_msg_id (body, strlen (body), id, sizeof id));
    assert_string_equal (id, "2026-a?b");
    assert_false (fh_fedmsg_msg_id ("{\"seq\":1}", 9, id, sizeof id));
    assert_false (fh_fedmsg_msg_id ("\"msg_id\" not json", 17, id, sizeof id));
    fh_fedmsg_id_note ((fanhub_bytes_t){"{}", 2}, note, sizeof note);
    assert_string_equal (note, "");
    fh_fedmsg_id_note ((fanhub_bytes_t){body, strlen (body)}, note, sizeof note);
    assert_string_equal (note, " msg_id 2026-a?b");
    char fresh[FH_FEDMSG_ID_SIZE];
    assert_int_equal (fh_fedmsg_new_id (fresh), 0);
    assert_int_equal (strlen (fresh), 41);
    assert_int_equal (fresh[4 + 15], '4'); /* UUID version 4 */
}

static void
test_signer_refuses (void **state)
{
    (void) state;
    char err[512], path[300];
    snprintf (path, sizeof path, "%s/none.key", s_dir);
    assert_null (fh_fedmsg_signer_new (path, path, err, sizeof err));
    assert_non_null (strstr (err, "none.key"));
    snprintf (path, sizeof path, "%s/alice.key", s_dir);
    char cert[300];
    snprintf (cert, sizeof cert, "%s/eve.crt", s_dir);
    assert_null (fh_fedmsg_signer_new (path, cert, err, sizeof err));
    assert_non_null (strstr (err, "not the key's"));
    assert_null (fh_sig_verifier_new (path, NULL, NULL, 0, false, err, sizeof err));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_sign_and_check_agree),
        cmocka_unit_test (test_cache_keeps_one_parse_per_certificate),
        cmocka_unit_test (test_tampering_is_named),
        cmocka_unit_test (test_limits_and_failed_certificates),
        cmocka_unit_test (test_msg_id),
        cmocka_unit_test (test_signer_refuses),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
