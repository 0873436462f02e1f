/*  test_spool_writer - the spool's group commit (fh_spool_append_batch)
    and its writer thread with a bounded hand-off (spool_writer.h).

    Items are message numbers; a message is made from its number (topic,
    a body whose length and bytes follow from it, sometimes a third
    frame), so every record read back is checked whole and in order. The
    writer is held at a gate inside `describe` where a case needs the
    hand-off to fill while a pass runs: no case sleeps or depends on how
    fast the disk or the scheduler is.
*/
#include "spool.h"
#include "spool_record.h"
#include "spool_writer.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "spool_msg.h"
#include "test_dir.h"

#define MANY 2000

/* ------------------------------------------------------------ fixture */

typedef test_dir_fixture_t s_fixture_t;

static int
s_setup (void **state)
{
    return test_dir_setup (state, "test_spool_writer", "spool");
}

static fh_spool_t *
s_open (const s_fixture_t *f, const fh_spool_options_t *options)
{
    char err[512] = "";
    fh_spool_t *spool = fh_spool_open (f->dir, options, NULL, err, sizeof err);
    if (!spool)
        fail_msg ("fh_spool_open: %s", err);
    return spool;
}

/* ------------------------------------------------------------ messages */

typedef spool_msg_t s_msg_t;

static void
s_make (s_msg_t *m, uint64_t seq)
{
    spool_msg_make (m, "org.example.writer", seq);
}

static uint64_t
s_bytes (const s_msg_t *m)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < m->count; i++)
        bytes += m->frames[i].size;
    return bytes;
}

/* Reads the next record and checks that it is message seq, whole. */
static void
s_expect (fh_spool_t *spool, uint64_t seq)
{
    fh_spool_record_t rec;
    assert_int_equal (fh_spool_read (spool, &rec), 1);
    s_msg_t m;
    s_make (&m, seq);
    assert_int_equal (rec.seq, seq);
    assert_int_equal (rec.received_wall_ns, (int64_t) seq * 1000);
    assert_int_equal (rec.frame_count, m.count);
    for (uint32_t i = 0; i < m.count; i++) {
        assert_int_equal (rec.frames[i].size, m.frames[i].size);
        if (m.frames[i].size)
            assert_memory_equal (rec.frames[i].data, m.frames[i].data, m.frames[i].size);
    }
    fh_spool_done (spool, rec.mark);
}

static void
s_expect_end (fh_spool_t *spool)
{
    fh_spool_record_t rec;
    assert_int_equal (fh_spool_read (spool, &rec), 0);
}

/* ------------------------------------------------------------ the batch */

static fh_spool_entry_t
s_entry (s_msg_t *m, uint64_t seq)
{
    s_make (m, seq);
    return (fh_spool_entry_t){.seq = seq,
                              .received_wall_ns = (int64_t) seq * 1000,
                              .frames = m->frames,
                              .frame_count = m->count};
}

/* A batch is one group commit: one fdatasync for all its records with
   fsync: always, and every record read back in order. */
static void
test_batch_is_one_commit (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.fsync = FH_SPOOL_FSYNC_ALWAYS};
    fh_spool_t *spool = s_open (f, &options);
    static s_msg_t msgs[100];
    fh_spool_entry_t entries[100];
    for (uint64_t i = 0; i < 100; i++)
        entries[i] = s_entry (&msgs[i], i + 1);
    assert_int_equal (fh_spool_append_batch (spool, entries, 100), 100);
    for (size_t i = 0; i < 100; i++)
        assert_int_equal (entries[i].rc, 0);
    assert_int_equal (fh_spool_syncs (spool), 1);
    assert_int_equal (fh_spool_records (spool), 100);
    for (uint64_t seq = 1; seq <= 100; seq++)
        s_expect (spool, seq);
    s_expect_end (spool);
    fh_spool_close (&spool);
}

/* A batch that crosses a segment boundary syncs the old segment before
   the new one exists (the reader reads a sealed segment to its end), and
   keeps the order. */
