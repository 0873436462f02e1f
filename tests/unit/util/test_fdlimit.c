/*  Tests of fdlimit's accept4: with the descriptor table full, a waiting
    connection is taken and closed (ECONNABORTED), never EMFILE; without
    the spare it waits (EAGAIN) and the spare is taken later; and a
    libzmq ipc listener, which aborts on EMFILE (libzmq 4.3.4), lives
    through a client that arrives then. */
#include "fdlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <cmocka.h>

#include "test_dir.h"

/* The hub's (fdlimit.c); <sys/socket.h> declares it only under _GNU_SOURCE. */
int accept4 (int fd, struct sockaddr *addr, socklen_t *size, int flags);

#define FILL_MAX 512

static char s_dir[128];
static struct rlimit s_limit;
static int s_fill[FILL_MAX];
static int s_filled;

static int
s_setup_dir (void **state)
{
    (void) state;
    if (!mkdtemp (test_tmp_template (s_dir, sizeof s_dir, "fanhub-fdlimit")))
        return -1;
    return getrlimit (RLIMIT_NOFILE, &s_limit);
}

static int
s_setup (void **state)
{
    fh_fdlimit_raise (); /* takes the spare, as `fanhub run` does */
    return s_setup_dir (state);
}

static int
s_teardown (void **state)
{
    (void) state;
    setrlimit (RLIMIT_NOFILE, &s_limit);
    test_remove_tree (s_dir);
    return 0;
}

/* Fills the descriptor table: the soft limit just above what is open,
   then copies of stdin until none is left. */
static void
s_fill_table (void)
{
    struct rlimit low = s_limit;
    low.rlim_cur = 256;
    assert_int_equal (setrlimit (RLIMIT_NOFILE, &low), 0);
    s_filled = 0;
    int fd;
    while ((fd = dup (0)) >= 0) {
        assert_true (s_filled < FILL_MAX);
        s_fill[s_filled++] = fd;
    }
    assert_int_equal (errno, EMFILE);
}

static void
s_empty_table (void)
{
    while (s_filled > 0)
        close (s_fill[--s_filled]);
    assert_int_equal (setrlimit (RLIMIT_NOFILE, &s_limit), 0);
}

/* A listening Unix socket at DIR/name (non-blocking). */
static int
s_listen (const char *name, struct sockaddr_un *addr)
{
    *addr = (struct sockaddr_un){.sun_family = AF_UNIX};
    int n = snprintf (addr->sun_path, sizeof addr->sun_path, "%s/%s", s_dir, name);
    assert_true (n > 0 && (size_t) n < sizeof addr->sun_path);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true (fd >= 0);
    assert_int_equal (bind (fd, (struct sockaddr *) addr, sizeof *addr), 0);
    assert_int_equal (listen (fd, 8), 0);
    return fd;
}

/* True once the peer has closed client's connection (EOF or reset). The
   close is done before this is asked; the timeout only turns a hang into
   a failure. */
