/*  test_spool_losses - every way a spool loses records is counted in
    spool_lost and logged, at open and while reading, and nothing that is
    not lost is counted (issue 28, item 6).

    Cases: a cursor naming a segment past the last one (not believed: the
    records are delivered, none deleted); the first segment deleted under a
    cursor at its start; a stray directory and foreign files named like
    segments (ignored with a warning, never a failed open, their number
    never reused); a middle segment deleted, and one cut short, while the
    spool is read (their unread records counted, the waiting count and
    bytes corrected); the spool's directory removed while open (made again,
    the writer and the cursor go on in it, what was lost counted).
*/
#include "spool.h"
#include "spool_record.h"

#include "crc32c.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "spool_msg.h"
#include "test_dir.h"

static int
s_setup (void **state)
{
    return test_dir_setup (state, "test_spool_losses", "state/consumer");
}

static const fh_spool_options_t s_small = {.segment_bytes = 2048};

static fh_spool_t *
s_open (const test_dir_fixture_t *f)
{
    char err[512] = "";
    fh_spool_t *spool = fh_spool_open (f->dir, &s_small, NULL, err, sizeof err);
    if (!spool)
        fail_msg ("fh_spool_open: %s", err);
    return spool;
}

static void
s_append_range (fh_spool_t *spool, uint64_t from, uint64_t to)
{
    for (uint64_t seq = from; seq <= to; seq++) {
        spool_msg_t m;
        spool_msg_make (&m, "org.example.loss", seq);
        assert_int_equal (fh_spool_append (spool, seq, (int64_t) seq, m.frames, m.count), 0);
    }
}

/* Reads everything there is: how many, each after the one before. */
static uint64_t
s_read_all (fh_spool_t *spool, uint64_t *last)
{
    fh_spool_record_t rec;
    uint64_t count = 0;
    int rc;
    while ((rc = fh_spool_read (spool, &rec)) == 1) {
        assert_true (rec.seq > *last);
        *last = rec.seq;
        count++;
    }
    assert_int_equal (rc, 0);
    return count;
}

static void
s_seg_path (const test_dir_fixture_t *f, uint64_t seg, char *path, size_t size)
{
    snprintf (path, size, "%s/seg-%016" PRIx64 ".spool", f->dir, seg);
}

/* Records in segment seg, counted by parsing its file. */
static uint64_t
s_records_in (const test_dir_fixture_t *f, uint64_t seg)
{
    char path[256];
    s_seg_path (f, seg, path, sizeof path);
    FILE *in = fopen (path, "rb");
    assert_non_null (in);
    static uint8_t buf[1 << 16];
    size_t n = fread (buf, 1, sizeof buf, in);
    fclose (in);
    uint64_t records = 0;
    size_t off = 0, size;
    const uint8_t *payload;
    uint32_t len;
    while (off < n
           && fh_record_parse (buf + off, n - off, true, &size, &payload, &len) == FH_RECORD_OK) {
        records++;
        off += size;
    }
    return records;
}

static void
s_write_cursor (const test_dir_fixture_t *f, uint64_t seg, uint64_t off)
{
    char text[128], path[256];
    int n = snprintf (text, sizeof text, "fanhub-spool-cursor 1 %016" PRIx64 " %" PRIu64 " ", seg,
                      off);
    snprintf (text + n, sizeof text - (size_t) n, "%08x\n", fh_crc32c (0, text, (size_t) n));
    snprintf (path, sizeof path, "%s/cursor", f->dir);
    FILE *out = fopen (path, "w");
    assert_non_null (out);
    fputs (text, out);
    fclose (out);
}

/* The highest segment number on disk. */
static uint64_t
s_top_segment (const test_dir_fixture_t *f)
{
    DIR *dir = opendir (f->dir);
    assert_non_null (dir);
    uint64_t top = 0, seg;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (sscanf (entry->d_name, "seg-%16" SCNx64 ".spool", &seg) == 1 && seg > top)
            top = seg;
    closedir (dir);
    return top;
}

/* A cursor past the last segment: on main every record was deleted as
   consumed, silently. Not believed now: all are delivered. */
