/*  test_fs - hub/util/fs.c: mkdir -p, the directory of a file, directory
    fsync and whole-file reads, with every failure naming the path. */
#include "fs.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_dir.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_dir[256];

static int
s_setup (void **state)
{
    (void) state;
    return mkdtemp (test_tmp_template (s_dir, sizeof s_dir, "fanhub-test-fs")) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    (void) state;
    char command[512];
    snprintf (command, sizeof command, "rm -rf '%s'", s_dir);
    return system (command) == 0 ? 0 : -1;
}

static bool
s_is_dir (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 && S_ISDIR (st.st_mode);
}

static void
s_write (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    assert_int_equal (fputs (text, file) >= 0, 1);
    assert_int_equal (fclose (file), 0);
}

static void
test_mkdir_p (void **state)
{
    (void) state;
    char path[512], err[512] = "";
    snprintf (path, sizeof path, "%s/a/b/c", s_dir);
    assert_int_equal (fh_fs_mkdir_p (path, err, sizeof err), 0);
    assert_true (s_is_dir (path));
    /* Again: what exists is fine. */
    assert_int_equal (fh_fs_mkdir_p (path, err, sizeof err), 0);
    /* A trailing slash. */
    snprintf (path, sizeof path, "%s/d/", s_dir);
    assert_int_equal (fh_fs_mkdir_p (path, err, sizeof err), 0);
    snprintf (path, sizeof path, "%s/d", s_dir);
    assert_true (s_is_dir (path));
}

static void
test_mkdir_p_fails_on_a_file (void **state)
{
    (void) state;
    char file[300], path[512], err[1024] = "", want[1200];
    snprintf (file, sizeof file, "%s/plain", s_dir);
    s_write (file, "x");
    snprintf (path, sizeof path, "%s/below", file);
    assert_int_equal (fh_fs_mkdir_p (path, err, sizeof err), -1);
    assert_int_equal (errno, ENOTDIR);
    snprintf (want, sizeof want, "%s: cannot create directory: %s", path, strerror (ENOTDIR));
    assert_string_equal (err, want);
}

static void
test_mkdir_parent (void **state)
{
    (void) state;
    char path[512], dir[512], err[512] = "";
    snprintf (path, sizeof path, "%s/run/fanhub/control.sock", s_dir);
    assert_int_equal (fh_fs_mkdir_parent (path, err, sizeof err), 0);
    snprintf (dir, sizeof dir, "%s/run/fanhub", s_dir);
    assert_true (s_is_dir (dir));
    assert_false (s_is_dir (path));
    /* Nothing to make for a bare name or a file right under '/'. */
    assert_int_equal (fh_fs_mkdir_parent ("control.sock", err, sizeof err), 0);
    assert_int_equal (fh_fs_mkdir_parent ("/control.sock", err, sizeof err), 0);
    /* A parent below a file. */
    char file[300];
    snprintf (file, sizeof file, "%s/plain2", s_dir);
    s_write (file, "x");
    snprintf (path, sizeof path, "%s/x/control.sock", file);
    assert_int_equal (fh_fs_mkdir_parent (path, err, sizeof err), -1);
    assert_non_null (strstr (err, ": cannot create directory: "));
}

static void
test_sync_dir (void **state)
{
    (void) state;
    char err[512] = "", path[512], want[600];
    assert_int_equal (fh_fs_sync_dir (s_dir, -1, err, sizeof err), 0);
    int fd = open (s_dir, O_RDONLY | O_DIRECTORY);
    assert_true (fd >= 0);
    assert_int_equal (fh_fs_sync_dir (s_dir, fd, err, sizeof err), 0);
    close (fd);
    snprintf (path, sizeof path, "%s/missing", s_dir);
    assert_int_equal (fh_fs_sync_dir (path, -1, err, sizeof err), -1);
    assert_int_equal (errno, ENOENT);
    snprintf (want, sizeof want, "%s: fsync of the directory: %s", path, strerror (ENOENT));
    assert_string_equal (err, want);
    /* A descriptor that is not open. */
    assert_int_equal (fh_fs_sync_dir (s_dir, 1000000, err, sizeof err), -1);
    assert_int_equal (errno, EBADF);
}

static void
test_read_file (void **state)
{
    (void) state;
    char path[512], err[512] = "", want[600];
    size_t size = 0;
    snprintf (path, sizeof path, "%s/text", s_dir);
    /* Larger than the first buffer, so that it grows. */
    char *big = malloc (10001);
    assert_non_null (big);
    memset (big, 'y', 10000);
    big[10000] = '\0';
    s_write (path, big);
    char *text = fh_fs_read_file (path, 10000, &size, err, sizeof err);
    assert_non_null (text);
    assert_int_equal (size, 10000);
    assert_string_equal (text, big);
    free (text);
    /* One byte over the limit. */
    assert_null (fh_fs_read_file (path, 9999, &size, err, sizeof err));
    assert_int_equal (errno, EFBIG);
    snprintf (want, sizeof want, "%s: longer than 9999 bytes", path);
    assert_string_equal (err, want);
    free (big);
    /* Empty. */
    s_write (path, "");
    text = fh_fs_read_file (path, 10, &size, err, sizeof err);
    assert_non_null (text);
    assert_int_equal (size, 0);
    assert_string_equal (text, "");
    free (text);
    /* /proc says 0 bytes and has more. */
    text = fh_fs_read_file ("/proc/self/stat", 65536, NULL, err, sizeof err);
    assert_non_null (text);
    assert_non_null (strchr (text, ')'));
    free (text);
    /* Missing, and a directory. */
    snprintf (path, sizeof path, "%s/missing", s_dir);
    assert_null (fh_fs_read_file (path, 10, NULL, err, sizeof err));
    assert_int_equal (errno, ENOENT);
    snprintf (want, sizeof want, "%s: cannot open: %s", path, strerror (ENOENT));
    assert_string_equal (err, want);
    assert_null (fh_fs_read_file (s_dir, 10, NULL, err, sizeof err));
    assert_non_null (strstr (err, s_dir));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_mkdir_p),      cmocka_unit_test (test_mkdir_p_fails_on_a_file),
        cmocka_unit_test (test_mkdir_parent), cmocka_unit_test (test_sync_dir),
        cmocka_unit_test (test_read_file),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