static bool
s_closed_by_peer (int client)
{
    struct timeval limit = {30, 0};
    setsockopt (client, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    char byte;
    ssize_t n = recv (client, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void
test_full_table_refuses_the_waiting_connection (void **state)
{
    (void) state;
    struct sockaddr_un addr;
    int listener = s_listen ("plain.sock", &addr);
    int client = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true (client >= 0);
    assert_int_equal (connect (client, (struct sockaddr *) &addr, sizeof addr), 0);

    s_fill_table ();
    errno = 0;
    assert_int_equal (accept4 (listener, NULL, NULL, SOCK_CLOEXEC), -1);
    assert_int_equal (errno, ECONNABORTED);
    /* Nothing waits now: the call says so, not ECONNABORTED. */
    errno = 0;
    assert_int_equal (accept4 (listener, NULL, NULL, SOCK_CLOEXEC), -1);
    assert_true (errno == EAGAIN || errno == EWOULDBLOCK);
    /* The spare was taken back: the table is full again. */
    assert_int_equal (dup (0), -1);
    assert_int_equal (errno, EMFILE);
    s_empty_table ();

    assert_true (s_closed_by_peer (client));
    /* With room, accept4 is libc's. */
    int again = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal (connect (again, (struct sockaddr *) &addr, sizeof addr), 0);
    int got = accept4 (listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true (got >= 0);
    close (got);
    close (again);
    close (client);
    close (listener);
}

/* In a child, where the hard limit can be lowered, in a process that has
   no spare yet: a full table answers EAGAIN (after a pause) and the
   connection waits, not refused; the next accept with room takes it and
   the spare too, and a full table refuses again. Returns the step that
   went wrong, 0 if none. */
static int
s_missing_spare_steps (void)
{
    struct sockaddr_un addr;
    int listener = s_listen ("missing.sock", &addr);
    int first = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int second = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect (first, (struct sockaddr *) &addr, sizeof addr) != 0
        || connect (second, (struct sockaddr *) &addr, sizeof addr) != 0)
        return 1;
    struct rlimit tight = {256, 256};
    if (setrlimit (RLIMIT_NOFILE, &tight) != 0)
        return 2;
    int fd;
    while ((fd = dup (0)) >= 0)
        s_fill[s_filled++] = fd;
    errno = 0;
    if (accept4 (listener, NULL, NULL, SOCK_CLOEXEC) != -1 || errno != EAGAIN)
        return 4;
    /* Another failure keeps its errno, spare or not. */
    if (accept4 (-1, NULL, NULL, SOCK_CLOEXEC) != -1 || errno != EBADF)
        return 10;
    close (s_fill[--s_filled]);
    close (s_fill[--s_filled]);
    int got = accept4 (listener, NULL, NULL, SOCK_CLOEXEC); /* first, and the spare */
    if (got < 0 || write (first, "x", 1) != 1)
        return 5;
    char byte;
    if (read (got, &byte, 1) != 1 || byte != 'x')
        return 6;
    close (got);
    if ((s_fill[s_filled++] = dup (0)) < 0 || dup (0) != -1)
        return 7;
    errno = 0;
    if (accept4 (listener, NULL, NULL, SOCK_CLOEXEC) != -1 || errno != ECONNABORTED)
        return 8;
    return s_closed_by_peer (second) ? 0 : 9;
}

static void
test_missing_spare_waits_then_is_taken (void **state)
{
    (void) state;
    pid_t child = fork ();
    assert_true (child >= 0);
    if (child == 0)
        _exit (s_missing_spare_steps ());
    int status;
    assert_int_equal (waitpid (child, &status, 0), child);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
}

/* libzmq's ipc listener accepts a client while no descriptor is free:
   it reports ACCEPT_FAILED (ECONNABORTED) and goes on, where libzmq 4.3.4
   alone aborts (ipc_listener.cpp:325). */
static void
test_zmq_ipc_listener_lives_through_a_full_table (void **state)
{
    (void) state;
    char endpoint[160];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/zmq.sock", s_dir);
    void *context = zmq_ctx_new ();
    void *router = zmq_socket (context, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt (router, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal (zmq_bind (router, endpoint), 0);
    assert_int_equal (zmq_socket_monitor (router, "inproc://fdlimit-monitor",
                                          ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_ACCEPT_FAILED),
                      0);
    void *monitor = zmq_socket (context, ZMQ_PAIR);
    int hang_ms = 30000; /* a missing event fails the test instead of hanging it */
    zmq_setsockopt (monitor, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt (monitor, ZMQ_RCVTIMEO, &hang_ms, sizeof hang_ms);
    assert_int_equal (zmq_connect (monitor, "inproc://fdlimit-monitor"), 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int n = snprintf (addr.sun_path, sizeof addr.sun_path, "%s/zmq.sock", s_dir);
    assert_true (n > 0 && (size_t) n < sizeof addr.sun_path);
    int client = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true (client >= 0);

    s_fill_table ();
    assert_int_equal (connect (client, (struct sockaddr *) &addr, sizeof addr), 0);
    /* The event's first frame: 16-bit event, 32-bit value; then the address. */
    uint8_t event[6];
    assert_int_equal (zmq_recv (monitor, event, sizeof event, 0), (int) sizeof event);
    uint16_t number;
    uint32_t value;
    memcpy (&number, event, 2);
    memcpy (&value, event + 2, 4);
    char address[256];
    assert_true (zmq_recv (monitor, address, sizeof address, 0) >= 0);
    s_empty_table ();

    assert_int_equal (number, ZMQ_EVENT_ACCEPT_FAILED);
    assert_int_equal (value, ECONNABORTED);
    assert_true (s_closed_by_peer (client));
    close (client);
    /* The listener still serves. */
    void *dealer = zmq_socket (context, ZMQ_DEALER);
    zmq_setsockopt (dealer, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal (zmq_connect (dealer, endpoint), 0);
    assert_int_equal (zmq_send (dealer, "ping", 4, 0), 4);
    char identity[256], body[8];
    assert_true (zmq_recv (router, identity, sizeof identity, 0) > 0);
    assert_int_equal (zmq_recv (router, body, sizeof body, 0), 4);
    assert_memory_equal (body, "ping", 4);

    zmq_close (dealer);
    zmq_socket_monitor (router, NULL, 0);
    zmq_close (monitor);
    zmq_close (router);
    zmq_ctx_term (context);
}

int
main (void)
{
    /* First, while the process has no spare (nothing has called
       fh_fdlimit_raise yet). */
    const struct CMUnitTest before_the_spare[] = {
        cmocka_unit_test_setup_teardown (test_missing_spare_waits_then_is_taken, s_setup_dir,
                                         s_teardown),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_full_table_refuses_the_waiting_connection, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_zmq_ipc_listener_lives_through_a_full_table, s_setup,
                                         s_teardown),
    };
    int failed = cmocka_run_group_tests (before_the_spare, NULL, NULL);
    return failed + cmocka_run_group_tests (tests, NULL, NULL);
}