static void
test_batch_across_segments (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.fsync = FH_SPOOL_FSYNC_ALWAYS, .segment_bytes = 4096};
    fh_spool_t *spool = s_open (f, &options);
    static s_msg_t msgs[60];
    fh_spool_entry_t entries[60];
    for (uint64_t i = 0; i < 60; i++)
        entries[i] = s_entry (&msgs[i], i + 1);
    assert_int_equal (fh_spool_append_batch (spool, entries, 60), 60);
    uint64_t syncs = fh_spool_syncs (spool);
    assert_true (syncs >= 2); /* 60 records of up to ~560 bytes in 4 KiB segments */
    assert_true (syncs < 60);
    for (uint64_t seq = 1; seq <= 60; seq++)
        s_expect (spool, seq);
    s_expect_end (spool);
    fh_spool_close (&spool);
}

/* Refusals are per entry: a one-frame message (EINVAL) and the entries
   past max_bytes (FULL) fail, the others of the same batch are stored. */
static void
test_batch_refusals_per_entry (void **state)
{
    s_fixture_t *f = *state;
    s_msg_t m;
    s_make (&m, 1);
    size_t one = FH_RECORD_HEADER + fh_record_message_size (m.frames, m.count);
    fh_spool_options_t options = {.max_bytes = 3 * one};
    fh_spool_t *spool = s_open (f, &options);
    s_msg_t msgs[4];
    fh_spool_entry_t entries[4];
    entries[0] = s_entry (&msgs[0], 1);
    entries[1] = s_entry (&msgs[1], 1);
    entries[1].seq = 2;
    entries[1].frame_count = 1; /* no body */
    entries[2] = s_entry (&msgs[2], 1);
    entries[2].seq = 3;
    entries[3] = s_entry (&msgs[3], 1);
    entries[3].seq = 4;
    /* 1 and 3 fit (2 is refused before it takes room); 4 would be the
       third record: max_bytes is 3 records, so it fits too. Then one more
       is FULL. */
    assert_int_equal (fh_spool_append_batch (spool, entries, 4), 3);
    assert_int_equal (entries[0].rc, 0);
    assert_int_equal (entries[1].rc, -1);
    assert_int_equal (entries[1].error, EINVAL);
    assert_int_equal (entries[2].rc, 0);
    assert_int_equal (entries[3].rc, 0);
    fh_spool_entry_t more = s_entry (&msgs[0], 1);
    more.seq = 5;
    assert_int_equal (fh_spool_append_batch (spool, &more, 1), 0);
    assert_int_equal (more.rc, FH_SPOOL_FULL);
    assert_int_equal (fh_spool_records (spool), 3);
    fh_spool_close (&spool);
}

/* A write error fails every entry not yet committed, and the rest of the
   batch; what reached the file is taken back, and the spool goes on
   afterwards with nothing damaged. (The error: RLIMIT_FSIZE, EFBIG.) */
static void
test_batch_write_error (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL);
    s_msg_t m;
    fh_spool_entry_t first = s_entry (&m, 1);
    assert_int_equal (fh_spool_append_batch (spool, &first, 1), 1);

    struct rlimit saved, small;
    assert_int_equal (getrlimit (RLIMIT_FSIZE, &saved), 0);
    small = saved;
    small.rlim_cur = 2048; /* the file holds one record: a few more exceed it */
    void (*old) (int) = signal (SIGXFSZ, SIG_IGN);
    assert_int_equal (setrlimit (RLIMIT_FSIZE, &small), 0);
    static s_msg_t msgs[20];
    fh_spool_entry_t entries[20];
    for (uint64_t i = 0; i < 20; i++)
        entries[i] = s_entry (&msgs[i], i + 2);
    size_t stored = fh_spool_append_batch (spool, entries, 20);
    assert_int_equal (setrlimit (RLIMIT_FSIZE, &saved), 0);
    signal (SIGXFSZ, old);
    assert_int_equal (stored, 0);
    for (size_t i = 0; i < 20; i++) {
        assert_int_equal (entries[i].rc, -1);
        assert_int_equal (entries[i].error, EFBIG);
    }
    assert_int_equal (fh_spool_records (spool), 1);
    /* Lifted: the next batch is stored after the first record. */
    fh_spool_entry_t again = s_entry (&m, 2);
    assert_int_equal (fh_spool_append_batch (spool, &again, 1), 1);
    s_expect (spool, 1);
    s_expect (spool, 2);
    s_expect_end (spool);
    assert_int_equal (fh_spool_corrupt (spool), 0);
    fh_spool_close (&spool);
}

