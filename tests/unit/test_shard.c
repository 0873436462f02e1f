/*  test_shard - `shard:`: which messages a consumer's share holds.

    The hash is a promise to operators (the same shard on every machine
    and in every version), so it is checked against the published FNV-1a
    test vectors. Then: N shards of one key space are disjoint and cover
    it, a shard follows order_by (a segment, a JSON member), a key that
    cannot be read falls in the shard of "", and a bad order_by is
    refused.
*/
#include "shard.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static fh_msg_t *
make_msg (const char *topic, const char *body)
{
    zmq_msg_t frames[2];
    const char *data[] = {topic, body};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal (zmq_msg_init_size (&frames[i], strlen (data[i])), 0);
        memcpy (zmq_msg_data (&frames[i]), data[i], strlen (data[i]));
    }
    fh_msg_t *msg = fh_msg_new (frames, 2, 1, 0);
    assert_non_null (msg);
    for (size_t i = 0; i < 2; i++)
        zmq_msg_close (&frames[i]);
    atomic_store (&msg->holders, 1);
    return msg;
}

static fh_shard_t *
shard_ok (size_t index, size_t count, const char *order_by)
{
    char err[256] = "";
    fh_shard_t *shard = fh_shard_new (index, count, order_by, err, sizeof err);
    if (!shard)
        fail_msg ("shard %zu/%zu: %s", index, count, err);
    return shard;
}

static void
test_hash_is_fnv1a_64 (void **state)
{
    (void) state;
    assert_true (fh_shard_hash ("", 0) == UINT64_C (0xcbf29ce484222325));
    assert_true (fh_shard_hash ("a", 1) == UINT64_C (0xaf63dc4c8601ec8c));
    assert_true (fh_shard_hash ("foobar", 6) == UINT64_C (0x85944171f73967e8));
    /* The shard is the hash modulo N. */
    assert_int_equal (fh_shard_of ("a", 1, 7), (size_t) (UINT64_C (0xaf63dc4c8601ec8c) % 7));
    assert_int_equal (fh_shard_of ("anything", 8, 1), 0);
}

static void
test_shards_are_disjoint_and_cover (void **state)
{
    (void) state;
    enum { N = 3, KEYS = 300 };
    fh_shard_t *shards[N];
    for (size_t i = 0; i < N; i++)
        shards[i] = shard_ok (i, N, NULL); /* the whole topic */
    size_t per_shard[N] = {0};
    for (int k = 0; k < KEYS; k++) {
        char topic[32];
        snprintf (topic, sizeof topic, "org.test.key%d", k);
        fh_msg_t *msg = make_msg (topic, "{}");
        size_t takers = 0;
        for (size_t i = 0; i < N; i++)
            if (fh_shard_takes (shards[i], msg)) {
                takers++;
                per_shard[i]++;
                assert_int_equal (i, fh_shard_of (topic, strlen (topic), N));
            }
        assert_int_equal (takers, 1);
        fh_msg_release (msg, NULL);
    }
    /* Spread: none empty (300 keys over 3 shards). */
    for (size_t i = 0; i < N; i++) {
        assert_true (per_shard[i] > 0);
        fh_shard_destroy (&shards[i]);
        fh_shard_destroy (&shards[i]); /* safe twice */
    }
}

static void
test_shard_follows_order_by (void **state)
{
    (void) state;
    /* Segment 2: the topics differ elsewhere, the key is "k7" for both. */
    fh_shard_t *by_segment = shard_ok (fh_shard_of ("k7", 2, 4), 4, "topic_segment:2");
    fh_msg_t *a = make_msg ("org.x.k7.created", "{}");
    fh_msg_t *b = make_msg ("net.y.k7", "{}");
    assert_true (fh_shard_takes (by_segment, a));
    assert_true (fh_shard_takes (by_segment, b));
    fh_msg_release (a, NULL);
    fh_msg_release (b, NULL);
    fh_shard_destroy (&by_segment);
    /* A JSON member; a body that is not JSON has the key "". */
    fh_shard_t *by_user = shard_ok (fh_shard_of ("alice", 5, 5), 5, "json:/user");
    fh_shard_t *empty = shard_ok (fh_shard_of ("", 0, 5), 5, "json:/user");
    fh_msg_t *alice = make_msg ("t", "{\"user\": \"alice\"}");
    fh_msg_t *broken = make_msg ("t", "not json");
    assert_true (fh_shard_takes (by_user, alice));
    assert_true (fh_shard_takes (empty, broken));
    fh_msg_release (alice, NULL);
    fh_msg_release (broken, NULL);
    fh_shard_destroy (&by_user);
    fh_shard_destroy (&empty);
}

static void
test_bad_order_by_is_refused (void **state)
{
    (void) state;
    char err[256] = "";
    assert_null (fh_shard_new (0, 2, "json:nopointer", err, sizeof err));
    assert_true (err[0] != '\0');
    fh_shard_t *none = NULL;
    fh_shard_destroy (&none); /* safe with NULL */
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_hash_is_fnv1a_64),
        cmocka_unit_test (test_shards_are_disjoint_and_cover),
        cmocka_unit_test (test_shard_follows_order_by),
        cmocka_unit_test (test_bad_order_by_is_refused),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
