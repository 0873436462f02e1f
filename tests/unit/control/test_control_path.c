/*  Tests of control_path: what the hub refuses before binding its control
    socket, and what a client refuses before sending to one. */
#include "control_path.h"

#include <czmq.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_dir.h"

static char s_dir[128];

static int
s_setup (void **state)
{
    (void) state;
    return mkdtemp (test_tmp_template (s_dir, sizeof s_dir, "fanhub-control-path")) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    (void) state;
    test_remove_tree (s_dir);
    return 0;
}

/* A Unix socket file at path, as a stale hub would leave. */
static void
s_make_socket (const char *path)
{
    int fd = socket (AF_UNIX, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    assert_true (strlen (path) < sizeof addr.sun_path);
    memcpy (addr.sun_path, path, strlen (path) + 1);
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    close (fd);
}

static void
test_missing_directory_is_made_private (void **state)
{
    (void) state;
    char path[256], err[512];
    snprintf (path, sizeof path, "%s/run/c.sock", s_dir);
    bool stale = true;
    assert_int_equal (fh_control_path_prepare (path, &stale, err, sizeof err), 0);
    assert_false (stale);
    char dir[256];
    snprintf (dir, sizeof dir, "%s/run", s_dir);
    struct stat st;
    assert_int_equal (stat (dir, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0700);
}

static void
test_regular_file_is_refused (void **state)
{
    (void) state;
    char path[256], err[512];
    snprintf (path, sizeof path, "%s/file.sock", s_dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs ("precious", file);
    fclose (file);
    bool stale;
    assert_int_equal (fh_control_path_prepare (path, &stale, err, sizeof err), -1);
    assert_non_null (strstr (err, "exists and is not a socket; refusing to replace it"));
    struct stat st;
    assert_int_equal (stat (path, &st), 0); /* still there */
    assert_int_equal (st.st_size, 8);
    /* A client refuses it too. */
    assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), -1);
    assert_non_null (strstr (err, "is not a socket"));
}

static void
test_open_directory_is_refused (void **state)
{
    (void) state;
    char dir[256], path[300], err[512];
    snprintf (dir, sizeof dir, "%s/open", s_dir);
    assert_int_equal (mkdir (dir, 0700), 0);
    assert_int_equal (chmod (dir, 0777), 0);
    snprintf (path, sizeof path, "%s/c.sock", dir);
    bool stale;
    assert_int_equal (fh_control_path_prepare (path, &stale, err, sizeof err), -1);
    assert_non_null (strstr (err, "is writable by other users and not sticky"));
    /* Sticky, as /tmp is: others cannot remove or replace our file. */
    assert_int_equal (chmod (dir, 01777), 0);
    assert_int_equal (fh_control_path_prepare (path, &stale, err, sizeof err), 0);
}

static void
test_stale_socket_and_owner (void **state)
{
    (void) state;
    char path[256], err[512];
    snprintf (path, sizeof path, "%s/stale.sock", s_dir);
    s_make_socket (path);
    bool stale = false;
    assert_int_equal (fh_control_path_prepare (path, &stale, err, sizeof err), 0);
    assert_true (stale);
    assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), 0);
    if (geteuid () == 0) {
        /* Root can play the other user: a socket of uid 65534 is refused
           by both sides. (As another user, the integration tests with
           runuser cover it.) */
        assert_int_equal (chown (path, 65534, 65534), 0);
        assert_int_equal (fh_control_path_prepare (path, &stale, err, sizeof err), -1);
        assert_non_null (strstr (err, "is a socket of uid 65534"));
        assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), -1);
        assert_non_null (strstr (err, "belongs to uid 65534"));
        assert_non_null (strstr (err, "refusing to talk to it"));
        /* Unless the client says that is the hub's user. */
        setenv ("FANHUB_CONTROL_USER", "65534", 1);
        assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), 0);
        setenv ("FANHUB_CONTROL_USER", "root", 1);
        assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), -1);
        unsetenv ("FANHUB_CONTROL_USER");
    }
}

static void
test_bind_mode_is_0660_under_any_umask (void **state)
{
    (void) state;
    char endpoint[300], err[512];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/bound.sock", s_dir);
    mode_t old = umask (0);
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    assert_non_null (router);
    assert_int_equal (fh_control_path_bind (zsock_resolve (router), endpoint), 0);
    assert_int_equal (umask (old), 0); /* restored */
    struct stat st;
    assert_int_equal (stat (endpoint + 6, &st), 0);
    assert_int_equal (st.st_mode & 0777, 0660);
    assert_int_equal (fh_control_path_check_owner (endpoint + 6, err, sizeof err), 0);
    zsock_destroy (&router);
}

static void
test_missing_socket_for_client (void **state)
{
    (void) state;
    char path[256], err[512];
    snprintf (path, sizeof path, "%s/none.sock", s_dir);
    assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), -1);
    assert_non_null (strstr (err, "No such file or directory: is the hub running"));
}

/* A hub full of clients hides its socket as PATH.busy: a client waits
   for the name as long as it is told to, and is told why. */
static void
test_hidden_socket_for_client (void **state)
{
    (void) state;
    char path[256], busy[300], err[512];
    snprintf (path, sizeof path, "%s/hub.sock", s_dir);
    snprintf (busy, sizeof busy, "%s.busy", path);
    s_make_socket (busy);
    assert_true (fh_control_path_wait_shown (path, 100) >= 100);
    assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), -1);
    assert_non_null (strstr (err, "hub.sock.busy for now: the hub has as many control clients"));
    /* The name back: no wait. */
    assert_int_equal (rename (busy, path), 0);
    assert_int_equal (fh_control_path_wait_shown (path, 100), 0);
    assert_int_equal (fh_control_path_check_owner (path, err, sizeof err), 0);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_missing_directory_is_made_private, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_regular_file_is_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_open_directory_is_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_stale_socket_and_owner, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_bind_mode_is_0660_under_any_umask, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_missing_socket_for_client, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_hidden_socket_for_client, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