/* ------------------------------------------------------------ the writer */

/* What the writer reported, and a gate that holds it inside `describe`
   of the message `gate_seq` until opened. */
typedef struct {
    s_msg_t *msgs; /* msgs[seq] */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint64_t gate_seq; /* 0: no gate */
    bool at_gate, gate_open;
    uint64_t written[MANY + 1]; /* in the order reported */
    int rc[MANY + 1];
    size_t written_count;
    unsigned wrote_calls;
    unsigned wrong_frames; /* describe asked for another frame count */
} s_sink_t;

static void
s_sink_init (s_sink_t *sink, s_msg_t *msgs, uint64_t gate_seq)
{
    memset (sink, 0, sizeof *sink);
    sink->msgs = msgs;
    sink->gate_seq = gate_seq;
    pthread_mutex_init (&sink->lock, NULL);
    pthread_cond_init (&sink->changed, NULL);
}

static void
s_sink_fini (s_sink_t *sink)
{
    pthread_mutex_destroy (&sink->lock);
    pthread_cond_destroy (&sink->changed);
}

static void
s_describe (void *arg, void *item, fh_spool_entry_t *entry)
{
    s_sink_t *sink = arg;
    uint64_t seq = (uint64_t) (uintptr_t) item;
    const s_msg_t *m = &sink->msgs[seq];
    fanhub_bytes_t *frames = (fanhub_bytes_t *) entry->frames;
    /* The writer's thread: no cmocka assert here (it jumps to the test's
       thread); the test checks the count. */
    bool right = entry->frame_count == m->count;
    for (uint32_t i = 0; right && i < m->count; i++)
        frames[i] = m->frames[i];
    entry->seq = seq;
    entry->received_wall_ns = (int64_t) seq * 1000;
    pthread_mutex_lock (&sink->lock);
    sink->wrong_frames += !right;
    if (seq == sink->gate_seq) {
        sink->at_gate = true;
        pthread_cond_broadcast (&sink->changed);
        while (!sink->gate_open)
            pthread_cond_wait (&sink->changed, &sink->lock);
    }
    pthread_mutex_unlock (&sink->lock);
}

static void
s_written (void *arg, void *item, int rc, int error)
{
    (void) error;
    s_sink_t *sink = arg;
    pthread_mutex_lock (&sink->lock);
    uint64_t seq = (uint64_t) (uintptr_t) item;
    sink->written[sink->written_count++] = seq;
    sink->rc[seq] = rc;
    pthread_mutex_unlock (&sink->lock);
}

static void
s_wrote (void *arg)
{
    s_sink_t *sink = arg;
    pthread_mutex_lock (&sink->lock);
    sink->wrote_calls++;
    pthread_mutex_unlock (&sink->lock);
}

static void
s_wait_at_gate (s_sink_t *sink)
{
    pthread_mutex_lock (&sink->lock);
    while (!sink->at_gate)
        pthread_cond_wait (&sink->changed, &sink->lock);
    pthread_mutex_unlock (&sink->lock);
}

static void
s_open_gate (s_sink_t *sink)
{
    pthread_mutex_lock (&sink->lock);
    sink->gate_open = true;
    pthread_cond_broadcast (&sink->changed);
    pthread_mutex_unlock (&sink->lock);
}

