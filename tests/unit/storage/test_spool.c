/*  test_spool - the consumer's disk spool.

    Each case works in its own directory under mkdtemp, removed after.
    Messages are made from their sequence number (topic, a body whose
    length and bytes follow from it, sometimes a third frame), so every
    delivered record can be checked whole. Crashes are simulated two ways:
    fh_spool_abandon (no sync, no cursor write) and a child process that
    appends until it is killed with SIGKILL. Damage is made by hand in the
    segment files: truncation mid-record, a flipped byte in a payload, a
    flipped byte in a header.
*/
#include "spool.h"
#include "spool_record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "spool_msg.h"
#include "test_dir.h"

typedef test_dir_fixture_t s_fixture_t;

static int
s_setup (void **state)
{
    return test_dir_setup (state, "test_spool", "state/consumer");
}

/* ------------------------------------------------------------ messages */

typedef spool_msg_t s_msg_t;

static void
s_make (s_msg_t *m, uint64_t seq)
{
    spool_msg_make (m, "org.example.test", seq);
}

static size_t
s_record_size (uint64_t seq)
{
    s_msg_t m;
    s_make (&m, seq);
    return FH_RECORD_HEADER + fh_record_message_size (m.frames, m.count);
}

static void
s_append (fh_spool_t *spool, uint64_t seq)
{
    s_msg_t m;
    s_make (&m, seq);
    assert_int_equal (fh_spool_append (spool, seq, (int64_t) seq * 1000, m.frames, m.count), 0);
}

static void
s_check (const fh_spool_record_t *rec, uint64_t seq)
{
    s_msg_t m;
    s_make (&m, seq);
    assert_int_equal (rec->seq, seq);
    assert_int_equal (rec->received_wall_ns, (int64_t) seq * 1000);
    assert_int_equal (rec->frame_count, m.count);
    for (uint32_t i = 0; i < m.count; i++) {
        assert_int_equal (rec->frames[i].size, m.frames[i].size);
        if (m.frames[i].size)
            assert_memory_equal (rec->frames[i].data, m.frames[i].data, m.frames[i].size);
    }
}

/* Reads one record and checks it is seq. */
static void
s_expect (fh_spool_t *spool, uint64_t seq)
{
    fh_spool_record_t rec;
    assert_int_equal (fh_spool_read (spool, &rec), 1);
    s_check (&rec, seq);
}

static void
s_expect_empty (fh_spool_t *spool)
{
    fh_spool_record_t rec;
    assert_int_equal (fh_spool_read (spool, &rec), 0);
    assert_int_equal (fh_spool_records (spool), 0);
}

static fh_spool_t *
s_open (const s_fixture_t *f, const fh_spool_options_t *options, uint64_t *corrupt)
{
    char err[512] = "";
    fh_spool_t *spool = fh_spool_open (f->dir, options, corrupt, err, sizeof err);
    if (!spool)
        fail_msg ("fh_spool_open: %s", err);
    return spool;
}

static size_t
s_segment_count (const s_fixture_t *f)
{
    DIR *dir = opendir (f->dir);
    assert_non_null (dir);
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (strncmp (entry->d_name, "seg-", 4) == 0)
            count++;
    closedir (dir);
    return count;
}

/* The path of segment number seg. */
static void
s_seg_path (const s_fixture_t *f, uint64_t seg, char *path, size_t size)
{
    snprintf (path, size, "%s/seg-%016llx.spool", f->dir, (unsigned long long) seg);
}

static off_t
s_file_size (const char *path)
{
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    return st.st_size;
}

static void
s_flip_byte (const char *path, off_t offset)
{
    int fd = open (path, O_RDWR);
    assert_true (fd >= 0);
    uint8_t byte;
    assert_int_equal (pread (fd, &byte, 1, offset), 1);
    byte ^= 0x40;
    assert_int_equal (pwrite (fd, &byte, 1, offset), 1);
    close (fd);
}

/* ------------------------------------------------------------ cases */

