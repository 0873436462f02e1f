/*  test_exec_plugin - the shipped exec consumer, driven through a fake host.

    exec.so is loaded with dlopen as the hub loads it and handed a host
    table of this file: options and messages are plain structs. The
    commands are /bin/true, /bin/false and small /bin/sh scripts that write
    what they saw (stdin, environment, open descriptors) into files of a
    temp directory, which the test then compares byte for byte.

    This process does not ignore SIGPIPE (the hub does), so a command that
    never reads its stdin also checks that the plugin takes back the
    SIGPIPE its write raised. After every test no child of this process may
    be left, zombie or not.
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

/* -------------------------------------------------------------------------
   Helpers */

static fanhub_fake_plugin_t s_plugin; /* exec.so and a directory for what commands saw */

#define SCALAR(k, v, w)                                                                            \
    {                                                                                              \
        FANHUB_OPTION_SCALAR, (k), (v), (w), NULL, 0                                               \
    }
#define LISTOF(k, items, n, w)                                                                     \
    {                                                                                              \
        FANHUB_OPTION_LIST, (k), NULL, (w), (items), (n)                                           \
    }
#define MAP(items, n)                                                                              \
    {                                                                                              \
        FANHUB_OPTION_MAP, NULL, NULL, "t.yaml:4:3", (items), (n)                                  \
    }
#define BYTES(s) (s), (sizeof (s) - 1)

static const fanhub_option_t s_empty_items[1];

static void
s_ctx_init (fanhub_ctx_t *ctx)
{
    fanhub_fake_ctx_init (ctx);
    ctx->name = "runner";
}

/* Starts an instance with the given map entries; fails the test when init
   refuses. */
static void *
s_start_map (fanhub_ctx_t *ctx, const fanhub_option_t *items, size_t n)
{
    fanhub_option_t map = MAP (n ? items : s_empty_items, n);
    void *state = NULL;
    char err[1024] = "";
    int rc = s_plugin.desc->init (&fanhub_fake_host, ctx, &map, &state, err, sizeof err);
    if (rc != 0)
        print_error ("init refused: %s\n", err);
    assert_int_equal (rc, 0);
    assert_non_null (state);
    return state;
}

/* An instance running the shell script SCRIPT, with timeout_ms and
   kill_grace_ms when not NULL. */
static void *
s_start_shell (fanhub_ctx_t *ctx, const char *script, const char *timeout_ms, const char *grace_ms)
{
    fanhub_option_t items[4];
    size_t n = 0;
    items[n++] = (fanhub_option_t) SCALAR ("command", script, "t.yaml:5:14");
    items[n++] = (fanhub_option_t) SCALAR ("shell", "true", "t.yaml:6:12");
    if (timeout_ms)
        items[n++] = (fanhub_option_t) SCALAR ("timeout_ms", timeout_ms, "t.yaml:7:3");
    if (grace_ms)
        items[n++] = (fanhub_option_t) SCALAR ("kill_grace_ms", grace_ms, "t.yaml:8:3");
    return s_start_map (ctx, items, n);
}

/* An instance running argv (no shell). */
static void *
s_start_argv (fanhub_ctx_t *ctx, const char *const *argv, size_t argc)
{
    fanhub_option_t args[8];
    assert_true (argc <= 8);
    for (size_t i = 0; i < argc; i++)
        args[i] = (fanhub_option_t) SCALAR (NULL, argv[i], "t.yaml:5:15");
    fanhub_option_t items[] = {LISTOF ("command", args, argc, "t.yaml:5:14")};
    return s_start_map (ctx, items, 1);
}

static fanhub_msg_t
s_msg (const void *topic, size_t topic_size, const void *body, size_t body_size, uint64_t seq)
{
    return fanhub_fake_msg (topic, topic_size, body, body_size, seq, 0);
}

/* The whole file, NUL-terminated for convenience; *size without it. */
static char *
s_slurp (const char *path, size_t *size)
{
    FILE *f = fopen (path, "rb");
    if (!f)
        print_error ("cannot open %s: %s\n", path, strerror (errno));
    assert_non_null (f);
    size_t cap = 4096, len = 0;
    char *data = malloc (cap);
    assert_non_null (data);
    size_t n;
    while ((n = fread (data + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            data = realloc (data, cap);
            assert_non_null (data);
        }
    }
    fclose (f);
    data[len] = '\0';
    if (size)
        *size = len;
    return data;
}

static void
s_path (char *out, size_t size, const char *name)
{
    snprintf (out, size, "%s/%s", s_plugin.dir, name);
}

/* The children of this process, zombies included, from /proc. */
static int
s_children (void)
{
    DIR *proc = opendir ("/proc");
    assert_non_null (proc);
    int children = 0;
    struct dirent *entry;
    while ((entry = readdir (proc))) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        char path[300], stat[1024];
        snprintf (path, sizeof path, "/proc/%s/stat", entry->d_name);
        FILE *f = fopen (path, "r");
        if (!f)
            continue; /* gone meanwhile */
        size_t n = fread (stat, 1, sizeof stat - 1, f);
        fclose (f);
        stat[n] = '\0';
        /* pid (comm) state ppid ...; comm may hold anything, so from the
           last ')'. */
        char *close = strrchr (stat, ')');
        char state;
        long ppid;
        if (close && sscanf (close + 1, " %c %ld", &state, &ppid) == 2 && ppid == (long) getpid ())
            children++;
    }
    closedir (proc);
    return children;
}