static fh_spool_writer_t *
s_writer (fh_spool_t *spool, size_t items, uint64_t bytes, s_sink_t *sink)
{
    fh_spool_writer_ops_t ops = {s_describe, s_written, s_wrote, sink};
    char err[256] = "";
    fh_spool_writer_t *writer = fh_spool_writer_new (spool, items, bytes, &ops, err, sizeof err);
    if (!writer)
        fail_msg ("fh_spool_writer_new: %s", err);
    return writer;
}

static void
s_put (fh_spool_writer_t *writer, s_msg_t *msgs, uint64_t seq)
{
    s_make (&msgs[seq], seq);
    assert_int_equal (fh_spool_writer_put (writer, (void *) (uintptr_t) seq, msgs[seq].count,
                                           s_bytes (&msgs[seq]), false),
                      0);
}

/* The reader of test_handoff_order: reads MANY records as they come
   (waiting while the writer is behind), checking each in order. Its own
   thread: it counts what is wrong, the test asserts. */
typedef struct {
    fh_spool_t *spool;
    fh_spool_writer_t *writer;
    uint64_t read;
    uint64_t out_of_order;
    uint64_t unread_zero; /* times pending + records said 0 before the end */
    uint64_t errors;
} s_reader_arg_t;

static void *
s_reader (void *arg)
{
    s_reader_arg_t *r = arg;
    while (r->read < MANY && r->errors == 0 && r->unread_zero == 0) {
        /* pending first, then records: a message handed over (all were,
           before this thread started) is in one of them until read. */
        uint64_t pending = fh_spool_writer_pending (r->writer);
        uint64_t unread = pending + fh_spool_records (r->spool);
        fh_spool_record_t rec;
        int rc = fh_spool_read (r->spool, &rec);
        if (rc == 1) {
            r->out_of_order += rec.seq != r->read + 1;
            fh_spool_done (r->spool, rec.mark);
            r->read++;
        }
        else if (rc < 0)
            r->errors++;
        else if (unread == 0)
            r->unread_zero++;
        else
            sched_yield ();
    }
    return NULL;
}

/* Messages handed over from one thread are read back by another in the
   order handed over, and with fsync: always the writer syncs once per
   pass, not per message: held at the gate in its first pass, it finds
   all the others waiting and commits them together. */
static void
test_handoff_order_and_group_commit (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.fsync = FH_SPOOL_FSYNC_ALWAYS};
    fh_spool_t *spool = s_open (f, &options);
    static s_msg_t msgs[MANY + 1];
    static s_sink_t sink;
    s_sink_init (&sink, msgs, 1);
    fh_spool_writer_t *writer = s_writer (spool, MANY, 0, &sink);
    s_put (writer, msgs, 1);
    s_wait_at_gate (&sink); /* the first pass holds message 1 only */
    for (uint64_t seq = 2; seq <= MANY; seq++)
        s_put (writer, msgs, seq);
    assert_int_equal (fh_spool_writer_pending (writer), MANY);

    s_reader_arg_t r = {.spool = spool, .writer = writer};
    pthread_t reader;
    assert_int_equal (pthread_create (&reader, NULL, s_reader, &r), 0);
    s_open_gate (&sink);
    fh_spool_writer_flush (writer);
    assert_int_equal (fh_spool_writer_pending (writer), 0);
    assert_int_equal (pthread_join (reader, NULL), 0);
    assert_int_equal (r.errors, 0);
    assert_int_equal (r.unread_zero, 0);
    assert_int_equal (r.read, MANY);
    assert_int_equal (r.out_of_order, 0);
    assert_int_equal (sink.wrong_frames, 0);

    /* Reported in order, each stored. */
    assert_int_equal (sink.written_count, MANY);
    for (size_t i = 0; i < MANY; i++) {
        assert_int_equal (sink.written[i], i + 1);
        assert_int_equal (sink.rc[i + 1], 0);
    }
    /* Two passes: message 1, then the other 1999 with one fdatasync. */
    assert_int_equal (fh_spool_writer_passes (writer), 2);
    assert_int_equal (fh_spool_syncs (spool), 2);
    assert_int_equal (sink.wrote_calls, 2);
    fh_spool_writer_destroy (&writer);
    fh_spool_writer_destroy (&writer); /* safe twice */
    s_expect_end (spool);
    fh_spool_close (&spool);
    s_sink_fini (&sink);
}