static void
test_fifo_across_segments (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.segment_bytes = 4096};
    fh_spool_t *spool = s_open (f, &options, NULL);
    s_expect_empty (spool);
    uint64_t next_in = 1, next_out = 1, bytes = 0;
    /* Bursts of appends and reads, so the reader is sometimes on the
       writer's segment and sometimes segments behind. */
    for (int round = 0; round < 40; round++) {
        int appends = 5 + round * 7 % 60, reads = 3 + round * 11 % 70;
        for (int i = 0; i < appends; i++) {
            bytes += s_record_size (next_in);
            s_append (spool, next_in++);
        }
        assert_int_equal (fh_spool_records (spool), next_in - next_out);
        for (int i = 0; i < reads && next_out < next_in; i++)
            s_expect (spool, next_out++);
        assert_int_equal (fh_spool_records (spool), next_in - next_out);
    }
    assert_int_equal (fh_spool_bytes (spool), bytes); /* nothing consumed yet */
    assert_true (s_segment_count (f) > 10);
    while (next_out < next_in)
        s_expect (spool, next_out++);
    s_expect_empty (spool);
    fh_spool_consumed (spool);
    assert_int_equal (fh_spool_bytes (spool), 0);
    assert_int_equal (fh_spool_corrupt (spool), 0);
    fh_spool_close (&spool);
    assert_null (spool);
    fh_spool_close (&spool);
}

static void
test_segments_deleted_after_consumed (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.segment_bytes = 2048};
    fh_spool_t *spool = s_open (f, &options, NULL);
    for (uint64_t seq = 1; seq <= 300; seq++)
        s_append (spool, seq);
    size_t segments = s_segment_count (f);
    assert_true (segments > 20);
    /* Reading alone deletes nothing: it is not done yet. */
    for (uint64_t seq = 1; seq <= 150; seq++)
        s_expect (spool, seq);
    assert_int_equal (s_segment_count (f), segments);
    fh_spool_consumed (spool);
    size_t half = s_segment_count (f);
    assert_true (half < segments && half > 1);
    for (uint64_t seq = 151; seq <= 300; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_consumed (spool);
    /* The writer's segment stays, ready for the next append. */
    assert_int_equal (s_segment_count (f), 1);
    assert_int_equal (fh_spool_bytes (spool), 0);
    s_append (spool, 301);
    s_expect (spool, 301);
    fh_spool_close (&spool);
}

static void
test_reopen_after_close (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.segment_bytes = 4096};
    fh_spool_t *spool = s_open (f, &options, NULL);
    for (uint64_t seq = 1; seq <= 100; seq++)
        s_append (spool, seq);
    for (uint64_t seq = 1; seq <= 40; seq++)
        s_expect (spool, seq);
    fh_spool_consumed (spool);
    /* Read but not declared consumed: delivered again after the reopen. */
    for (uint64_t seq = 41; seq <= 45; seq++)
        s_expect (spool, seq);
    fh_spool_close (&spool);

    uint64_t corrupt = 99;
    spool = s_open (f, &options, &corrupt);
    assert_int_equal (corrupt, 0);
    assert_int_equal (fh_spool_records (spool), 60);
    uint64_t bytes = 0;
    for (uint64_t seq = 41; seq <= 100; seq++)
        bytes += s_record_size (seq);
    assert_int_equal (fh_spool_bytes (spool), bytes);
    for (uint64_t seq = 101; seq <= 120; seq++)
        s_append (spool, seq);
    for (uint64_t seq = 41; seq <= 120; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);

    /* Everything consumed: a reopen has nothing, and new appends do not
       land in a segment a stale position could point into. */
    spool = s_open (f, &options, NULL);
    s_expect_empty (spool);
    s_append (spool, 121);
    s_expect (spool, 121);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    spool = s_open (f, &options, NULL);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

