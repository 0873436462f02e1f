/*  test_exec_plugin_child - what the shipped exec consumer gives the
    command it runs: the body on stdin (and a command that never reads
    it), the environment, no descriptor of the hub, signals reset, and
    stdout where the options say.

    The commands are small /bin/sh scripts that write what they saw
    (stdin, environment, open descriptors) into files of a temp directory,
    which the test then compares byte for byte. This process does not
    ignore SIGPIPE (the hub does), so a command that never reads its stdin
    also checks that the plugin takes back the SIGPIPE its write raised.
    After every test no child of this process may be left, zombie or not.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_dir.h"

#include <fanhub/consumer.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fanhub/testing.h>

#include "exec_kit.h"

static void
s_check_stdin (size_t size, unsigned seed)
{
    uint8_t *body = malloc (size ? size : 1);
    assert_non_null (body);
    uint32_t x = seed;
    for (size_t i = 0; i < size; i++) {
        x = x * 1103515245u + 12345u;
        body[i] = (uint8_t) (x >> 16);
    }
    if (size >= 256)
        for (size_t i = 0; i < 256; i++)
            body[i] = (uint8_t) i; /* every byte value, NUL included */
    char out[512], script[4096];
    snprintf (out, sizeof out, "%s/stdin-%zu", s_plugin.dir, size);
    snprintf (script, sizeof script, "cat > '%s'", out);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx, script, "60000", NULL);
    fanhub_msg_t msg = s_msg (BYTES ("t"), body, size, 1);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    size_t got_size;
    char *got = s_slurp (out, &got_size);
    assert_int_equal (got_size, size);
    if (size)
        assert_memory_equal (got, body, size);
    free (got);
    free (body);
}

static void
test_body_on_stdin (void **state)
{
    (void) state;
    s_check_stdin (0, 1);
    s_check_stdin (1, 2);
    s_check_stdin (256, 3);
    s_check_stdin (65536, 4);       /* a pipe buffer exactly */
    s_check_stdin (1 << 20, 5);     /* 1 MiB */
    s_check_stdin (3 * 1000003, 6); /* odd size, several MiB */
}

/* Commands that do not read their stdin, or stop part way: no deadlock,
   no SIGPIPE death of this (non-ignoring) process, the mask restored. */
static void
test_unread_stdin (void **state)
{
    (void) state;
    size_t size = 4 << 20;
    char *body = calloc (1, size);
    assert_non_null (body);
    fanhub_msg_t msg = s_msg (BYTES ("t"), body, size, 1);

    static const char *const argv_true[] = {"/bin/true"};
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_argv (&ctx, argv_true, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);

    s_ctx_init (&ctx);
    plugin = s_start_shell (&ctx, "head -c 100000 > /dev/null; exit 0", NULL, NULL);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);

    s_ctx_init (&ctx);
    plugin = s_start_shell (&ctx, "exec 0<&-; echo closed >&2; exit 4", NULL, NULL);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_string_equal (ctx.last, "message 1 (t): exit status 4: closed");
    s_plugin.desc->fini (plugin);

    /* Never reads and never ends: the timeout, not a deadlock. */
    s_ctx_init (&ctx);
    plugin = s_start_shell (&ctx, "sleep 300", "200", NULL);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_non_null (strstr (ctx.last, "timed out after 200 ms"));
    s_plugin.desc->fini (plugin);
    free (body);

    sigset_t mask;
    pthread_sigmask (SIG_BLOCK, NULL, &mask);
    assert_false (sigismember (&mask, SIGPIPE));
}

/* A SIGPIPE that was pending before consume stays pending: the plugin
   takes back only its own. */
