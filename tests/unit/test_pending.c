/*  test_pending - the table of messages a plugin answered FANHUB_PENDING:
    tickets, completion from other threads, the done FIFO, the bound.
*/
#include "pending.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

/* Messages are only compared by address here. */
static fh_msg_t *
s_msg (uintptr_t n)
{
    return (fh_msg_t *) (uintptr_t) (n * 64);
}

static int s_wakes;
static void
s_wake (void *arg)
{
    (void) arg;
    __atomic_add_fetch (&s_wakes, 1, __ATOMIC_SEQ_CST);
}

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
test_tickets_and_order (void **state)
{
    (void) state;
    s_wakes = 0;
    fh_pending_t *p = fh_pending_new (3, s_wake, NULL);
    assert_non_null (p);
    fanhub_ticket_t t[4];
    for (uintptr_t i = 1; i <= 3; i++) {
        fh_pending_item_t item = {.msg = s_msg (i), .attempts = 1, .started_ns = (int64_t) i};
        t[i] = fh_pending_reserve (p, &item, false);
        assert_true (t[i] != 0);
        fh_pending_hold (p, t[i]);
    }
    assert_true (fh_pending_full (p));
    fh_pending_item_t extra = {.msg = s_msg (4)};
    assert_int_equal (fh_pending_reserve (p, &extra, false), 0);
    /* Completed out of order: finished in the order of completion. */
    assert_int_equal (fh_pending_complete (p, t[3], FANHUB_RETRY), 0);
    assert_int_equal (fh_pending_complete (p, t[1], FANHUB_OK), 0);
    assert_int_equal (s_wakes, 2);
    /* Twice, or unknown: refused. */
    assert_int_equal (fh_pending_complete (p, t[3], FANHUB_OK), -1);
    assert_int_equal (fh_pending_complete (p, 12345, FANHUB_OK), -1);
    assert_int_equal (fh_pending_complete (p, 0, FANHUB_OK), -1);
    assert_int_equal (fh_pending_done_count (p), 2);
    fh_pending_item_t out;
    assert_true (fh_pending_take_done (p, &out));
    assert_ptr_equal (out.msg, s_msg (3));
    assert_int_equal (out.result, FANHUB_RETRY);
    assert_int_equal (out.started_ns, 3);
    assert_true (fh_pending_take_done (p, &out));
    assert_ptr_equal (out.msg, s_msg (1));
    assert_false (fh_pending_take_done (p, &out));
    assert_int_equal (fh_pending_count (p), 1);
    /* A freed entry's old ticket stays refused after reuse. */
    fh_pending_item_t again = {.msg = s_msg (5), .started_ns = 1000};
    fanhub_ticket_t t5 = fh_pending_reserve (p, &again, false);
    fh_pending_hold (p, t5);
    assert_true (t5 != t[1] && t5 != t[3]);
    assert_int_equal (fh_pending_complete (p, t[1], FANHUB_OK), -1);
    /* Stuck: open entries older than a moment. */
    assert_int_equal (fh_pending_older_than (p, 100, NULL), 1); /* msg 2, started at 2 */
    assert_int_equal (fh_pending_older_than (p, 2000, NULL), 2);
    assert_int_equal (fh_pending_older_than (p, 1, NULL), 0);
    fh_pending_destroy (&p, NULL, NULL);
    assert_null (p);
    fh_pending_destroy (&p, NULL, NULL);
}

/* consume_timeout: open entries older than a moment are done as RETRY,
   marked expired, their tickets void; reserved ones (inside consume) are
   not touched. Then the wait at a reload or stop gives up the rest. */
static void
test_expire_and_abandon (void **state)
{
    (void) state;
    s_wakes = 0;
    fh_pending_t *p = fh_pending_new (4, s_wake, NULL);
    fh_msg_t old_msg, new_msg;
    memset (&old_msg, 0, sizeof old_msg);
    memset (&new_msg, 0, sizeof new_msg);
    old_msg.seq = 7;
    new_msg.seq = 8;
    fh_pending_item_t old_item = {.msg = &old_msg, .started_ns = 10};
    fh_pending_item_t new_item = {.msg = &new_msg, .started_ns = 1000};
    fh_pending_item_t inside = {.msg = s_msg (9), .started_ns = 1};
    fanhub_ticket_t t_old = fh_pending_reserve (p, &old_item, false);
    fh_pending_hold (p, t_old);
    fanhub_ticket_t t_new = fh_pending_reserve (p, &new_item, false);
    fh_pending_hold (p, t_new);
    fanhub_ticket_t t_inside = fh_pending_reserve (p, &inside, false);
    uint64_t oldest = 0;
    assert_int_equal (fh_pending_expire (p, 500, &oldest), 1);
    assert_int_equal (oldest, 7);
    assert_int_equal (s_wakes, 1);
    assert_int_equal (fh_pending_expire (p, 500, NULL), 0); /* once */
    assert_int_equal (s_wakes, 1);
    /* A late complete of the expired ticket is refused. */
    assert_int_equal (fh_pending_complete (p, t_old, FANHUB_OK), -1);
    fh_pending_item_t out;
    assert_true (fh_pending_take_done (p, &out));
    assert_ptr_equal (out.msg, &old_msg);
    assert_true (out.expired);
    assert_int_equal (out.result, FANHUB_RETRY);
    /* Abandoning takes the open one, not the one inside consume. */
    assert_true (fh_pending_take_open (p, &out));
    assert_ptr_equal (out.msg, &new_msg);
    assert_false (out.expired);
    assert_false (fh_pending_take_open (p, &out));
    assert_int_equal (fh_pending_complete (p, t_new, FANHUB_OK), -1);
    assert_int_equal (fh_pending_count (p), 1);
    assert_false (fh_pending_cancel (p, t_inside));
    assert_int_equal (fh_pending_count (p), 0);
    fh_pending_destroy (&p, NULL, NULL);
}