static void
test_abandon_repeats_bounded_window (void **state)
{
    s_fixture_t *f = *state;
    /* The cursor is written every 10 consumed records (the hour-long time
       rule never fires here). */
    fh_spool_options_t options
        = {.segment_bytes = 1 << 20, .cursor_records = 10, .cursor_ms = 3600 * 1000};
    fh_spool_t *spool = s_open (f, &options, NULL);
    for (uint64_t seq = 1; seq <= 100; seq++)
        s_append (spool, seq);
    for (uint64_t seq = 1; seq <= 57; seq++) {
        s_expect (spool, seq);
        fh_spool_consumed (spool);
    }
    fh_spool_abandon (&spool); /* kill -9: no cursor write on the way out */
    assert_null (spool);

    spool = s_open (f, &options, NULL);
    fh_spool_record_t rec;
    assert_int_equal (fh_spool_read (spool, &rec), 1);
    /* The cursor was written at 50: 51..57 repeat, fewer than 10. */
    assert_int_equal (rec.seq, 51);
    for (uint64_t seq = 52; seq <= 100; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_consumed (spool);

    /* Same with the time rule: tick writes a due cursor. */
    for (uint64_t seq = 101; seq <= 110; seq++)
        s_append (spool, seq);
    for (uint64_t seq = 101; seq <= 103; seq++)
        s_expect (spool, seq);
    fh_spool_consumed (spool);
    assert_int_equal (fh_spool_tick (spool, INT64_MAX / 2), 0);
    fh_spool_abandon (&spool);
    spool = s_open (f, &options, NULL);
    for (uint64_t seq = 104; seq <= 110; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

static void
test_kill9_child (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.segment_bytes = 64 * 1024};
    int acks[2];
    assert_int_equal (pipe (acks), 0);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        close (acks[0]);
        char err[512];
        fh_spool_t *spool = fh_spool_open (f->dir, &options, NULL, err, sizeof err);
        if (!spool)
            _exit (1);
        for (uint64_t seq = 1;; seq++) {
            s_msg_t m;
            s_make (&m, seq);
            if (fh_spool_append (spool, seq, (int64_t) seq * 1000, m.frames, m.count) != 0)
                _exit (2);
            /* Only what append answered for is promised. */
            if (write (acks[1], &seq, sizeof seq) != sizeof seq)
                _exit (3);
        }
    }
    close (acks[1]);
    uint64_t acked = 0, seq;
    while (acked < 20000 && read (acks[0], &seq, sizeof seq) == sizeof seq)
        acked = seq;
    kill (pid, SIGKILL);
    int status;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFSIGNALED (status));
    while (read (acks[0], &seq, sizeof seq) == sizeof seq)
        acked = seq;
    close (acks[0]);
    assert_true (acked >= 20000);

    uint64_t corrupt;
    fh_spool_t *spool = s_open (f, &options, &corrupt);
    /* Killed between records or in the middle of one (then it is cut). */
    assert_true (corrupt <= 1);
    uint64_t records = fh_spool_records (spool);
    assert_true (records >= acked && records <= acked + 1);
    for (seq = 1; seq <= records; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

static void
test_torn_tail (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL, NULL);
    for (uint64_t seq = 1; seq <= 10; seq++)
        s_append (spool, seq);
    fh_spool_close (&spool);
    char path[256];
    s_seg_path (f, 1, path, sizeof path);
    off_t whole = s_file_size (path);
    off_t nine = whole - (off_t) s_record_size (10);
    /* Cut inside the last record's payload. */
    assert_int_equal (truncate (path, whole - 7), 0);

    uint64_t corrupt;
    spool = s_open (f, NULL, &corrupt);
    assert_int_equal (corrupt, 1);
    assert_int_equal (fh_spool_corrupt (spool), 1);
    assert_int_equal (fh_spool_records (spool), 9);
    assert_int_equal (s_file_size (path), nine); /* cut back to the last whole record */
    s_append (spool, 11);
    for (uint64_t seq = 1; seq <= 9; seq++)
        s_expect (spool, seq);
    s_expect (spool, 11);
    s_expect_empty (spool);
    assert_int_equal (fh_spool_corrupt (spool), 1);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);

    /* Cut inside a header: 5 bytes of the next record were written. The
       reopen writes a new segment (3), never the old one (2). */
    spool = s_open (f, NULL, &corrupt);
    assert_int_equal (corrupt, 0);
    for (uint64_t seq = 12; seq <= 14; seq++)
        s_append (spool, seq);
    fh_spool_close (&spool);
    s_seg_path (f, 3, path, sizeof path);
    whole = s_file_size (path);
    assert_int_equal (truncate (path, whole - (off_t) s_record_size (14) + 5), 0);
    spool = s_open (f, NULL, &corrupt);
    assert_int_equal (corrupt, 1);
    s_expect (spool, 12);
    s_expect (spool, 13);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

static void
test_damage_in_the_middle (void **state)
{
    s_fixture_t *f = *state;
    char path[256];
    s_seg_path (f, 1, path, sizeof path);
    fh_spool_t *spool = s_open (f, NULL, NULL);
    for (uint64_t seq = 1; seq <= 5; seq++)
        s_append (spool, seq);
    fh_spool_close (&spool);
    off_t third = (off_t) (s_record_size (1) + s_record_size (2));
    off_t fourth = third + (off_t) s_record_size (3);

    /* A payload byte of record 3: that record is skipped and counted. */
    s_flip_byte (path, third + FH_RECORD_HEADER + 30);
    uint64_t corrupt;
    spool = s_open (f, NULL, &corrupt);
    assert_int_equal (corrupt, 1);
    assert_int_equal (fh_spool_records (spool), 4);
    s_expect (spool, 1);
    s_expect (spool, 2);
    s_expect (spool, 4);
    s_expect (spool, 5);
    s_expect_empty (spool);
    assert_int_equal (fh_spool_corrupt (spool), 1); /* not counted twice */
    fh_spool_abandon (&spool);                      /* keep the records for the next case */

    /* Mend it, and damage record 3's length instead: the reader cannot
       trust it, scans for the next record that verifies, and finds 4. */
    s_flip_byte (path, third + FH_RECORD_HEADER + 30);
    s_flip_byte (path, third + 5);
    spool = s_open (f, NULL, &corrupt);
    assert_int_equal (corrupt, 1);
    s_expect (spool, 1);
    s_expect (spool, 2);
    s_expect (spool, 4);
    s_expect (spool, 5);
    s_expect_empty (spool);
    assert_int_equal (fh_spool_corrupt (spool), 1);
    fh_spool_abandon (&spool);

    /* Records 3 and 4 both damaged, in the magic and in the payload: two. */
    s_flip_byte (path, third + 5);
    s_flip_byte (path, third);
    s_flip_byte (path, fourth + FH_RECORD_HEADER + 2);
    spool = s_open (f, NULL, &corrupt);
    assert_int_equal (corrupt, 2);
    s_expect (spool, 1);
    s_expect (spool, 2);
    s_expect (spool, 5);
    s_expect_empty (spool);
    assert_int_equal (fh_spool_corrupt (spool), 2);
    fh_spool_close (&spool);
}

static void
test_damage_found_while_reading (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL, NULL);
    for (uint64_t seq = 1; seq <= 5; seq++)
        s_append (spool, seq);
    /* The disk goes bad under a running spool (after open's scan): the
       reader finds it. */
    char path[256];
    s_seg_path (f, 1, path, sizeof path);
    s_flip_byte (path, (off_t) (s_record_size (1) + s_record_size (2)) + 20);
    s_expect (spool, 1);
    s_expect (spool, 2);
    s_expect (spool, 4);
    s_expect (spool, 5);
    assert_int_equal (fh_spool_corrupt (spool), 1);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

static void
test_max_bytes_full (void **state)
{
    s_fixture_t *f = *state;
    uint64_t ten = 0;
    for (uint64_t seq = 1; seq <= 10; seq++)
        ten += s_record_size (seq);
    fh_spool_options_t options = {.segment_bytes = 1024, .max_bytes = ten};
    fh_spool_t *spool = s_open (f, &options, NULL);
    for (uint64_t seq = 1; seq <= 10; seq++)
        s_append (spool, seq);
    assert_int_equal (fh_spool_bytes (spool), ten);
    s_msg_t m;
    s_make (&m, 11);
    assert_int_equal (fh_spool_append (spool, 11, 11000, m.frames, m.count), FH_SPOOL_FULL);
    assert_int_equal (fh_spool_records (spool), 10);
    /* Read is not enough: consumed frees the room. */
    for (uint64_t seq = 1; seq <= 5; seq++)
        s_expect (spool, seq);
    assert_int_equal (fh_spool_append (spool, 11, 11000, m.frames, m.count), FH_SPOOL_FULL);
    fh_spool_consumed (spool);
    s_append (spool, 11);
    for (uint64_t seq = 6; seq <= 11; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

static void
test_refusals (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL, NULL);
    fanhub_bytes_t huge[2] = {{"t", 1}, {"x", (size_t) FH_RECORD_MAX_PAYLOAD}};
    errno = 0;
    assert_int_equal (fh_spool_append (spool, 1, 0, huge, 2), -1);
    assert_int_equal (errno, EMSGSIZE);
    assert_int_equal (fh_spool_append (spool, 1, 0, huge, 0), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (fh_spool_records (spool), 0);

    /* One process per spool. */
    char err[512] = "";
    assert_null (fh_spool_open (f->dir, NULL, NULL, err, sizeof err));
    assert_non_null (strstr (err, "/lock: the spool is already open"));
    fh_spool_close (&spool);

    /* A file where the directory should be: the message names it. */
    char path[256];
    snprintf (path, sizeof path, "%s/file", f->root);
    FILE *file = fopen (path, "w");
    fclose (file);
    snprintf (path, sizeof path, "%s/file/consumer", f->root);
    assert_null (fh_spool_open (path, NULL, NULL, err, sizeof err));
    assert_non_null (strstr (err, "/file"));
    assert_non_null (strstr (err, strerror (ENOTDIR)));
    assert_null (strchr (err, '\n'));
}

static void
test_damaged_cursor (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL, NULL);
    for (uint64_t seq = 1; seq <= 20; seq++)
        s_append (spool, seq);
    for (uint64_t seq = 1; seq <= 10; seq++)
        s_expect (spool, seq);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    char path[256];
    snprintf (path, sizeof path, "%s/cursor", f->dir);
    s_flip_byte (path, 30);
    /* Nothing is lost: everything from the oldest segment comes again. */
    spool = s_open (f, NULL, NULL);
    for (uint64_t seq = 1; seq <= 20; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    spool = s_open (f, NULL, NULL);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

/* The cursor moves over the contiguous prefix of done records only (a
   low-water mark): records done out of order, from other threads, leave
   it at the first one not done; that one and what follows come again. */
static void
test_low_water_mark (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.segment_bytes = 2048};
    fh_spool_t *spool = s_open (f, &options, NULL);
    for (uint64_t seq = 1; seq <= 60; seq++)
        s_append (spool, seq);
    uint64_t marks[61], total = 0;
    for (uint64_t seq = 1; seq <= 60; seq++) {
        fh_spool_record_t rec;
        assert_int_equal (fh_spool_read (spool, &rec), 1);
        s_check (&rec, seq);
        assert_true (rec.mark != 0);
        marks[seq] = rec.mark;
        total += s_record_size (seq);
    }
    size_t segments = s_segment_count (f);
    assert_true (segments > 5);
    assert_int_equal (fh_spool_undone (spool), 60);
    /* 2 and 5..60 done, 1, 3 and 4 not: nothing moves. */
    fh_spool_done (spool, marks[2]);
    for (uint64_t seq = 5; seq <= 60; seq++)
        fh_spool_done (spool, marks[seq]);
    assert_int_equal (fh_spool_bytes (spool), total);
    assert_int_equal (s_segment_count (f), segments);
    /* 1 done: the mark moves over 1 and 2, and stops at 3. */
    fh_spool_done (spool, marks[1]);
    assert_int_equal (fh_spool_bytes (spool), total - s_record_size (1) - s_record_size (2));
    assert_int_equal (fh_spool_undone (spool), 2);
    fh_spool_close (&spool);
    /* 3 and 4 were not done: they, and what was done after them, come
       again; 1 and 2 do not. */
    spool = s_open (f, &options, NULL);
    assert_int_equal (fh_spool_records (spool), 58);
    for (uint64_t seq = 3; seq <= 60; seq++)
        s_expect (spool, seq);
    s_expect_empty (spool);
    fh_spool_consumed (spool);
    assert_int_equal (fh_spool_bytes (spool), 0);
    assert_int_equal (s_segment_count (f), 1);
    fh_spool_close (&spool);
    spool = s_open (f, &options, NULL);
    s_expect_empty (spool);
    fh_spool_close (&spool);
}

/* Writes a CRC-valid record of a message with one frame at the end of
   the segment file. */
static void
s_append_one_frame_record (const char *path, uint64_t seq)
{
    fanhub_bytes_t frame = {"topic.only", 10};
    size_t payload = fh_record_message_size (&frame, 1);
    uint8_t buf[256];
    assert_true (FH_RECORD_HEADER + payload <= sizeof buf);
    fh_record_encode_message (buf, payload, seq, 0, &frame, 1);
    int fd = open (path, O_WRONLY | O_APPEND);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, buf, FH_RECORD_HEADER + payload),
                      (ssize_t) (FH_RECORD_HEADER + payload));
    close (fd);
}

/* Every way records go missing between two runs is counted in
   spool_lost (and logged): a deleted segment, a segment emptied, a
   cursor naming a segment that is gone, a cursor past the end of its
   segment; a record of fewer than 2 frames is damage (spool_corrupt),
   never delivered. */
static void
test_lost_records_counted (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.segment_bytes = 2048};
    fh_spool_t *spool = s_open (f, &options, NULL);
    for (uint64_t seq = 1; seq <= 200; seq++)
        s_append (spool, seq);
    /* Consume into the middle of the first segment. */
    s_expect (spool, 1);
    s_expect (spool, 2);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    size_t segments = s_segment_count (f);
    assert_true (segments > 8);
    /* The segments are numbered from 1; the cursor is in segment 1. */
    char path[256];
    s_seg_path (f, 4, path, sizeof path);
    assert_int_equal (unlink (path), 0); /* a deleted segment */
    s_seg_path (f, 6, path, sizeof path);
    assert_int_equal (truncate (path, 0), 0); /* a segment emptied */
    s_seg_path (f, 1, path, sizeof path);
    assert_int_equal (truncate (path, 10), 0); /* cut below the cursor */
    s_seg_path (f, 8, path, sizeof path);
    s_append_one_frame_record (path, 999); /* a one-frame record */

    uint64_t corrupt = 0;
    spool = s_open (f, &options, &corrupt);
    assert_int_equal (corrupt, 1);
    assert_int_equal (fh_spool_corrupt (spool), 1);
    assert_int_equal (fh_spool_lost (spool), 3);
    /* What is left comes, in order, once; the one-frame record never. */
    fh_spool_record_t rec;
    uint64_t last = 0, count = 0;
    int rc;
    while ((rc = fh_spool_read (spool, &rec)) == 1) {
        assert_true (rec.seq > last && rec.seq <= 200);
        assert_true (rec.frame_count >= 2);
        s_check (&rec, rec.seq);
        last = rec.seq;
        count++;
    }
    assert_int_equal (rc, 0);
    assert_true (count > 100 && count < 198);
    assert_int_equal (last, 200);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);

    /* A cursor naming a segment that is gone, inside it. */
    spool = s_open (f, &options, NULL);
    for (uint64_t seq = 201; seq <= 260; seq++)
        s_append (spool, seq);
    s_expect (spool, 201);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    DIR *dir = opendir (f->dir);
    struct dirent *entry;
    char first[256] = "";
    while ((entry = readdir (dir)))
        if (strncmp (entry->d_name, "seg-", 4) == 0
            && (!first[0] || strcmp (entry->d_name, first) < 0))
            snprintf (first, sizeof first, "%s", entry->d_name);
    closedir (dir);
    snprintf (path, sizeof path, "%s/%.30s", f->dir, first);
    assert_int_equal (unlink (path), 0);
    corrupt = 0;
    spool = s_open (f, &options, &corrupt);
    assert_int_equal (corrupt, 0);
    assert_int_equal (fh_spool_lost (spool), 1);
    fh_spool_close (&spool);
}

