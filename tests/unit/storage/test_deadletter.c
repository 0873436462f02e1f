/*  test_deadletter - a consumer's dead-letter store.

    Each case works in its own directory under mkdtemp, removed after:
    add, list, load and remove round trips; damaged entries are listed
    with an error rather than failing the list or crashing; a store that
    was never created lists empty; IDs stay unique and increasing across
    threads and reopens.
*/
#include "deadletter.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_dir.h"

typedef test_dir_fixture_t s_fixture_t;

static int
s_setup (void **state)
{
    return test_dir_setup (state, "test_deadletter", "state/archive/dead-letter");
}

static fh_deadletter_t *
s_open (const s_fixture_t *f, bool create)
{
    char err[512] = "";
    fh_deadletter_t *store = fh_deadletter_open (f->dir, "archive", create, err, sizeof err);
    if (!store)
        fail_msg ("fh_deadletter_open: %s", err);
    return store;
}

static void
s_add (fh_deadletter_t *store, uint64_t seq, const char *topic, const char *body,
       const char *reason, char id[FH_DEADLETTER_ID_SIZE])
{
    fanhub_bytes_t frames[3] = {{topic, strlen (topic)}, {body, strlen (body)}, {"\0\1\2", 3}};
    fh_deadletter_item_t item = {
        .seq = seq,
        .received_wall_ns = (int64_t) seq * 1000000000,
        .frames = frames,
        .frame_count = seq % 2 ? 2 : 3,
        .reason = reason,
        .attempts = (uint32_t) seq + 1,
        .first_attempt_ns = (int64_t) seq * 1000000000 + 1,
        .last_attempt_ns = (int64_t) seq * 1000000000 + 2,
    };
    char err[512] = "";
    if (fh_deadletter_add (store, &item, id, err, sizeof err) != 0)
        fail_msg ("fh_deadletter_add: %s", err);
    assert_true (fh_deadletter_id_valid (id));
}

static void
s_entry_path (const s_fixture_t *f, const char *id, char *path, size_t size)
{
    snprintf (path, size, "%s/%s.dl", f->dir, id);
}

