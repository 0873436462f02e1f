/*  test_message - a message's frames as its readers see them.

    A message reads its frames' data and size once, when it is made, and
    every reader (consumers, plugins, the spool's describe) reads those
    views. Checked against libzmq's own answer for frames short enough to
    live inside their zmq_msg_t (they move with it), long ones, ones over
    someone else's memory and empty ones, made by fh_msg_new and by the
    enqueuer's fh_msg_new_cached, fresh and reused from the cache.
*/
#include "message.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

enum { FRAMES = 3 };

static const char LONG_BODY[] = "a body well over the 33 bytes that libzmq keeps inside "
                                "a zmq_msg_t, so that it has memory of its own";
static const char OUTSIDE[] = "memory the frame only points at";

/* frames: a short topic, a long body, a frame over OUTSIDE, or (empty) an
   empty third frame. views: what the read saw of each. */
static void
s_frames (zmq_msg_t *frames, fanhub_bytes_t *views, bool empty)
{
    assert_int_equal (zmq_msg_init_size (&frames[0], 5), 0);
    memcpy (zmq_msg_data (&frames[0]), "a.b.c", 5);
    assert_int_equal (zmq_msg_init_size (&frames[1], sizeof LONG_BODY - 1), 0);
    memcpy (zmq_msg_data (&frames[1]), LONG_BODY, sizeof LONG_BODY - 1);
    if (empty)
        zmq_msg_init (&frames[2]);
    else
        /* zmq_msg_init_data wants a non-const pointer; it only reads. */
        assert_int_equal (zmq_msg_init_data (&frames[2], (void *) (uintptr_t) OUTSIDE,
                                             sizeof OUTSIDE - 1, NULL, NULL),
                          0);
    for (int i = 0; i < FRAMES; i++)
        views[i] = (fanhub_bytes_t){zmq_msg_data (&frames[i]), zmq_msg_size (&frames[i])};
}

static void
s_close (zmq_msg_t *frames)
{
    for (int i = 0; i < FRAMES; i++)
        zmq_msg_close (&frames[i]);
}

/* Every view is where libzmq says the moved frame's data is, with its
   content, and a frame past the end is empty. */
static void
s_check (fh_msg_t *msg, bool empty)
{
    assert_int_equal (msg->frame_count, FRAMES);
    for (int i = 0; i < FRAMES; i++) {
        fanhub_bytes_t view = fh_msg_frame (msg, (size_t) i);
        assert_ptr_equal (view.data, zmq_msg_data (&msg->frames[i]));
        assert_int_equal (view.size, zmq_msg_size (&msg->frames[i]));
    }
    assert_memory_equal (fh_msg_frame (msg, 0).data, "a.b.c", 5);
    /* The short topic lives in the message's own zmq_msg_t now. */
    const char *topic = fh_msg_frame (msg, 0).data;
    assert_true (topic >= (const char *) &msg->frames[0] && topic < (const char *) &msg->frames[1]);
    assert_int_equal (fh_msg_frame (msg, 1).size, sizeof LONG_BODY - 1);
    assert_memory_equal (fh_msg_frame (msg, 1).data, LONG_BODY, sizeof LONG_BODY - 1);
    if (empty)
        assert_int_equal (fh_msg_frame (msg, 2).size, 0);
    else
        assert_ptr_equal (fh_msg_frame (msg, 2).data, OUTSIDE);
    assert_int_equal (msg->bytes, 5 + sizeof LONG_BODY - 1 + (empty ? 0 : sizeof OUTSIDE - 1));
    assert_null (fh_msg_frame (msg, FRAMES).data);
    assert_int_equal (fh_msg_frame (msg, FRAMES).size, 0);
}

static void
test_new_reads_its_frames (void **state)
{
    (void) state;
    for (int empty = 0; empty < 2; empty++) {
        zmq_msg_t frames[FRAMES];
        fanhub_bytes_t views[FRAMES];
        s_frames (frames, views, empty);
        fh_msg_t *msg = fh_msg_new (frames, FRAMES, 1, 0);
        assert_non_null (msg);
        s_close (frames);
        s_check (msg, empty);
        fh_msg_destroy (&msg);
        assert_null (msg);
    }
}

/* The enqueuer's way: views taken at the read, before the frames move
   into the message; then the same memory again from the cache. */
static void
test_cached_moves_the_views_along (void **state)
{
    (void) state;
    for (int round = 0; round < 4; round++) {
        bool empty = round % 2;
        zmq_msg_t frames[FRAMES];
        fanhub_bytes_t views[FRAMES];
        s_frames (frames, views, empty);
        uint64_t bytes = views[0].size + views[1].size + views[2].size;
        fh_msg_t *msg = fh_msg_new_cached (frames, views, FRAMES, bytes, (uint64_t) round + 1, 0);
        assert_non_null (msg);
        s_close (frames);
        s_check (msg, empty);
        atomic_store (&msg->holders, 1);
        fh_msg_release (msg, NULL);
    }
    fh_msg_cache_drain ();
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_new_reads_its_frames),
        cmocka_unit_test (test_cached_moves_the_views_along),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