/* A cursor that cannot be written at close: logged, counted, and the
   number of done records the next run will deliver again is reported
   (the hub exits non-zero with it). */
static void
test_close_without_cursor (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f, NULL, NULL);
    for (uint64_t seq = 1; seq <= 10; seq++)
        s_append (spool, seq);
    for (uint64_t seq = 1; seq <= 5; seq++)
        s_expect (spool, seq);
    fh_spool_consumed (spool);
    /* Where cursor.tmp should be, a directory: every write fails. */
    char path[256];
    snprintf (path, sizeof path, "%s/cursor.tmp", f->dir);
    assert_int_equal (unlink (path), 0);
    assert_int_equal (mkdir (path, 0750), 0);
    uint64_t before = fh_spool_unsaved_total (), repeated = 0;
    assert_int_equal (fh_spool_close_checked (&spool, &repeated), -1);
    assert_null (spool);
    assert_int_equal (repeated, 5);
    assert_int_equal (fh_spool_unsaved_total () - before, 5);
    /* As said: the five come again. */
    assert_int_equal (rmdir (path), 0);
    spool = s_open (f, NULL, NULL);
    for (uint64_t seq = 1; seq <= 10; seq++)
        s_expect (spool, seq);
    fh_spool_consumed (spool);
    assert_int_equal (fh_spool_close_checked (&spool, &repeated), 0);
    assert_int_equal (repeated, 0);
}