static void
test_foreign_sigpipe_kept (void **state)
{
    (void) state;
    sigset_t pipe_set, saved;
    sigemptyset (&pipe_set);
    sigaddset (&pipe_set, SIGPIPE);
    pthread_sigmask (SIG_BLOCK, &pipe_set, &saved);
    pthread_kill (pthread_self (), SIGPIPE);

    size_t size = 1 << 20;
    char *body = calloc (1, size);
    assert_non_null (body);
    fanhub_msg_t msg = s_msg (BYTES ("t"), body, size, 1);
    static const char *const argv_true[] = {"/bin/true"};
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_argv (&ctx, argv_true, 1);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    s_plugin.desc->fini (plugin);
    free (body);

    sigset_t pending;
    sigpending (&pending);
    assert_true (sigismember (&pending, SIGPIPE));
    struct timespec zero = {0, 0};
    assert_int_equal (sigtimedwait (&pipe_set, NULL, &zero), SIGPIPE);
    pthread_sigmask (SIG_SETMASK, &saved, NULL);
}

static void
test_environment (void **state)
{
    (void) state;
    /* Stale values in the hub's environment are replaced, not doubled. */
    setenv ("FANHUB_SEQ", "stale", 1);
    setenv ("FANHUB_TOPIC", "stale", 1);
    setenv ("EXEC_TEST_VAR", "inherited", 1);
    char out[512], script[4096];
    s_path (out, sizeof out, "env");
    snprintf (script, sizeof script,
              "printf '%%s|%%s|%%s|%%s\\n' \"$FANHUB_TOPIC\" \"$FANHUB_SEQ\" "
              "\"$FANHUB_CONSUMER\" \"$EXEC_TEST_VAR\" > '%s'; "
              "env | grep -c '^FANHUB_SEQ=' >> '%s'",
              out, out);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx, script, NULL, NULL);
    unsetenv ("FANHUB_SEQ");
    unsetenv ("FANHUB_TOPIC");
    fanhub_msg_t msg = s_msg (BYTES ("org.fedoraproject.prod.é ✓"), BYTES ("{}"),
                              UINT64_C (18446744073709551615));
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    char *got = s_slurp (out, NULL);
    assert_string_equal (got, "org.fedoraproject.prod.é ✓|"
                              "18446744073709551615|runner|inherited\n1\n");
    free (got);

    /* A topic with a NUL byte is cut there. */
    msg = s_msg ("a.b\0c", 5, BYTES ("{}"), 3);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    got = s_slurp (out, NULL);
    assert_string_equal (got, "a.b|3|runner|inherited\n1\n");
    free (got);
    s_plugin.desc->fini (plugin);
    unsetenv ("EXEC_TEST_VAR");
}

/* The child sees 0, 1 and 2 only, although this process holds descriptors
   without close-on-exec, as the hub does. */
static void
test_no_fd_leaks (void **state)
{
    (void) state;
    int leak = open ("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */
    int pipe_fds[2];
    assert_true (leak >= 0);
    assert_int_equal (pipe (pipe_fds), 0);
    int high = dup2 (leak, 200);
    assert_int_equal (high, 200);

    for (int mode = 0; mode < 3; mode++) {
        static const char *const modes[] = {"null", "stderr", "inherit"};
        char out[512], script[4096];
        snprintf (out, sizeof out, "%s/fds-%s", s_plugin.dir, modes[mode]);
        /* ls opens the directory it lists: that is the one extra, 3. */
        snprintf (script, sizeof script, "exec ls /proc/self/fd > '%s'", out);
        fanhub_option_t items[] = {
            SCALAR ("command", script, "t.yaml:5:14"),
            SCALAR ("shell", "true", "t.yaml:6:12"),
            SCALAR ("stdout", modes[mode], "t.yaml:7:12"),
        };
        fanhub_ctx_t ctx;
        s_ctx_init (&ctx);
        void *plugin = s_start_map (&ctx, items, 3);
        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1);
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
        s_plugin.desc->fini (plugin);
        char *got = s_slurp (out, NULL);
        assert_string_equal (got, "0\n1\n2\n3\n");
        free (got);
    }
    close (leak);
    close (high);
    close (pipe_fds[0]);
    close (pipe_fds[1]);
}

/* The hub ignores SIGPIPE and blocks SIGTERM, SIGINT and SIGHUP in every
   thread; the command must start with neither. */
