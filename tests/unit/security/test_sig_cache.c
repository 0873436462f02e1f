/*  test_sig_cache - what bus.validate_signatures remembers, and at what
    cost: good certificates bounded in entries and in bytes, failed ones
    by hash in a fixed table where a newer failure takes an older one's
    slot.
*/
#include "sig_cache.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static fh_sig_cert_t
s_cert (const char *name)
{
    fh_sig_cert_t cert = {.key = EVP_PKEY_new (), .not_after = INT64_MAX};
    assert_non_null (cert.key);
    snprintf (cert.name, sizeof cert.name, "%s", name);
    return cert;
}

static void
test_hash_is_every_byte (void **state)
{
    (void) state;
    fh_sig_hash_t a, b, c;
    fh_sig_hash ("a\0b", 3, &a);
    fh_sig_hash ("a\0c", 3, &b);
    fh_sig_hash ("a", 1, &c);
    assert_memory_not_equal (&a, &b, sizeof a);
    assert_memory_not_equal (&a, &c, sizeof a);
    fh_sig_hash ("a\0b", 3, &b);
    assert_memory_equal (&a, &b, sizeof a);
}

static void
test_good_bounded_by_entries_and_bytes (void **state)
{
    (void) state;
    fh_sig_cache_t *cache = fh_sig_cache_new (3, 10000);
    assert_non_null (cache);
    fh_sig_hash_t h[5];
    const char *names[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 3; i++) {
        fh_sig_hash (names[i], 1, &h[i]);
        fh_sig_cert_t cert = s_cert (names[i]);
        const fh_sig_cert_t *kept = fh_sig_cache_add_good (cache, &h[i], &cert, 1000);
        assert_non_null (kept);
        assert_string_equal (kept->name, names[i]);
    }
    assert_int_equal (fh_sig_cache_entries (cache), 3);
    assert_int_equal (fh_sig_cache_bytes (cache), 3000);
    assert_string_equal (fh_sig_cache_good (cache, &h[1])->name, "b");
    /* A fourth entry: past the entries' bound, the cache starts again. */
    fh_sig_hash ("d", 1, &h[3]);
    fh_sig_cert_t cert = s_cert ("d");
    assert_non_null (fh_sig_cache_add_good (cache, &h[3], &cert, 1000));
    assert_int_equal (fh_sig_cache_entries (cache), 1);
    assert_null (fh_sig_cache_good (cache, &h[1]));
    /* One that would pass the bytes' bound: the same. */
    fh_sig_hash ("e", 1, &h[4]);
    cert = s_cert ("e");
    assert_non_null (fh_sig_cache_add_good (cache, &h[4], &cert, 9500));
    assert_int_equal (fh_sig_cache_entries (cache), 1);
    assert_int_equal (fh_sig_cache_bytes (cache), 9500);
    assert_null (fh_sig_cache_good (cache, &h[3]));
    fh_sig_cache_destroy (&cache);
    assert_null (cache);
    fh_sig_cache_destroy (&cache);
}

static void
test_bad_by_hash_in_fixed_slots (void **state)
{
    (void) state;
    fh_sig_cache_t *cache = fh_sig_cache_new (16, 1 << 20);
    char name[64];
    fh_sig_hash_t x, y;
    fh_sig_hash ("x", 1, &x);
    assert_int_equal (fh_sig_cache_bad (cache, &x, name, sizeof name), 0);
    fh_sig_cache_add_bad (cache, &x, 5, "eve");
    assert_int_equal (fh_sig_cache_bad (cache, &x, name, sizeof name), 5);
    assert_string_equal (name, "eve");
    /* Another hash in the same slot takes it: x is forgotten, never
       mistaken for y. */
    y = x;
    y.bytes[31] ^= 1;
    fh_sig_cache_add_bad (cache, &y, 3, "");
    assert_int_equal (fh_sig_cache_bad (cache, &x, name, sizeof name), 0);
    assert_int_equal (fh_sig_cache_bad (cache, &y, name, sizeof name), 3);
    /* Failures never count as good ones. */
    assert_int_equal (fh_sig_cache_entries (cache), 0);
    assert_null (fh_sig_cache_good (cache, &y));
    fh_sig_cache_destroy (&cache);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_hash_is_every_byte),
        cmocka_unit_test (test_good_bounded_by_entries_and_bytes),
        cmocka_unit_test (test_bad_by_hash_in_fixed_slots),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