static void
test_fsync_modes (void **state)
{
    s_fixture_t *f = *state;
    const fh_spool_fsync_t modes[] = {FH_SPOOL_FSYNC_ALWAYS, FH_SPOOL_FSYNC_INTERVAL};
    uint64_t seq = 1, out = 1;
    for (size_t k = 0; k < 2; k++) {
        fh_spool_options_t options
            = {.segment_bytes = 2048, .fsync = modes[k], .fsync_interval_ms = 10};
        fh_spool_t *spool = s_open (f, &options, NULL);
        for (int i = 0; i < 40; i++) {
            s_append (spool, seq++);
            assert_int_equal (fh_spool_tick (spool, (int64_t) i * 5000000), 0);
        }
        while (out < seq)
            s_expect (spool, out++);
        fh_spool_consumed (spool);
        fh_spool_close (&spool);
    }
}

/* ------------------------------------------------------------ threads */

#define THREADED_RECORDS 200000

typedef struct {
    fh_spool_t *spool;
    atomic_bool done;
} s_shared_t;

static void *
s_appender (void *arg)
{
    s_shared_t *shared = arg;
    for (uint64_t seq = 1; seq <= THREADED_RECORDS; seq++) {
        s_msg_t m;
        s_make (&m, seq);
        int rc = fh_spool_append (shared->spool, seq, (int64_t) seq * 1000, m.frames, m.count);
        if (rc != 0)
            return (void *) (intptr_t) seq;
        if (seq % 4096 == 0)
            sched_yield (); /* let the reader catch up now and then */
    }
    return NULL;
}