static void
test_signals_reset (void **state)
{
    (void) state;
    void (*old) (int) = signal (SIGPIPE, SIG_IGN);
    sigset_t hub_mask, saved;
    sigemptyset (&hub_mask);
    sigaddset (&hub_mask, SIGTERM);
    sigaddset (&hub_mask, SIGINT);
    sigaddset (&hub_mask, SIGHUP);
    pthread_sigmask (SIG_BLOCK, &hub_mask, &saved);

    char out[512], script[4096];
    s_path (out, sizeof out, "signals");
    snprintf (script, sizeof script, "exec grep -E '^Sig(Blk|Ign)' /proc/self/status > '%s'", out);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx, script, NULL, NULL);
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1);
    fanhub_result_t rc = s_plugin.desc->consume (plugin, &msg);
    s_plugin.desc->fini (plugin);
    pthread_sigmask (SIG_SETMASK, &saved, NULL);
    signal (SIGPIPE, old);

    assert_int_equal (rc, FANHUB_OK);
    char *got = s_slurp (out, NULL);
    unsigned long long blocked = 1, ignored = 1;
    int n = sscanf (got, "SigBlk: %llx SigIgn: %llx", &blocked, &ignored);
    free (got);
    assert_int_equal (n, 2);
    assert_int_equal (blocked, 0);
    /* glibc's posix_spawn leaves its two internal signals (32 and 33, below
       SIGRTMIN, which no glibc program can use) ignored: it cannot reset
       what its sigfillset leaves out. Every other signal is at default. */
    assert_int_equal (ignored & ~0x180000000ULL, 0);
}

/* stdout: where the command's stdout goes, seen from inside. */
static void
test_stdout_modes (void **state)
{
    (void) state;
    for (int mode = 0; mode < 3; mode++) {
        static const char *const modes[] = {"null", "stderr", "inherit"};
        static const char *const want[] = {"/dev/null", "same as 2", "same as 1"};
        char out[512], script[4096];
        snprintf (out, sizeof out, "%s/stdout-%s", s_plugin.dir, modes[mode]);
        snprintf (script, sizeof script,
                  "o=$(readlink /proc/$$/fd/1); "
                  "if [ \"$o\" = /dev/null ]; then echo /dev/null; "
                  "elif [ \"$o\" = \"$(readlink /proc/$PPID/fd/2)\" ]; "
                  "then echo 'same as 2'; "
                  "elif [ \"$o\" = \"$(readlink /proc/$PPID/fd/1)\" ]; "
                  "then echo 'same as 1'; else echo \"$o\"; fi > '%s'",
                  out);
        fanhub_option_t items[] = {
            SCALAR ("command", script, "t.yaml:5:14"),
            SCALAR ("shell", "true", "t.yaml:6:12"),
            SCALAR ("stdout", modes[mode], "t.yaml:7:12"),
        };
        /* This process's 1 and 2 must differ for the test to tell. */
        char one[256] = "", two[256] = "";
        ssize_t n1 = readlink ("/proc/self/fd/1", one, sizeof one - 1);
        ssize_t n2 = readlink ("/proc/self/fd/2", two, sizeof two - 1);
        if (n1 > 0 && n2 > 0 && strcmp (one, two) == 0 && mode > 0)
            continue;
        fanhub_ctx_t ctx;
        s_ctx_init (&ctx);
        void *plugin = s_start_map (&ctx, items, 3);
        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1);
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
        s_plugin.desc->fini (plugin);
        char *got = s_slurp (out, NULL);
        char expect[64];
        snprintf (expect, sizeof expect, "%s\n", want[mode]);
        assert_string_equal (got, expect);
        free (got);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_body_on_stdin, s_no_children),
        cmocka_unit_test_teardown (test_unread_stdin, s_no_children),
        cmocka_unit_test_teardown (test_foreign_sigpipe_kept, s_no_children),
        cmocka_unit_test_teardown (test_environment, s_no_children),
        cmocka_unit_test_teardown (test_no_fd_leaks, s_no_children),
        cmocka_unit_test_teardown (test_signals_reset, s_no_children),
        cmocka_unit_test_teardown (test_stdout_modes, s_no_children),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
