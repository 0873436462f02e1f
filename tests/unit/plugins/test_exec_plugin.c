/*  test_exec_plugin - the shipped exec consumer, driven through a fake host:
    its options, exit codes, timeouts (the command and its group killed),
    a program that cannot be started, the rate of its failure lines,
    threads. What a command is given (stdin, environment, descriptors,
    signals, stdout) is test_exec_plugin_child.c.

    exec.so is loaded with dlopen as the hub loads it and handed a host
    table of this file: options and messages are plain structs. The
    commands are /bin/true, /bin/false and small /bin/sh scripts. After
    every test no child of this process may be left, zombie or not.
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
test_descriptor (void **state)
{
    (void) state;
    s_assert_descriptor ("exec");
}

static const fanhub_option_t s_argv_true[] = {
    SCALAR (NULL, "/bin/true", "t.yaml:5:15"),
};
static const fanhub_option_t s_argv_path[] = {
    SCALAR (NULL, "true", "t.yaml:5:15"),
    SCALAR (NULL, "", "t.yaml:5:21"),
};
static const fanhub_option_t s_argv_missing[] = {
    SCALAR (NULL, "no-such-program-fanhub", "t.yaml:5:15"),
};
static const fanhub_option_t s_argv_nofile[] = {
    SCALAR (NULL, "/nonexistent/prog", "t.yaml:5:15"),
};
static const fanhub_option_t s_argv_dir[] = {
    SCALAR (NULL, "/tmp", "t.yaml:5:15"),
};
static const fanhub_option_t s_argv_empty0[] = {
    SCALAR (NULL, "", "t.yaml:5:15"),
};
static const fanhub_option_t s_submap[] = {
    SCALAR ("x", "1", "t.yaml:6:7"),
};
static const fanhub_option_t s_argv_nested[] = {
    SCALAR (NULL, "/bin/true", "t.yaml:5:15"),
    {FANHUB_OPTION_MAP, NULL, NULL, "t.yaml:5:26", s_submap, 1},
};

#define CMD_TRUE LISTOF ("command", s_argv_true, 1, "t.yaml:5:14")
#define MS_ERR(key, lo, hi, got, where)                                                            \
    "options." key ": expected a duration such as 250ms, 2s or 1m from " lo " to " hi              \
    " ms, got " got " (" where ")"

static const option_case_t s_option_cases[] = {
    {"argv", {CMD_TRUE}, 1, NULL},
    {"argv found in PATH, empty argument",
     {LISTOF ("command", s_argv_path, 2, "t.yaml:5:14")},
     1,
     NULL},
    {"shell string",
     {SCALAR ("command", "exit 0", "t.yaml:5:14"), SCALAR ("shell", "true", "t.yaml:6:12")},
     2,
     NULL},
    {"shell given first",
     {SCALAR ("shell", "true", "t.yaml:5:12"), SCALAR ("command", "exit 0", "t.yaml:6:14")},
     2,
     NULL},
    {"every option",
     {CMD_TRUE, SCALAR ("timeout_ms", "1", "t.yaml:6:3"),
      SCALAR ("kill_grace_ms", "0", "t.yaml:7:3")},
     3,
     NULL},
    {"stdout values",
     {CMD_TRUE, SCALAR ("stdout", "inherit", "t.yaml:6:3"),
      SCALAR ("shell", "false", "t.yaml:7:3")},
     3,
     NULL},
    {"no options",
     {{0}},
     0,
     "options.command: missing: the command to run, as a list "
     "[PROGRAM, ARG...] (t.yaml:4:3)"},
    {"unknown key",
     {CMD_TRUE, SCALAR ("timeout", "5", "t.yaml:6:3")},
     2,
     "options.timeout: unknown option; exec takes command, shell, "
     "timeout_ms, kill_grace_ms and stdout (t.yaml:6:3)"},
    {"string without shell",
     {SCALAR ("command", "ls -l", "t.yaml:5:14")},
     1,
     "options.command: expected a list [PROGRAM, ARG...], got a string; to "
     "run it with /bin/sh -c, set shell: true (t.yaml:5:14)"},
    {"list with shell",
     {CMD_TRUE, SCALAR ("shell", "true", "t.yaml:6:12")},
     2,
     "options.command: with shell: true, expected one string for /bin/sh "
     "-c, got a list (t.yaml:5:14)"},
    {"empty shell string",
     {SCALAR ("command", "", "t.yaml:5:14"), SCALAR ("shell", "true", "t.yaml:6:12")},
     2,
     "options.command: must not be empty (t.yaml:5:14)"},
    {"empty list",
     {LISTOF ("command", s_argv_true, 0, "t.yaml:5:14")},
     1,
     "options.command: expected at least one string, got an empty list "
     "(t.yaml:5:14)"},
    {"map",
     {{FANHUB_OPTION_MAP, "command", NULL, "t.yaml:5:3", s_submap, 1}},
     1,
     "options.command: expected a string or a list of strings, got a map "
     "(t.yaml:5:3)"},
    {"nested item",
     {LISTOF ("command", s_argv_nested, 2, "t.yaml:5:14")},
     1,
     "options.command[1]: expected a string, got a map (t.yaml:5:26)"},
    {"empty program",
     {LISTOF ("command", s_argv_empty0, 1, "t.yaml:5:14")},
     1,
     "options.command[0]: the program must not be empty (t.yaml:5:15)"},
    {"not in PATH",
     {LISTOF ("command", s_argv_missing, 1, "t.yaml:5:14")},
     1,
     "options.command[0]: no-such-program-fanhub: not found in PATH "
     "(t.yaml:5:15)"},
    {"no such file",
     {LISTOF ("command", s_argv_nofile, 1, "t.yaml:5:14")},
     1,
     "options.command[0]: /nonexistent/prog: cannot run: No such file or "
     "directory (t.yaml:5:15)"},
    {"a directory",
     {LISTOF ("command", s_argv_dir, 1, "t.yaml:5:14")},
     1,
     "options.command[0]: /tmp: cannot run: Permission denied "
     "(t.yaml:5:15)"},
    {"shell yes",
     {CMD_TRUE, SCALAR ("shell", "yes", "t.yaml:6:12")},
     2,
     "options.shell: expected true or false, got \"yes\" (t.yaml:6:12)"},
    {"timeout 0",
     {CMD_TRUE, SCALAR ("timeout_ms", "0", "t.yaml:6:3")},
     2,
     MS_ERR ("timeout_ms", "1", "86400000", "\"0\"", "t.yaml:6:3")},
    {"timeout too big",
     {CMD_TRUE, SCALAR ("timeout_ms", "86400001", "t.yaml:6:3")},
     2,
     MS_ERR ("timeout_ms", "1", "86400000", "\"86400001\"", "t.yaml:6:3")},
    {"timeout far too big",
     {CMD_TRUE, SCALAR ("timeout_ms", "99999999999999999999", "t.yaml:6:3")},
     2,
     MS_ERR ("timeout_ms", "1", "86400000", "\"99999999999999999999\"", "t.yaml:6:3")},
    {"timeout with a unit", {CMD_TRUE, SCALAR ("timeout_ms", "10s", "t.yaml:6:3")}, 2, NULL},
    {"timeout word",
     {CMD_TRUE, SCALAR ("timeout_ms", "soon", "t.yaml:6:3")},
     2,
     MS_ERR ("timeout_ms", "1", "86400000", "\"soon\"", "t.yaml:6:3")},
    {"timeout in days, too big",
     {CMD_TRUE, SCALAR ("timeout_ms", "25h", "t.yaml:6:3")},
     2,
     MS_ERR ("timeout_ms", "1", "86400000", "\"25h\"", "t.yaml:6:3")},
    {"grace negative",
     {CMD_TRUE, SCALAR ("kill_grace_ms", "-1", "t.yaml:6:3")},
     2,
     MS_ERR ("kill_grace_ms", "0", "3600000", "\"-1\"", "t.yaml:6:3")},
    {"grace list",
     {CMD_TRUE, LISTOF ("kill_grace_ms", s_argv_true, 1, "t.yaml:6:3")},
     2,
     MS_ERR ("kill_grace_ms", "0", "3600000", "a list", "t.yaml:6:3")},
    {"stdout bad",
     {CMD_TRUE, SCALAR ("stdout", "file", "t.yaml:6:3")},
     2,
     "options.stdout: expected null, stderr or inherit, got \"file\" "
     "(t.yaml:6:3)"},
};

static void
test_options_table (void **state)
{
    (void) state;
    s_run_option_cases (s_plugin.desc, s_option_cases,
                        sizeof s_option_cases / sizeof s_option_cases[0], s_ctx_init);
}

typedef struct {
    const char *name;
    const char *script; /* NULL: argv below */
    const char *argv[3];
    fanhub_result_t result;
    const char *logged; /* the whole log line; NULL: nothing logged */
} exit_case_t;