/* A third thread: ticks (syncs, time-due cursor writes) and reads the
   counters, as the hub's metrics would. */
static void *
s_ticker (void *arg)
{
    s_shared_t *shared = arg;
    volatile uint64_t sink = 0;
    while (!atomic_load (&shared->done)) {
        struct timespec now;
        clock_gettime (CLOCK_MONOTONIC, &now);
        fh_spool_tick (shared->spool, (int64_t) now.tv_sec * 1000000000 + now.tv_nsec);
        sink += fh_spool_records (shared->spool) + fh_spool_bytes (shared->spool)
                + fh_spool_corrupt (shared->spool);
        struct timespec pause = {0, 1000000};
        nanosleep (&pause, NULL);
    }
    (void) sink;
    return NULL;
}

static void
test_concurrent_append_and_read (void **state)
{
    s_fixture_t *f = *state;
    fh_spool_options_t options = {.segment_bytes = 256 * 1024,
                                  .fsync = FH_SPOOL_FSYNC_INTERVAL,
                                  .fsync_interval_ms = 50,
                                  .cursor_ms = 5};
    s_shared_t shared = {.spool = s_open (f, &options, NULL)};
    atomic_init (&shared.done, false);
    pthread_t appender, ticker;
    assert_int_equal (pthread_create (&appender, NULL, s_appender, &shared), 0);
    assert_int_equal (pthread_create (&ticker, NULL, s_ticker, &shared), 0);
    /* The reader is this thread: every record once, in order. */
    uint64_t expected = 1, empties = 0;
    while (expected <= THREADED_RECORDS) {
        fh_spool_record_t rec;
        int rc = fh_spool_read (shared.spool, &rec);
        assert_true (rc >= 0);
        if (rc == 0) {
            empties++;
            sched_yield ();
            continue;
        }
        if (rec.seq != expected)
            fail_msg ("got seq %llu, expected %llu", (unsigned long long) rec.seq,
                      (unsigned long long) expected);
        s_check (&rec, expected);
        expected++;
        if (expected % 100 == 0)
            fh_spool_consumed (shared.spool);
    }
    void *failed;
    pthread_join (appender, &failed);
    assert_null (failed);
    atomic_store (&shared.done, true);
    pthread_join (ticker, NULL);
    s_expect_empty (shared.spool);
    fh_spool_consumed (shared.spool);
    assert_int_equal (fh_spool_bytes (shared.spool), 0);
    assert_int_equal (fh_spool_corrupt (shared.spool), 0);
    print_message ("reader found the spool empty %llu times\n", (unsigned long long) empties);
    fh_spool_close (&shared.spool);
    assert_int_equal (s_segment_count (f), 1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_fifo_across_segments, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_segments_deleted_after_consumed, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_reopen_after_close, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_abandon_repeats_bounded_window, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_kill9_child, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_torn_tail, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_damage_in_the_middle, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_damage_found_while_reading, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_max_bytes_full, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_refusals, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_damaged_cursor, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_fsync_modes, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_low_water_mark, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_close_without_cursor, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_lost_records_counted, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_concurrent_append_and_read, s_setup,
                                         test_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