static void
test_cursor_past_the_last_segment (void **state)
{
    test_dir_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f);
    s_append_range (spool, 1, 100);
    fh_spool_close (&spool);
    s_write_cursor (f, 40, 0);
    spool = s_open (f);
    assert_int_equal (fh_spool_records (spool), 100);
    uint64_t last = 0;
    assert_int_equal (s_read_all (spool, &last), 100);
    assert_int_equal (last, 100);
    assert_int_equal (fh_spool_lost (spool), 0);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    /* A cursor inside the segment the writer would take next: not
       believed either. */
    spool = s_open (f);
    s_append_range (spool, 101, 150);
    fh_spool_close (&spool);
    s_write_cursor (f, s_top_segment (f) + 1, 10);
    /* The segment the old cursor was in comes again whole: its records
       were consumed (its last, 100, among them). */
    spool = s_open (f);
    uint64_t again = fh_spool_records (spool) - 50;
    assert_true (again >= 1);
    last = 100 - again;
    assert_int_equal (s_read_all (spool, &last), 50 + again);
    assert_int_equal (last, 150);
    fh_spool_close (&spool);
}

/* The first segment deleted under a cursor at its start (the cursor a run
   writes before it consumed anything): on main it went uncounted. */
static void
test_first_segment_deleted (void **state)
{
    test_dir_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f);
    s_append_range (spool, 1, 100);
    fh_spool_close (&spool); /* the cursor: (1, 0) */
    uint64_t first = s_records_in (f, 1);
    assert_true (first > 0);
    char path[256];
    s_seg_path (f, 1, path, sizeof path);
    assert_int_equal (unlink (path), 0);
    spool = s_open (f);
    assert_int_equal (fh_spool_lost (spool), 1); /* a segment: its records unknown */
    assert_int_equal (fh_spool_records (spool), 100 - first);
    uint64_t last = 0;
    assert_int_equal (s_read_all (spool, &last), 100 - first);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    /* Counted once: the next open finds nothing missing. */
    spool = s_open (f);
    assert_int_equal (fh_spool_lost (spool), 0);
    /* A spool emptied at a clean close starts its next segment at the
       cursor's: nothing is missing after appends either. */
    s_append_range (spool, 101, 140);
    fh_spool_close (&spool);
    spool = s_open (f);
    assert_int_equal (fh_spool_lost (spool), 0);
    last = 100;
    assert_int_equal (s_read_all (spool, &last), 40);
    fh_spool_close (&spool);
}

/* A directory named like a segment failed the open on main (exit 2 of the
   hub); foreign files were ignored silently. Now: warnings, an open that
   works, and the stray number never taken by the writer. */
static void
test_stray_directory_and_foreign_files (void **state)
{
    test_dir_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f);
    s_append_range (spool, 1, 20);
    fh_spool_close (&spool);
    /* Directories where the writer's next segments would go. */
    uint64_t top = s_top_segment (f);
    char path[256];
    s_seg_path (f, top + 1, path, sizeof path);
    assert_int_equal (mkdir (path, 0750), 0);
    s_seg_path (f, top + 3, path, sizeof path);
    assert_int_equal (mkdir (path, 0750), 0);
    snprintf (path, sizeof path, "%s/seg-notanumber.spool", f->dir);
    fclose (fopen (path, "w"));
    snprintf (path, sizeof path, "%s/old.spool", f->dir);
    fclose (fopen (path, "w"));
    spool = s_open (f);
    assert_int_equal (fh_spool_records (spool), 20);
    assert_int_equal (fh_spool_lost (spool), 0);
    assert_int_equal (fh_spool_corrupt (spool), 0);
    s_append_range (spool, 21, 120); /* several new segments, past them */
    fh_spool_close (&spool);
    /* The numbers passed over are not missing segments. */
    spool = s_open (f);
    assert_int_equal (fh_spool_lost (spool), 0);
    assert_int_equal (fh_spool_records (spool), 120);
    /* One put where the writer goes next while open: passed over too. */
    s_seg_path (f, s_top_segment (f) + 1, path, sizeof path);
    assert_int_equal (mkdir (path, 0750), 0);
    s_append_range (spool, 121, 160);
    uint64_t last = 0;
    assert_int_equal (s_read_all (spool, &last), 160);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    s_seg_path (f, top + 3, path, sizeof path);
    struct stat st;
    assert_int_equal (stat (path, &st), 0);
    assert_true (S_ISDIR (st.st_mode)); /* left alone */
    spool = s_open (f);
    assert_int_equal (fh_spool_records (spool), 0);
    assert_int_equal (fh_spool_lost (spool), 0);
    fh_spool_close (&spool);
}