static const exit_case_t s_exit_cases[] = {
    {"true", NULL, {"/bin/true"}, FANHUB_OK, NULL},
    {"true from PATH", NULL, {"true"}, FANHUB_OK, NULL},
    {"false",
     NULL,
     {"/bin/false"},
     FANHUB_FAIL,
     "message 7 (org.test.x): exit status 1 (nothing on stderr)"},
    {"exit 75",
     "exit 75",
     {NULL},
     FANHUB_RETRY,
     "message 7 (org.test.x): exit status 75 (EX_TEMPFAIL) (nothing on "
     "stderr); answering RETRY"},
    {"exit 75 with a reason",
     "echo 'try later' >&2; exit 75",
     {NULL},
     FANHUB_RETRY,
     "message 7 (org.test.x): exit status 75 (EX_TEMPFAIL): try later; "
     "answering RETRY"},
    {"exit 2, first line of stderr",
     "printf 'bad\\tthing \\r\\nsecond line\\n' >&2; exit 2",
     {NULL},
     FANHUB_FAIL,
     "message 7 (org.test.x): exit status 2: bad?thing"},
    {"exit 1 after stdout",
     "echo ignored; exit 1",
     {NULL},
     FANHUB_FAIL,
     "message 7 (org.test.x): exit status 1 (nothing on stderr)"},
    {"killed by a signal",
     "echo dying >&2; kill -KILL $$",
     {NULL},
     FANHUB_FAIL,
     "message 7 (org.test.x): killed by signal 9 (SIGKILL): dying"},
    {"SIGTERM",
     "kill -TERM $$",
     {NULL},
     FANHUB_FAIL,
     "message 7 (org.test.x): killed by signal 15 (SIGTERM) (nothing on "
     "stderr)"},
    {"a long line is cut",
     "head -c 5000 /dev/zero | tr '\\0' x >&2; exit 3",
     {NULL},
     FANHUB_FAIL,
     NULL /* checked by length below */},
};