static void
test_add_list_load_remove (void **state)
{
    s_fixture_t *f = *state;
    fh_deadletter_t *store = s_open (f, true);
    char ids[3][FH_DEADLETTER_ID_SIZE];
    s_add (store, 7, "org.example.build", "{\"id\": 7}", "plugin said no", ids[0]);
    s_add (store, 8, "org.example.build", "{\"id\": 8}", NULL, ids[1]);
    s_add (store, 9, "org.example.other", "", "attempts used up (5)", ids[2]);
    assert_true (strcmp (ids[0], ids[1]) < 0 && strcmp (ids[1], ids[2]) < 0);

    fh_deadletter_entry_t *entries;
    size_t count;
    char err[512];
    assert_int_equal (fh_deadletter_list (store, &entries, &count, err, sizeof err), 0);
    assert_int_equal (count, 3);
    for (size_t i = 0; i < 3; i++) {
        fh_deadletter_entry_t *e = &entries[i];
        uint64_t seq = 7 + i;
        assert_null (e->error);
        assert_string_equal (e->id, ids[i]);
        assert_int_equal (e->seq, seq);
        assert_int_equal (e->received_wall_ns, (int64_t) seq * 1000000000);
        assert_int_equal (e->attempts, seq + 1);
        assert_int_equal (e->first_attempt_ns, (int64_t) seq * 1000000000 + 1);
        assert_int_equal (e->last_attempt_ns, (int64_t) seq * 1000000000 + 2);
        assert_string_equal (e->consumer, "archive");
        assert_int_equal (e->frame_count, seq % 2 ? 2 : 3);
        assert_null (e->frames); /* a list carries no bodies */
    }
    assert_string_equal (entries[0].reason, "plugin said no");
    assert_string_equal (entries[1].reason, "");
    assert_string_equal (entries[2].topic, "org.example.other");
    assert_int_equal (entries[0].body_bytes, 9);
    assert_int_equal (entries[1].total_bytes, strlen ("org.example.build") + 9 + 3);
    assert_int_equal (entries[2].body_bytes, 0);
    fh_deadletter_entries_free (entries, count);

    fh_deadletter_entry_t entry;
    assert_int_equal (fh_deadletter_load (store, ids[1], &entry, err, sizeof err), 0);
    assert_int_equal (entry.frame_count, 3);
    assert_int_equal (entry.frames[1].size, 9);
    assert_memory_equal (entry.frames[1].data, "{\"id\": 8}", 9);
    assert_memory_equal (entry.frames[2].data, "\0\1\2", 3);
    assert_string_equal (entry.topic, "org.example.build");
    fh_deadletter_entry_clear (&entry);
    fh_deadletter_entry_clear (&entry); /* twice is fine */

    assert_int_equal (fh_deadletter_remove (store, ids[1], err, sizeof err), 0);
    assert_int_equal (fh_deadletter_remove (store, ids[1], err, sizeof err), -1);
    assert_int_equal (errno, ENOENT);
    assert_non_null (strstr (err, ids[1]));
    assert_int_equal (fh_deadletter_load (store, ids[1], &entry, err, sizeof err), -1);
    assert_int_equal (errno, ENOENT);
    assert_int_equal (fh_deadletter_load (store, "../../etc/passwd", &entry, err, sizeof err), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (fh_deadletter_list (store, &entries, &count, err, sizeof err), 0);
    assert_int_equal (count, 2);
    assert_string_equal (entries[0].id, ids[0]);
    assert_string_equal (entries[1].id, ids[2]);
    fh_deadletter_entries_free (entries, count);
    fh_deadletter_close (&store);
    assert_null (store);
    fh_deadletter_close (&store);
}

static void
test_damaged_entries_are_listed (void **state)
{
    s_fixture_t *f = *state;
    fh_deadletter_t *store = s_open (f, true);
    char ids[4][FH_DEADLETTER_ID_SIZE];
    for (int i = 0; i < 4; i++)
        s_add (store, (uint64_t) i + 1, "org.example.t", "some body text", "why", ids[i]);
    char path[256];
    /* 1: a flipped byte in the body; 2: cut short; 3: empty. */
    s_entry_path (f, ids[1], path, sizeof path);
    int fd = open (path, O_RDWR);
    struct stat st;
    fstat (fd, &st);
    uint8_t byte;
    assert_int_equal (pread (fd, &byte, 1, st.st_size - 3), 1);
    byte ^= 1;
    assert_int_equal (pwrite (fd, &byte, 1, st.st_size - 3), 1);
    close (fd);
    s_entry_path (f, ids[2], path, sizeof path);
    assert_int_equal (truncate (path, 40), 0);
    s_entry_path (f, ids[3], path, sizeof path);
    assert_int_equal (truncate (path, 0), 0);
    /* Files that are not entries are not listed. */
    snprintf (path, sizeof path, "%s/notes.txt", f->dir);
    FILE *file = fopen (path, "w");
    fclose (file);

    fh_deadletter_entry_t *entries;
    size_t count;
    char err[512];
    assert_int_equal (fh_deadletter_list (store, &entries, &count, err, sizeof err), 0);
    assert_int_equal (count, 4);
    assert_null (entries[0].error);
    assert_int_equal (entries[0].seq, 1);
    for (int i = 1; i < 4; i++) {
        assert_non_null (entries[i].error);
        assert_string_equal (entries[i].id, ids[i]);
        assert_non_null (strstr (entries[i].error, ids[i]));
        assert_non_null (strstr (entries[i].error, "damaged"));
        assert_null (entries[i].reason);
    }
    print_message ("%s\n%s\n%s\n", entries[1].error, entries[2].error, entries[3].error);
    fh_deadletter_entries_free (entries, count);

    fh_deadletter_entry_t entry;
    assert_int_equal (fh_deadletter_load (store, ids[1], &entry, err, sizeof err), -1);
    assert_int_equal (errno, EBADMSG);
    assert_non_null (strstr (err, ids[1]));
    /* A damaged entry can still be removed. */
    assert_int_equal (fh_deadletter_remove (store, ids[1], err, sizeof err), 0);
    fh_deadletter_close (&store);
}

static void
test_missing_store_is_empty (void **state)
{
    s_fixture_t *f = *state;
    fh_deadletter_t *store = s_open (f, false);
    fh_deadletter_entry_t *entries = (void *) 1;
    size_t count = 99;
    char err[512];
    assert_int_equal (fh_deadletter_list (store, &entries, &count, err, sizeof err), 0);
    assert_int_equal (count, 0);
    assert_null (entries);
    fh_deadletter_entries_free (entries, count);
    struct stat st;
    assert_int_equal (stat (f->dir, &st), -1); /* and a list does not create it */
    fh_deadletter_close (&store);
}

static void
test_ids_increase_across_reopen (void **state)
{
    s_fixture_t *f = *state;
    char first[FH_DEADLETTER_ID_SIZE], second[FH_DEADLETTER_ID_SIZE];
    fh_deadletter_t *store = s_open (f, true);
    s_add (store, 1, "t", "b", "r", first);
    fh_deadletter_close (&store);
    /* Rename the entry to an ID far in the future, as if the clock had
       gone back since: the next ID still comes after it. */
    char from[256], to[256];
    s_entry_path (f, first, from, sizeof from);
    s_entry_path (f, "7fffffffffff0000", to, sizeof to);
    assert_int_equal (rename (from, to), 0);
    store = s_open (f, true);
    s_add (store, 2, "t", "b", "r", second);
    assert_string_equal (second, "7fffffffffff0001");
    fh_deadletter_close (&store);
}

static void
test_long_reason_is_cut (void **state)
{
    s_fixture_t *f = *state;
    fh_deadletter_t *store = s_open (f, true);
    size_t len = FH_DEADLETTER_MAX_REASON + 100;
    char *reason = malloc (len + 1);
    /* "é" (two bytes) over and over, so the cut falls inside one. */
    for (size_t i = 0; i + 1 < len; i += 2) {
        reason[i] = (char) 0xC3;
        reason[i + 1] = (char) 0xA9;
    }
    reason[len] = '\0';
    reason[FH_DEADLETTER_MAX_REASON - 1] = (char) 0xC3; /* a sequence across the cut */
    reason[FH_DEADLETTER_MAX_REASON] = (char) 0xA9;
    char id[FH_DEADLETTER_ID_SIZE], err[512];
    s_add (store, 1, "t", "b", reason, id);
    fh_deadletter_entry_t entry;
    assert_int_equal (fh_deadletter_load (store, id, &entry, err, sizeof err), 0);
    assert_int_equal (strlen (entry.reason), FH_DEADLETTER_MAX_REASON - 1);
    fh_deadletter_entry_clear (&entry);
    free (reason);
    fh_deadletter_close (&store);
}

#define ADDERS 4
#define ADDS 50

static void *
s_adder (void *arg)
{
    fh_deadletter_t *store = arg;
    for (int i = 0; i < ADDS; i++) {
        fanhub_bytes_t frames[2] = {{"t", 1}, {"b", 1}};
        fh_deadletter_item_t item
            = {.seq = (uint64_t) i, .frames = frames, .frame_count = 2, .reason = "concurrent"};
        char id[FH_DEADLETTER_ID_SIZE], err[512];
        if (fh_deadletter_add (store, &item, id, err, sizeof err) != 0)
            return strdup (err);
    }
    return NULL;
}

static void
test_concurrent_adds (void **state)
{
    s_fixture_t *f = *state;
    fh_deadletter_t *store = s_open (f, true);
    pthread_t threads[ADDERS];
    for (int i = 0; i < ADDERS; i++)
        assert_int_equal (pthread_create (&threads[i], NULL, s_adder, store), 0);
    for (int i = 0; i < ADDERS; i++) {
        void *failure;
        pthread_join (threads[i], &failure);
        if (failure)
            fail_msg ("add: %s", (char *) failure);
    }
    fh_deadletter_entry_t *entries;
    size_t count;
    char err[512];
    assert_int_equal (fh_deadletter_list (store, &entries, &count, err, sizeof err), 0);
    assert_int_equal (count, ADDERS * ADDS);
    for (size_t i = 0; i < count; i++) {
        assert_null (entries[i].error);
        if (i)
            assert_true (strcmp (entries[i - 1].id, entries[i].id) < 0);
    }
    fh_deadletter_entries_free (entries, count);
    fh_deadletter_close (&store);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_add_list_load_remove, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_damaged_entries_are_listed, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_missing_store_is_empty, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_ids_increase_across_reopen, s_setup,
                                         test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_long_reason_is_cut, s_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown (test_concurrent_adds, s_setup, test_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
