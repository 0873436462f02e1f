/*  exec_kit - what the exec plugin's tests share: exec.so and a directory
    for what commands saw (a cmocka group setup and teardown, and the
    teardown of every test: no child of this process left), options,
    starting an instance, messages, reading files back, and waiting for a
    process to be gone. Include it once, after <cmocka.h> and
    <fanhub/testing.h>.
*/
#ifndef EXEC_KIT_H_INCLUDED
#define EXEC_KIT_H_INCLUDED

#include "plugin_kit.h"

/* -------------------------------------------------------------------------
   Helpers */

#define LISTOF(k, items, n, w)                                                                     \
    {                                                                                              \
        FANHUB_OPTION_LIST, (k), NULL, (w), (items), (n)                                           \
    }
#define BYTES(s) (s), (sizeof (s) - 1)

static inline void
s_ctx_init (fanhub_ctx_t *ctx)
{
    fanhub_fake_ctx_init (ctx);
    ctx->name = "runner";
}

/* An instance running the shell script SCRIPT, with timeout_ms and
   kill_grace_ms when not NULL. */
static inline void *
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
static inline void *
s_start_argv (fanhub_ctx_t *ctx, const char *const *argv, size_t argc)
{
    fanhub_option_t args[8];
    assert_true (argc <= 8);
    for (size_t i = 0; i < argc; i++)
        args[i] = (fanhub_option_t) SCALAR (NULL, argv[i], "t.yaml:5:15");
    fanhub_option_t items[] = {LISTOF ("command", args, argc, "t.yaml:5:14")};
    return s_start_map (ctx, items, 1);
}

static inline fanhub_msg_t
s_msg (const void *topic, size_t topic_size, const void *body, size_t body_size, uint64_t seq)
{
    return fanhub_fake_msg (topic, topic_size, body, body_size, seq, 0);
}

static inline void
s_path (char *out, size_t size, const char *name)
{
    snprintf (out, size, "%s/%s", s_plugin.dir, name);
}

/* The children of this process, zombies included, from /proc. */
static inline int
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
static inline bool
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
static inline bool
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

static inline int
s_group_setup (void **state)
{
    (void) state;
    if (fanhub_fake_plugin_open (&s_plugin, SHIPPED_PLUGIN_DIR "/exec.so", "fanhub-exec-test") != 0)
        return -1;
    /* Seen by every command: where to write what it saw. */
    setenv ("EXEC_TEST_DIR", s_plugin.dir, 1);
    return 0;
}

static inline int
s_group_teardown (void **state)
{
    (void) state;
    fanhub_fake_plugin_close (&s_plugin);
    return 0;
}

/* Runs after every test: nothing the plugin started is left. */
static inline int
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

#endif