/* The hand-off is bounded in items and in bytes: a put that does not fit
   is refused (nothing taken) until the writer has made room; a put with
   wait waits for it. */
static void
test_handoff_bounded (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL);
    static s_msg_t msgs[MANY + 1];
    static s_sink_t sink;
    s_sink_init (&sink, msgs, 1);
    fh_spool_writer_t *writer = s_writer (spool, 4, 0, &sink);
    s_put (writer, msgs, 1);
    s_wait_at_gate (&sink); /* 1 is in the pass: the hand-off is empty */
    for (uint64_t seq = 2; seq <= 5; seq++)
        s_put (writer, msgs, seq);
    s_make (&msgs[6], 6);
    assert_false (fh_spool_writer_room (writer, s_bytes (&msgs[6])));
    assert_int_equal (fh_spool_writer_put (writer, (void *) (uintptr_t) 6, msgs[6].count,
                                           s_bytes (&msgs[6]), false),
                      -1);
    assert_int_equal (fh_spool_writer_pending (writer), 5);
    s_open_gate (&sink);
    /* With wait, 6 goes in once the writer took 2..5. */
    assert_int_equal (fh_spool_writer_put (writer, (void *) (uintptr_t) 6, msgs[6].count,
                                           s_bytes (&msgs[6]), true),
                      0);
    fh_spool_writer_flush (writer);
    assert_int_equal (sink.written_count, 6);
    for (uint64_t seq = 1; seq <= 6; seq++) {
        assert_int_equal (sink.written[seq - 1], seq);
        s_expect (spool, seq);
    }
    fh_spool_writer_destroy (&writer);
    s_sink_fini (&sink);

    /* Bytes: one item larger than the bound goes into an empty hand-off;
       nothing more fits beside it. */
    s_sink_init (&sink, msgs, 7);
    writer = s_writer (spool, 100, 16, &sink);
    s_put (writer, msgs, 7);
    s_wait_at_gate (&sink);
    s_put (writer, msgs, 8); /* bigger than 16 bytes, into the empty hand-off */
    s_make (&msgs[9], 9);
    assert_false (fh_spool_writer_room (writer, s_bytes (&msgs[9])));
    s_open_gate (&sink);
    fh_spool_writer_flush (writer);
    assert_true (fh_spool_writer_room (writer, s_bytes (&msgs[9])));
    fh_spool_writer_destroy (&writer);
    s_expect (spool, 7);
    s_expect (spool, 8);
    s_expect_end (spool);
    fh_spool_close (&spool);
    s_sink_fini (&sink);
}

/* Destroy writes everything handed over before it returns, and the spool
   can be closed and opened again with all of it there, in order. */
static void
test_destroy_writes_everything (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL);
    static s_msg_t msgs[MANY + 1];
    static s_sink_t sink;
    s_sink_init (&sink, msgs, 1);
    fh_spool_writer_t *writer = s_writer (spool, 1000, 0, &sink);
    s_put (writer, msgs, 1);
    s_wait_at_gate (&sink);
    for (uint64_t seq = 2; seq <= 500; seq++)
        s_put (writer, msgs, seq);
    s_open_gate (&sink);
    fh_spool_writer_destroy (&writer);
    assert_int_equal (sink.written_count, 500);
    fh_spool_close (&spool);
    spool = s_open (f, NULL);
    assert_int_equal (fh_spool_records (spool), 500);
    for (uint64_t seq = 1; seq <= 500; seq++)
        s_expect (spool, seq);
    s_expect_end (spool);
    fh_spool_close (&spool);
    s_sink_fini (&sink);
}