/* Completed during the consume call that then answers something else:
   the answer counts, and the entry leaves the done FIFO. */
static void
test_complete_inside_consume (void **state)
{
    (void) state;
    fh_pending_t *p = fh_pending_new (2, NULL, NULL);
    fh_pending_item_t item = {.msg = s_msg (1)};
    fanhub_ticket_t t = fh_pending_reserve (p, &item, false);
    assert_int_equal (fh_pending_complete (p, t, FANHUB_OK), 0);
    assert_true (fh_pending_cancel (p, t));
    assert_int_equal (fh_pending_done_count (p), 0);
    assert_int_equal (fh_pending_count (p), 0);
    /* Completed inside the call that answers PENDING: done at once. */
    t = fh_pending_reserve (p, &item, false);
    assert_int_equal (fh_pending_complete (p, t, FANHUB_FAIL), 0);
    fh_pending_hold (p, t);
    fh_pending_item_t out;
    assert_true (fh_pending_take_done (p, &out));
    assert_int_equal (out.result, FANHUB_FAIL);
    /* Not completed: cancel says so. */
    t = fh_pending_reserve (p, &item, false);
    assert_false (fh_pending_cancel (p, t));
    fh_pending_destroy (&p, NULL, NULL);
}

/* A pool's workers claim their places in the window before consume; a
   reservation takes its claim over, a worker without one gives it back:
   the window is never passed and a claimed place always has room. */
static void
test_claims (void **state)
{
    (void) state;
    fh_pending_t *p = fh_pending_new (4, NULL, NULL);
    fh_pending_set_window (p, 2);
    assert_false (fh_pending_full (p));
    fh_pending_claim (p);
    fh_pending_claim (p);
    assert_true (fh_pending_full (p)); /* two workers inside consume */
    assert_int_equal (fh_pending_count (p), 0);
    fh_pending_item_t item = {.msg = s_msg (1)};
    fanhub_ticket_t t = fh_pending_reserve (p, &item, true);
    assert_true (t != 0);
    fh_pending_hold (p, t);
    assert_true (fh_pending_full (p)); /* one ticket, one claim */
    assert_int_equal (fh_pending_count (p), 1);
    fh_pending_unclaim (p); /* the other answered at once */
    assert_false (fh_pending_full (p));
    assert_int_equal (fh_pending_complete (p, t, FANHUB_OK), 0);
    assert_int_equal (fh_pending_done_count (p), 1);
    fh_pending_item_t out;
    assert_true (fh_pending_take_done (p, &out));
    assert_int_equal (fh_pending_count (p), 0);
    assert_int_equal (fh_pending_done_count (p), 0);
    fh_pending_destroy (&p, NULL, NULL);
}

static int s_released;
static void
s_release (fh_msg_t *msg, void *arg)
{
    (void) msg;
    (void) arg;
    s_released++;
}

typedef struct {
    fh_pending_t *p;
    fanhub_ticket_t *tickets;
    size_t from, to;
} s_job_t;

static void *
s_completer (void *arg)
{
    s_job_t *job = arg;
    for (size_t i = job->from; i < job->to; i++)
        fh_pending_complete (job->p, job->tickets[i], FANHUB_OK);
    return NULL;
}

/* Completions from several threads while the owner waits and takes them:
   each exactly once. */
static void
test_threads (void **state)
{
    (void) state;
    enum { N = 2000 };
    fh_pending_t *p = fh_pending_new (N, NULL, NULL);
    static fanhub_ticket_t tickets[N];
    for (uintptr_t i = 0; i < N; i++) {
        fh_pending_item_t item = {.msg = s_msg (i + 1)};
        tickets[i] = fh_pending_reserve (p, &item, false);
        fh_pending_hold (p, tickets[i]);
    }
    pthread_t threads[4];
    s_job_t jobs[4];
    for (size_t k = 0; k < 4; k++) {
        jobs[k] = (s_job_t){p, tickets, k * N / 4, (k + 1) * N / 4};
        pthread_create (&threads[k], NULL, s_completer, &jobs[k]);
    }
    static unsigned char seen[N + 1];
    size_t taken = 0;
    while (taken < N) {
        fh_pending_item_t out;
        if (!fh_pending_take_done (p, &out)) {
            assert_true (fh_pending_wait (p, s_now_ns () + 60 * INT64_C (1000000000)));
            continue;
        }
        uintptr_t n = (uintptr_t) out.msg / 64;
        assert_true (n >= 1 && n <= N && !seen[n]);
        seen[n] = 1;
        taken++;
    }
    for (size_t k = 0; k < 4; k++)
        pthread_join (threads[k], NULL);
    assert_int_equal (fh_pending_count (p), 0);
    /* Open ones at the end are handed to release. */
    fh_pending_item_t item = {.msg = s_msg (1)};
    fh_pending_hold (p, fh_pending_reserve (p, &item, false));
    s_released = 0;
    fh_pending_destroy (&p, s_release, NULL);
    assert_int_equal (s_released, 1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_tickets_and_order),
        cmocka_unit_test (test_complete_inside_consume),
        cmocka_unit_test (test_expire_and_abandon),
        cmocka_unit_test (test_claims),
        cmocka_unit_test (test_threads),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