/* Is process pid gone (or a zombie that someone else must reap)? */
static bool
s_process_gone (long pid)
{
    char path[64], stat[512];
    snprintf (path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen (path, "r");
    if (!f)
        return true;
    size_t n = fread (stat, 1, sizeof stat - 1, f);
    fclose (f);
    stat[n] = '\0';
    char *close = strrchr (stat, ')');
    return close && close[1] == ' ' && close[2] == 'Z';
}

/* Waits (with a generous deadline, never deciding a pass) for cond. */
static bool
s_eventually (bool (*cond) (long), long arg)
{
    for (int i = 0; i < 3000; i++) {
        if (cond (arg))
            return true;
        nanosleep (&(struct timespec){0, 10000000}, NULL);
    }
    return false;
}

/* -------------------------------------------------------------------------
   Tests */

static int
s_group_setup (void **state)
{
    (void) state;
    if (fanhub_fake_plugin_open (&s_plugin, SHIPPED_PLUGIN_DIR "/exec.so", "fanhub-exec-test") != 0)
        return -1;
    /* Seen by every command: where to write what it saw. */
    setenv ("EXEC_TEST_DIR", s_plugin.dir, 1);
    return 0;
}

static int
s_group_teardown (void **state)
{
    (void) state;
    fanhub_fake_plugin_close (&s_plugin);
    return 0;
}

/* Runs after every test: nothing the plugin started is left. */
static int
s_no_children (void **state)
{
    (void) state;
    int children = s_children ();
    if (children) {
        fprintf (stderr, "%d children left behind\n", children);
        return -1;
    }
    sigset_t pending;
    sigpending (&pending);
    if (sigismember (&pending, SIGPIPE)) {
        fprintf (stderr, "a SIGPIPE is left pending\n");
        return -1;
    }
    return 0;
}

static void
test_descriptor (void **state)
{
    (void) state;
    assert_non_null (s_plugin.desc);
    assert_string_equal (s_plugin.desc->name, "exec");
    assert_int_equal (s_plugin.desc->abi_major, FANHUB_ABI_MAJOR);
    assert_true (s_plugin.desc->flags & FANHUB_CONSUMER_THREAD_SAFE);
    assert_non_null (s_plugin.desc->init);
    assert_non_null (s_plugin.desc->consume);
    assert_non_null (s_plugin.desc->fini);
}

typedef struct {
    const char *name;
    fanhub_option_t items[3];
    size_t count;
    const char *expected; /* the whole error; NULL: accepted */
} option_case_t;

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
    size_t cases = sizeof s_option_cases / sizeof s_option_cases[0];
    for (size_t i = 0; i < cases; i++) {
        const option_case_t *c = &s_option_cases[i];
        fanhub_option_t map = MAP (c->count ? c->items : s_empty_items, c->count);
        fanhub_ctx_t ctx;
        s_ctx_init (&ctx);
        char got[1536];
        if (fanhub_fake_option_case (s_plugin.desc, &ctx, &map, c->expected, got, sizeof got) != 0)
            fail_msg ("case \"%s\": %s", c->name, got);
    }
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
        cmocka_unit_test_teardown (test_body_on_stdin, s_no_children),
        cmocka_unit_test_teardown (test_unread_stdin, s_no_children),
        cmocka_unit_test_teardown (test_foreign_sigpipe_kept, s_no_children),
        cmocka_unit_test_teardown (test_environment, s_no_children),
        cmocka_unit_test_teardown (test_no_fd_leaks, s_no_children),
        cmocka_unit_test_teardown (test_signals_reset, s_no_children),
        cmocka_unit_test_teardown (test_stdout_modes, s_no_children),
        cmocka_unit_test_teardown (test_spawn_failure, s_no_children),
        cmocka_unit_test_teardown (test_failure_log_rate, s_no_children),
        cmocka_unit_test_teardown (test_threads, s_no_children),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