static void
test_exit_codes (void **state)
{
    (void) state;
    size_t cases = sizeof s_exit_cases / sizeof s_exit_cases[0];
    for (size_t i = 0; i < cases; i++) {
        const exit_case_t *c = &s_exit_cases[i];
        fanhub_ctx_t ctx;
        s_ctx_init (&ctx);
        void *plugin;
        if (c->script)
            plugin = s_start_shell (&ctx, c->script, NULL, NULL);
        else {
            size_t argc = 0;
            while (argc < 3 && c->argv[argc])
                argc++;
            plugin = s_start_argv (&ctx, c->argv, argc);
        }
        fanhub_msg_t msg = s_msg (BYTES ("org.test.x"), BYTES ("body"), 7);
        fanhub_result_t rc = s_plugin.desc->consume (plugin, &msg);
        s_plugin.desc->fini (plugin);
        bool ok = rc == c->result;
        if (c->logged)
            ok = ok && ctx.lines == 1 && strcmp (ctx.last, c->logged) == 0;
        else if (c->result == FANHUB_OK)
            ok = ok && ctx.lines == 0;
        /* The failure's reason goes to the hub too (host->set_reason): the
           line logged, without its message and topic. */
        if (c->result == FANHUB_OK)
            ok = ok && ctx.reason[0] == '\0';
        else
            ok = ok && ctx.reason[0] && strstr (ctx.last, ctx.reason);
        if (!ok) {
            print_error ("case \"%s\": result %d (want %d), %d lines, reason %s\n"
                         " got: %s\nwant: %s\n",
                         c->name, rc, c->result, ctx.lines, ctx.reason, ctx.last,
                         c->logged ? c->logged : "(nothing)");
            fail ();
        }
    }
    /* The long line: kept to its first 300 bytes. */
    const exit_case_t *c = &s_exit_cases[cases - 1];
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx, c->script, NULL, NULL);
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES (""), 1);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    s_plugin.desc->fini (plugin);
    const char *prefix = "message 1 (t): exit status 3: ";
    assert_int_equal (strncmp (ctx.last, prefix, strlen (prefix)), 0);
    assert_int_equal (strlen (ctx.last), strlen (prefix) + 300);
    assert_int_equal (strspn (ctx.last + strlen (prefix), "x"), 300);
}

