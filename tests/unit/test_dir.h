/*  test_dir - temporary files and directories for the unit tests.

    Everything goes under $TMPDIR (else /tmp), so that a run can be kept
    off a small or shared /tmp, and two runs never meet. The fixture is a
    cmocka setup/teardown pair: a fresh directory per test (root), with a
    path below it (dir) that the code under test creates, all removed
    after the test. Include it once, in the test's .c file, after
    <cmocka.h>.
*/
#ifndef TEST_DIR_H_INCLUDED
#define TEST_DIR_H_INCLUDED

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "$TMPDIR/NAME-XXXXXX" (else under /tmp) into out: a template for
   mkstemp or mkdtemp. Fails the test when it does not fit. */
static inline char *
test_tmp_template (char *out, size_t size, const char *name)
{
    const char *tmp = getenv ("TMPDIR");
    int n = snprintf (out, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (n < 0 || (size_t) n >= size)
        fail_msg ("temporary path too long for %s", name);
    return out;
}

/* rm -r path (what the test made: errors are not the test's subject). */
static inline void
test_remove_tree (const char *path)
{
    DIR *dir = opendir (path);
    if (!dir) {
        unlink (path);
        return;
    }
    struct dirent *entry;
    while ((entry = readdir (dir))) {
        if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0)
            continue;
        char child[1024];
        int n = snprintf (child, sizeof child, "%s/%s", path, entry->d_name);
        if (n > 0 && (size_t) n < sizeof child)
            test_remove_tree (child);
    }
    closedir (dir);
    rmdir (path);
}

typedef struct {
    char root[96]; /* made by the setup, removed with all below it */
    char dir[160]; /* root/SUB: not made */
} test_dir_fixture_t;

/* The setup's body: *state gets a test_dir_fixture_t whose root is a new
   directory named after name, and dir is root/sub. */
static inline int
test_dir_setup (void **state, const char *name, const char *sub)
{
    test_dir_fixture_t *f = calloc (1, sizeof *f);
    if (!f || !mkdtemp (test_tmp_template (f->root, sizeof f->root, name))) {
        free (f);
        return -1;
    }
    snprintf (f->dir, sizeof f->dir, "%s/%s", f->root, sub);
    *state = f;
    return 0;
}

static inline int
test_dir_teardown (void **state)
{
    test_dir_fixture_t *f = *state;
    test_remove_tree (f->root);
    free (f);
    return 0;
}

#endif