/* The spool's refusals reach `written`, and pending counts them out too:
   nothing handed over is forgotten. */
static void
test_refusals_reported (void **state)
{
    s_fixture_t *f = *state;
    s_msg_t probe;
    s_make (&probe, 1);
    fh_spool_options_t options = {
        .max_bytes = 2 * (FH_RECORD_HEADER + fh_record_message_size (probe.frames, probe.count))};
    fh_spool_t *spool = s_open (f, &options);
    static s_msg_t msgs[MANY + 1];
    static s_sink_t sink;
    s_sink_init (&sink, msgs, 0);
    fh_spool_writer_t *writer = s_writer (spool, 16, 0, &sink);
    for (uint64_t seq = 1; seq <= 6; seq++) {
        s_put (writer, msgs, seq);
        fh_spool_writer_flush (writer);
    }
    assert_int_equal (fh_spool_writer_pending (writer), 0);
    assert_int_equal (sink.written_count, 6);
    unsigned stored = 0, full = 0;
    for (uint64_t seq = 1; seq <= 6; seq++) {
        stored += sink.rc[seq] == 0;
        full += sink.rc[seq] == FH_SPOOL_FULL;
    }
    assert_int_equal (stored + full, 6);
    assert_true (stored >= 1 && full >= 1);
    assert_int_equal (fh_spool_records (spool), stored);
    fh_spool_writer_destroy (&writer);
    fh_spool_close (&spool);
    s_sink_fini (&sink);
}

/* Waits (bounding only a hang) until the writer has written everything
   handed over, without asking it to (no flush). */
static void
s_wait_settled (fh_spool_writer_t *writer)
{
    for (int i = 0; i < 60000 && fh_spool_writer_pending (writer) > 0; i++)
        usleep (1000);
    assert_int_equal (fh_spool_writer_pending (writer), 0);
}

/* Pacing: after a pass that synced, the writer waits for its pace before
   the next one, but never while a flush waits, once the hand-off is half
   full, or when it stops. The pace here is an hour: each of those must
   cut it short, or the case hangs. */
static void
test_pace_after_sync (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.fsync = FH_SPOOL_FSYNC_ALWAYS};
    fh_spool_t *spool = s_open (f, &options);
    static s_msg_t msgs[8];
    static s_sink_t sink;
    s_sink_init (&sink, msgs, 0);
    fh_spool_writer_t *writer = s_writer (spool, 4, 0, &sink);
    fh_spool_writer_set_pace (writer, (int64_t) 3600 * 1000000000);
    s_put (writer, msgs, 1);
    fh_spool_writer_flush (writer); /* the first pass: no pace before it */
    assert_int_equal (fh_spool_writer_passes (writer), 1);
    assert_int_equal (fh_spool_syncs (spool), 1);

    /* The writer paces now: a flush does not wait for it. */
    s_put (writer, msgs, 2);
    fh_spool_writer_flush (writer);
    assert_int_equal (fh_spool_writer_passes (writer), 2);

    /* Half full (2 of 4 items): a pass starts without a flush. */
    s_put (writer, msgs, 3);
    s_put (writer, msgs, 4);
    s_wait_settled (writer);
    assert_int_equal (fh_spool_syncs (spool), 3);

    /* Stopping writes what waits for the pace. */
    s_put (writer, msgs, 5);
    fh_spool_writer_destroy (&writer);
    assert_int_equal (sink.written_count, 5);
    for (uint64_t seq = 1; seq <= 5; seq++) {
        assert_int_equal (sink.written[seq - 1], seq);
        assert_int_equal (sink.rc[seq], 0);
        s_expect (spool, seq);
    }
    s_expect_end (spool);
    fh_spool_close (&spool);
    s_sink_fini (&sink);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_batch_is_one_commit, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_batch_across_segments, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_batch_refusals_per_entry, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_batch_write_error, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_handoff_order_and_group_commit, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_handoff_bounded, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_destroy_writes_everything, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_refusals_reported, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_pace_after_sync, s_setup, test_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