/* A middle segment deleted, and another cut short, while the spool is
   read: on main their records were counted nowhere and stayed in the
   waiting count for ever (a false backlog). */
static void
test_segments_lost_while_reading (void **state)
{
    test_dir_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f);
    s_append_range (spool, 1, 300);
    uint64_t last = 0;
    fh_spool_record_t rec;
    for (int i = 0; i < 3; i++) {
        assert_int_equal (fh_spool_read (spool, &rec), 1);
        last = rec.seq;
    }
    uint64_t deleted = s_records_in (f, 4), cut = s_records_in (f, 6);
    assert_true (deleted > 0 && cut > 1);
    char path[256];
    s_seg_path (f, 4, path, sizeof path);
    assert_int_equal (unlink (path), 0);
    /* Segment 6 cut at a record boundary: no damage shows. */
    s_seg_path (f, 6, path, sizeof path);
    FILE *in = fopen (path, "rb");
    static uint8_t buf[1 << 16];
    size_t n = fread (buf, 1, sizeof buf, in), size;
    fclose (in);
    const uint8_t *payload;
    uint32_t len;
    assert_int_equal (fh_record_parse (buf, n, true, &size, &payload, &len), FH_RECORD_OK);
    assert_int_equal (truncate (path, (off_t) size), 0); /* one record left */
    uint64_t read = 3 + s_read_all (spool, &last);
    assert_int_equal (last, 300);
    assert_int_equal (fh_spool_lost (spool), deleted + cut - 1);
    assert_int_equal (read + fh_spool_lost (spool), 300);
    assert_int_equal (fh_spool_records (spool), 0);
    assert_int_equal (fh_spool_corrupt (spool), 0);
    fh_spool_consumed (spool);
    assert_int_equal (fh_spool_bytes (spool), 0);
    fh_spool_close (&spool);
}

static void
s_remove_tree (const char *dir)
{
    test_remove_tree (dir);
    struct stat st;
    assert_int_not_equal (stat (dir, &st), 0);
}

/* The spool's directory removed while open: on main the writer failed on
   every later append and the records were lost uncounted. Now it is made
   again (by the next tick, or the next segment's creation), the writer
   goes on there, and the records the reader cannot read are counted. */
static void
test_directory_removed_while_open (void **state)
{
    test_dir_fixture_t *f = *state;
    fh_spool_t *spool = s_open (f);
    s_append_range (spool, 1, 200);
    fh_spool_record_t rec;
    assert_int_equal (fh_spool_read (spool, &rec), 1); /* segment 1 open */
    uint64_t last = rec.seq;
    s_remove_tree (f->dir);
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    fh_spool_tick (spool, (int64_t) now.tv_sec * 1000000000 + now.tv_nsec);
    struct stat st;
    assert_int_equal (stat (f->dir, &st), 0); /* made again */
    s_append_range (spool, 201, 230);         /* into a new segment there */
    uint64_t read = 1 + s_read_all (spool, &last);
    assert_int_equal (last, 230);
    assert_true (fh_spool_lost (spool) > 0);
    assert_int_equal (read + fh_spool_lost (spool), 230);
    assert_int_equal (fh_spool_records (spool), 0);
    fh_spool_consumed (spool);
    fh_spool_close (&spool);
    /* The cursor went to the new directory: a clean open, nothing waiting. */
    spool = s_open (f);
    assert_int_equal (fh_spool_records (spool), 0);
    assert_int_equal (fh_spool_lost (spool), 0);
    fh_spool_close (&spool);
    /* Removed again, and found by the writer making its next segment. */
    spool = s_open (f);
    s_remove_tree (f->dir);
    s_append_range (spool, 231, 240);
    last = 230;
    assert_int_equal (s_read_all (spool, &last), 10);
    fh_spool_close (&spool);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_cursor_past_the_last_segment, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_first_segment_deleted, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_stray_directory_and_foreign_files, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_segments_lost_while_reading, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_directory_removed_while_open, s_setup,
                                         test_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