static void
test_timeout_kills (void **state)
{
    (void) state;
    /* Plain: SIGTERM is enough. */
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx, "echo started >&2; sleep 300", "1000", NULL);
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_string_equal (ctx.last, "message 1 (t): timed out after 1000 ms: started");
    s_plugin.desc->fini (plugin);

    /* SIGTERM ignored by the whole group: SIGKILL after the grace. */
    s_ctx_init (&ctx);
    plugin = s_start_shell (&ctx, "trap '' TERM; sleep 300; exit 0", "100", "100");
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_string_equal (ctx.last, "message 1 (t): timed out after 100 ms (nothing on stderr)");
    s_plugin.desc->fini (plugin);

    /* kill_grace_ms 0: SIGKILL at once. */
    s_ctx_init (&ctx);
    plugin = s_start_shell (&ctx, "trap '' TERM; sleep 300", "100", "0");
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_non_null (strstr (ctx.last, "timed out after 100 ms"));
    s_plugin.desc->fini (plugin);
}

static bool
s_pid_gone (long pid)
{
    return s_process_gone (pid);
}

/* What the command started in the background dies with it: the whole
   process group is signalled. */
static void
test_timeout_kills_the_group (void **state)
{
    (void) state;
    char pidfile[512];
    s_path (pidfile, sizeof pidfile, "group.pid");
    char script[4096];
    snprintf (script, sizeof script, "sleep 300 & echo $! > '%s.tmp'; mv '%s.tmp' '%s'; wait",
              pidfile, pidfile, pidfile);
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx, script, "2000", "100");
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_non_null (strstr (ctx.last, "timed out after 2000 ms"));
    s_plugin.desc->fini (plugin);
    char *text = s_slurp (pidfile, NULL);
    long pid = strtol (text, NULL, 10);
    free (text);
    assert_true (pid > 1);
    /* Reparented to init, which reaps it; a zombie counts as gone. */
    assert_true (s_eventually (s_pid_gone, pid));
}

/* The program disappears after init: FAIL with the reason, no child. */
static void
test_spawn_failure (void **state)
{
    (void) state;
    char prog[512];
    s_path (prog, sizeof prog, "vanishing");
    FILE *f = fopen (prog, "w");
    assert_non_null (f);
    fputs ("#!/bin/sh\nexit 0\n", f);
    fclose (f);
    assert_int_equal (chmod (prog, 0755), 0);
    const char *argv[] = {prog};
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_argv (&ctx, argv, 1);
    fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES ("b"), 1);
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);

    /* Not an executable format: no shell fallback. */
    f = fopen (prog, "w");
    assert_non_null (f);
    fputs ("exit 0\n", f);
    fclose (f);
    char want[1024];
    snprintf (want, sizeof want, "message 2 (t): cannot run %s: Exec format error", prog);
    msg.seq = 2;
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_string_equal (ctx.last, want);

    /* The second failure of the streak is logged only when a second has
       passed since the first line. */
    assert_int_equal (unlink (prog), 0);
    snprintf (want, sizeof want, "message 3 (t): cannot run %s: No such file or directory", prog);
    msg.seq = 3;
    assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    assert_true (ctx.lines == 1 || strcmp (ctx.last, want) == 0);

    /* Again and again, until it is logged: with the count of the ones
       that were not. */
    msg.seq = 4;
    while (ctx.lines < 2 || !strstr (ctx.last, "not logged)"))
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    snprintf (want, sizeof want, "message 4 (t): cannot run %s: No such file or directory (", prog);
    assert_int_equal (strncmp (ctx.last, want, strlen (want)), 0);
    s_plugin.desc->fini (plugin);
}

static int64_t
s_mono_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The failure log is bounded: first of a streak, then one a second, with
   a burst of ten for short streaks. The bounds are checked against the
   time the test took, so a slow machine cannot fail it. */
static void
test_failure_log_rate (void **state)
{
    (void) state;
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx, "exit $((FANHUB_SEQ % 1000))", NULL, NULL);
    int64_t start = s_mono_ns ();
    int failures = 40;
    for (int i = 1; i <= failures; i++) {
        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES (""), (uint64_t) i);
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_FAIL);
    }
    int64_t seconds = (s_mono_ns () - start) / 1000000000;
    assert_true (ctx.lines >= 1);
    assert_true (ctx.lines <= 1 + seconds + 1);
    assert_int_equal (strncmp (ctx.all, "message 1 (t): exit status 1 ", 29), 0);
    int lines_before = ctx.lines;
    fanhub_msg_t ok = s_msg (BYTES ("t"), BYTES (""), 1000);
    assert_int_equal (s_plugin.desc->consume (plugin, &ok), FANHUB_OK);
    assert_int_equal (ctx.lines, lines_before + 1);
    assert_string_equal (ctx.last, "command succeeds again after 40 failed runs");

    /* Alternating: every failure starts a streak, yet the lines stay
       within the burst and the rate. */
    s_ctx_init (&ctx);
    start = s_mono_ns ();
    for (int i = 1; i <= 30; i++) {
        fanhub_msg_t msg = s_msg (BYTES ("t"), BYTES (""), (uint64_t) i);
        s_plugin.desc->consume (plugin, &msg);
        msg.seq = 1000;
        assert_int_equal (s_plugin.desc->consume (plugin, &msg), FANHUB_OK);
    }
    seconds = (s_mono_ns () - start) / 1000000000;
    assert_true (ctx.lines <= 10 + seconds + 1);
    s_plugin.desc->fini (plugin);
}

#define THREADS 4
#define PER_THREAD 25

typedef struct {
    void *plugin;
    int index;
    int wrong; /* results that were not as expected */
} worker_t;

static void *
s_worker (void *arg)
{
    worker_t *w = (worker_t *) arg;
    for (int i = 0; i < PER_THREAD; i++) {
        uint64_t seq = (uint64_t) w->index * PER_THREAD + (uint64_t) i + 1;
        char body[64];
        int n = snprintf (body, sizeof body, "body of %llu", (unsigned long long) seq);
        fanhub_msg_t msg = s_msg (BYTES ("t"), body, (size_t) n, seq);
        fanhub_result_t want = seq % 3 == 0 ? FANHUB_RETRY : FANHUB_OK;
        if (s_plugin.desc->consume (w->plugin, &msg) != want)
            w->wrong++;
    }
    return NULL;
}

/* Several threads at once (the plugin says it is thread-safe): every
   command gets its own body and environment, every answer is its own. */
static void
test_threads (void **state)
{
    (void) state;
    fanhub_ctx_t ctx;
    s_ctx_init (&ctx);
    void *plugin = s_start_shell (&ctx,
                                  "cat > \"$EXEC_TEST_DIR/thread-$FANHUB_SEQ\"; "
                                  "[ $((FANHUB_SEQ % 3)) -ne 0 ] || exit 75",
                                  NULL, NULL);
    pthread_t threads[THREADS];
    worker_t workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker_t){plugin, i, 0};
        assert_int_equal (pthread_create (&threads[i], NULL, s_worker, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join (threads[i], NULL);
        assert_int_equal (workers[i].wrong, 0);
    }
    s_plugin.desc->fini (plugin);
    for (int seq = 1; seq <= THREADS * PER_THREAD; seq++) {
        char path[512], want[64];
        snprintf (path, sizeof path, "%s/thread-%d", s_plugin.dir, seq);
        snprintf (want, sizeof want, "body of %d", seq);
        char *got = s_slurp (path, NULL);
        assert_string_equal (got, want);
        free (got);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown (test_descriptor, s_no_children),
        cmocka_unit_test_teardown (test_options_table, s_no_children),
        cmocka_unit_test_teardown (test_exit_codes, s_no_children),
        cmocka_unit_test_teardown (test_timeout_kills, s_no_children),
        cmocka_unit_test_teardown (test_timeout_kills_the_group, s_no_children),
        cmocka_unit_test_teardown (test_spawn_failure, s_no_children),
        cmocka_unit_test_teardown (test_failure_log_rate, s_no_children),
        cmocka_unit_test_teardown (test_threads, s_no_children),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
