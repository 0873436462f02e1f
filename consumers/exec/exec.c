/*  exec - the shipped consumer that runs a command for every message.

    The command gets the body on its standard input and the message in its
    environment:

        FANHUB_TOPIC     the topic (cut at its first NUL byte, if it has one)
        FANHUB_SEQ       the hub's sequence number, in decimal
        FANHUB_CONSUMER  the consumer's name

    on top of the hub's own environment. Its exit status is the answer:

        0                       FANHUB_OK
        75 (EX_TEMPFAIL)        FANHUB_RETRY
        anything else           FANHUB_FAIL
        killed by a signal      FANHUB_FAIL
        still running at timeout_ms
                                FANHUB_FAIL "timed out": its process group
                                gets SIGTERM, and SIGKILL kill_grace_ms later
        cannot be started       FANHUB_FAIL (no such program, exec format),
                                FANHUB_RETRY (out of processes, fds, memory)

    Options:
        command        required. A list [PROGRAM, ARG...], run directly, no
                       shell; PROGRAM without a '/' is looked up in PATH at
                       init. With shell: true, one string run as
                       ["/bin/sh", "-c", STRING].
        shell          true | false, default false
        timeout_ms     1..86400000, default 10000
        kill_grace_ms  0..3600000, default 1000; 0 sends SIGKILL at once
        stdout         null (default): /dev/null; stderr: the hub's stderr;
                       inherit: the hub's own stdout

    Failures are logged with the reason: the exit status or signal and the
    first line of the command's stderr (the rest of stderr is read and
    discarded). The first failure of a streak is logged, then at most one
    line a second while the streak lasts, each saying how many failures
    went unlogged; a burst of short streaks is held to the same rate once
    ten lines have been written in quick succession. When the command
    succeeds again after failures, that is logged once.

    The child. It is started with posix_spawn (glibc's is a vfork, cheap
    beside fork for a big hub) in a process group of its own, so that a
    timeout kills whatever it started too. It sees only file descriptors 0,
    1 and 2: the hub holds many descriptors without close-on-exec (ZeroMQ
    sockets, eventfds) and a leaked pipe end would also keep another
    command's stdin from ever reaching end of file. Its signal mask is
    empty and every signal has its default action: the hub blocks SIGTERM
    and friends in its threads and ignores SIGPIPE, and both would be
    inherited across exec.

    The conversation. consume writes the body into a non-blocking pipe and
    reads stderr from another, both in one poll() loop with the deadline, so
    a large body that the command never reads cannot deadlock it. A command
    that exits or closes stdin early ends the writing (EPIPE is expected
    then, not an error). SIGPIPE is blocked on the calling thread while it
    writes and a SIGPIPE that the write raised is taken back with
    sigtimedwait, so the plugin is safe whether or not the host ignores
    SIGPIPE. The child's end is noticed through a pidfd when the kernel has
    them (else by polling in 10 ms steps); it is reaped by consume before it
    returns, timed out or not, so no zombie outlives a call. The group is
    signalled before the child is reaped, while its id cannot be reused.

    Thread-safe: everything of a run lives on consume's stack; the state is
    read-only after init but for the failure log, which has a mutex.
*/
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np */

#include <fanhub/consumer.h>
#include <fanhub/sdk.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* glibc 2.34 brought posix_spawn_file_actions_addclosefrom_np; elsewhere
   the child is made with fork and closes the descriptors itself. */
#if defined(__GLIBC__) && !defined(EXEC_FORCE_FORK)                          \
    && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define EXEC_HAVE_CLOSEFROM_NP 1
#endif

#define EXEC_TIMEOUT_MS_MAX 86400000
#define EXEC_GRACE_MS_MAX 3600000
#define EXEC_EX_TEMPFAIL 75
#define EXEC_LINE_MAX 300       /* bytes of stderr's first line kept */
#define EXEC_DRAIN_MAX (1 << 20) /* stderr read after the child exited */
#define EXEC_POLL_STEP_MS 10    /* without a pidfd */
#define EXEC_SECOND_NS INT64_C (1000000000)
#define EXEC_LOG_BURST_NS (10 * EXEC_SECOND_NS) /* ten lines at once */

extern char **environ;

typedef enum {
    EXEC_STDOUT_NULL,
    EXEC_STDOUT_STDERR,
    EXEC_STDOUT_INHERIT
} exec_stdout_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    char *path;          /* the program, PATH resolved at init */
    char **argv;         /* NULL-terminated */
    char **env;          /* environ at init without FANHUB_*, NULL-ended */
    size_t nenv;
    char *consumer_env;  /* "FANHUB_CONSUMER=NAME" */
    int64_t timeout_ns;
    int64_t grace_ns;
    exec_stdout_t out;

    pthread_mutex_t lock; /* guards the failure log below */
    bool failing;         /* the last message failed */
    uint64_t streak;      /* failed runs in the current streak */
    uint64_t unlogged;    /* failures since the last line */
    int64_t last_line;    /* CLOCK_MONOTONIC ns of the last line */
    int64_t credit;       /* ns of log lines allowed now (1 s per line) */
} exec_state_t;

/* What one run came to. */
typedef struct {
    fanhub_result_t result;
    char reason[EXEC_LINE_MAX + 128];
} exec_outcome_t;

/* -------------------------------------------------------------------------
   Options */

/* Finds PROGRAM in PATH as execvp would; a malloc'd path or NULL. */
static char *
s_search_path (const char *program)
{
    const char *search = getenv ("PATH");
    if (!search || !*search)
        search = "/usr/local/bin:/usr/bin:/bin";
    size_t plen = strlen (program);
    while (true) {
        const char *colon = strchr (search, ':');
        size_t dlen = colon ? (size_t) (colon - search) : strlen (search);
        /* An empty entry is the current directory. */
        const char *dir = dlen ? search : ".";
        size_t dirlen = dlen ? dlen : 1;
        char *candidate = malloc (dirlen + plen + 2);
        if (!candidate)
            return NULL;
        memcpy (candidate, dir, dirlen);
        candidate[dirlen] = '/';
        memcpy (candidate + dirlen + 1, program, plen + 1);
        struct stat st;
        if (stat (candidate, &st) == 0 && S_ISREG (st.st_mode)
            && access (candidate, X_OK) == 0)
            return candidate;
        free (candidate);
        if (!colon)
            return NULL;
        search = colon + 1;
    }
}

/* Checks command (given shell) and fills self->path and self->argv. */
static int
s_read_command (exec_state_t *self, const fanhub_option_t *options,
                const fanhub_option_t *node, bool shell, char *err,
                size_t errlen)
{
    const fanhub_host_t *host = self->host;
    (void) options; /* command is REQUIRED in the table: node is set */
    const char *where = host->option_where (node);
    fanhub_option_kind_t kind = host->option_kind (node);
    if (shell) {
        const char *text = host->option_scalar (node);
        if (!text) {
            snprintf (err, errlen,
                      "options.command: with shell: true, expected one "
                      "string for /bin/sh -c, got %s (%s)",
                      fanhub_option_kind_name (kind), where);
            return -1;
        }
        if (!*text) {
            snprintf (err, errlen, "options.command: must not be empty (%s)",
                      where);
            return -1;
        }
        self->argv = calloc (4, sizeof *self->argv);
        if (!self->argv)
            goto oom;
        self->argv[0] = strdup ("/bin/sh");
        self->argv[1] = strdup ("-c");
        self->argv[2] = strdup (text);
        self->path = strdup ("/bin/sh");
        if (!self->argv[0] || !self->argv[1] || !self->argv[2] || !self->path)
            goto oom;
        return 0;
    }
    if (kind != FANHUB_OPTION_LIST) {
        if (kind == FANHUB_OPTION_SCALAR)
            snprintf (err, errlen,
                      "options.command: expected a list [PROGRAM, ARG...], "
                      "got a string; to run it with /bin/sh -c, set shell: "
                      "true (%s)",
                      where);
        else
            snprintf (err, errlen,
                      "options.command: expected a list [PROGRAM, ARG...], "
                      "got %s (%s)",
                      fanhub_option_kind_name (kind), where);
        return -1;
    }
    size_t argc = host->option_count (node);
    if (argc == 0) {
        snprintf (err, errlen,
                  "options.command: expected a list [PROGRAM, ARG...], got "
                  "an empty list (%s)",
                  where);
        return -1;
    }
    for (size_t i = 0; i < argc; i++) {
        const fanhub_option_t *item = host->option_at (node, i, NULL);
        const char *text = host->option_scalar (item);
        if (!text) {
            snprintf (err, errlen,
                      "options.command[%zu]: expected a string, got %s (%s)",
                      i, fanhub_option_kind_name (host->option_kind (item)),
                      host->option_where (item));
            return -1;
        }
        if (i == 0 && !*text) {
            snprintf (err, errlen,
                      "options.command[0]: the program must not be empty "
                      "(%s)",
                      host->option_where (item));
            return -1;
        }
    }
    self->argv = calloc (argc + 1, sizeof *self->argv);
    if (!self->argv)
        goto oom;
    for (size_t i = 0; i < argc; i++) {
        self->argv[i]
            = strdup (host->option_scalar (host->option_at (node, i, NULL)));
        if (!self->argv[i])
            goto oom;
    }
    const char *program = self->argv[0];
    const char *pwhere = host->option_where (host->option_at (node, 0, NULL));
    if (strchr (program, '/')) {
        struct stat st;
        int e = 0;
        if (stat (program, &st) != 0)
            e = errno;
        else if (!S_ISREG (st.st_mode))
            e = EACCES;
        else if (access (program, X_OK) != 0)
            e = errno;
        if (e) {
            snprintf (err, errlen, "options.command[0]: %s: cannot run: %s (%s)",
                      program, strerror (e), pwhere);
            return -1;
        }
        self->path = strdup (program);
        if (!self->path)
            goto oom;
    }
    else {
        self->path = s_search_path (program);
        if (!self->path) {
            snprintf (err, errlen,
                      "options.command[0]: %s: not found in PATH (%s)",
                      program, pwhere);
            return -1;
        }
    }
    return 0;
oom:
    snprintf (err, errlen, "exec: out of memory");
    return -1;
}

/* The options as the host reads them from the table. */
typedef struct {
    const fanhub_option_t *command;
    bool shell;
    int64_t timeout_ms;
    int64_t grace_ms;
    int out; /* exec_stdout_t */
} exec_options_t;

static const fanhub_consumer_desc_t s_desc;

static const char *const s_stdout_values[] = {"null", "stderr", "inherit", NULL};

#define EXEC_OPT(name, type, field, def, lo, hi, values, flags, help)          \
    {name, type, offsetof (exec_options_t, field), def, lo, hi, values, flags, help}
static const fanhub_opt_t s_options[] = {
    EXEC_OPT ("command", FANHUB_OPT_ANY, command, NULL, 0, 0, NULL, FANHUB_OPT_REQUIRED,
              "the command to run, as a list [PROGRAM, ARG...]"),
    EXEC_OPT ("shell", FANHUB_OPT_BOOL, shell, "false", 0, 0, NULL, 0,
              "command is one string for /bin/sh -c"),
    EXEC_OPT ("timeout_ms", FANHUB_OPT_INT, timeout_ms, "10000", 1, EXEC_TIMEOUT_MS_MAX, NULL, 0,
              "how long one run may take before it is killed (RETRY)"),
    EXEC_OPT ("kill_grace_ms", FANHUB_OPT_INT, grace_ms, "1000", 0, EXEC_GRACE_MS_MAX, NULL, 0,
              "between SIGTERM and SIGKILL on a timeout"),
    EXEC_OPT ("stdout", FANHUB_OPT_ENUM, out, "null", 0, 0, s_stdout_values, 0,
              "where the command's stdout goes"),
    FANHUB_OPT_END,
};

static int
s_read_options (exec_state_t *self, const fanhub_option_t *options,
                char *err, size_t errlen)
{
    exec_options_t o = {0};
    if (self->host->options_read (self->ctx, &s_desc, options, &o, sizeof o, err, errlen) != 0)
        return -1;
    self->timeout_ns = o.timeout_ms * 1000000;
    self->grace_ns = o.grace_ms * 1000000;
    self->out = (exec_stdout_t) o.out;
    return s_read_command (self, options, o.command, o.shell, err, errlen);
}

static bool
s_is_ours (const char *entry)
{
    return strncmp (entry, "FANHUB_TOPIC=", 13) == 0
           || strncmp (entry, "FANHUB_SEQ=", 11) == 0
           || strncmp (entry, "FANHUB_CONSUMER=", 16) == 0;
}

/* The environment every command starts from: the hub's at init, less the
   variables the plugin sets per message. */
static int
s_snapshot_env (exec_state_t *self)
{
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    self->env = calloc (n + 1, sizeof *self->env);
    if (!self->env)
        return -1;
    for (char **e = environ; e && *e; e++) {
        if (s_is_ours (*e))
            continue;
        self->env[self->nenv] = strdup (*e);
        if (!self->env[self->nenv])
            return -1;
        self->nenv++;
    }
    const char *name = self->host->consumer_name (self->ctx);
    if (!name)
        name = "";
    size_t size = strlen ("FANHUB_CONSUMER=") + strlen (name) + 1;
    self->consumer_env = malloc (size);
    if (!self->consumer_env)
        return -1;
    snprintf (self->consumer_env, size, "FANHUB_CONSUMER=%s", name);
    return 0;
}

static void
s_destroy (exec_state_t *self)
{
    if (self->argv)
        for (char **a = self->argv; *a; a++)
            free (*a);
    free (self->argv);
    if (self->env)
        for (size_t i = 0; i < self->nenv; i++)
            free (self->env[i]);
    free (self->env);
    free (self->consumer_env);
    free (self->path);
    free (self);
}

static int
s_init (const fanhub_host_t *host, fanhub_ctx_t *ctx,
        const fanhub_option_t *options, void **state, char *err,
        size_t errlen)
{
    if (host->abi_major != FANHUB_ABI_MAJOR) {
        snprintf (err, errlen, "exec: host ABI %u, plugin built for %u",
                  (unsigned) host->abi_major, (unsigned) FANHUB_ABI_MAJOR);
        return -1;
    }
    exec_state_t *self = (exec_state_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "exec: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    self->credit = EXEC_LOG_BURST_NS;
    if (s_read_options (self, options, err, errlen)) {
        s_destroy (self);
        return -1;
    }
    if (s_snapshot_env (self) || pthread_mutex_init (&self->lock, NULL)) {
        snprintf (err, errlen, "exec: out of memory");
        s_destroy (self);
        return -1;
    }
    *state = self;
    return 0;
}

/* init acquires nothing (no process runs before the first message), so
   check is init's option reading, on a state thrown away at once. */
static int
s_check (const fanhub_host_t *host, fanhub_ctx_t *ctx,
         const fanhub_option_t *options, char *err, size_t errlen)
{
    if (host->abi_major != FANHUB_ABI_MAJOR) {
        snprintf (err, errlen, "exec: host ABI %u, plugin built for %u",
                  (unsigned) host->abi_major, (unsigned) FANHUB_ABI_MAJOR);
        return -1;
    }
    exec_state_t *self = (exec_state_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "exec: out of memory");
        return -1;
    }
    self->host = host;
    self->ctx = ctx;
    int rc = s_read_options (self, options, err, errlen);
    s_destroy (self);
    return rc ? -1 : 0;
}

static void
s_fini (void *state)
{
    exec_state_t *self = (exec_state_t *) state;
    pthread_mutex_destroy (&self->lock);
    s_destroy (self);
}

/* -------------------------------------------------------------------------
   Running the command */

/* Moves fd above 2 (the child's 0..2 are made from these) keeping
   close-on-exec: with the hub's stdin closed, pipe2 may hand out fd 0. */
static int
s_above_stdio (int fd)
{
    if (fd > 2)
        return fd;
    int moved = fcntl (fd, F_DUPFD_CLOEXEC, 3);
    close (fd);
    return moved;
}

static int
s_pipe (int fds[2])
{
    if (pipe2 (fds, O_CLOEXEC) != 0)
        return -1;
    fds[0] = s_above_stdio (fds[0]);
    fds[1] = s_above_stdio (fds[1]);
    if (fds[0] < 0 || fds[1] < 0) {
        int saved = errno;
        if (fds[0] >= 0)
            close (fds[0]);
        if (fds[1] >= 0)
            close (fds[1]);
        errno = saved;
        return -1;
    }
    return 0;
}

static void
s_close (int *fd)
{
    if (*fd >= 0)
        close (*fd);
    *fd = -1;
}

#ifdef EXEC_HAVE_CLOSEFROM_NP
/* posix_spawn: 0 or an error number. */
static int
s_spawn (const exec_state_t *self, char **envp, int in_fd, int err_fd,
         pid_t *pid)
{
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init (&actions);
    if (rc)
        return rc;
    rc = posix_spawnattr_init (&attr);
    if (rc) {
        posix_spawn_file_actions_destroy (&actions);
        return rc;
    }
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    /* Order matters: stdout may be a copy of the hub's stderr, which must
       be taken before fd 2 becomes the stderr pipe. */
    rc = posix_spawn_file_actions_adddup2 (&actions, in_fd, 0);
    if (!rc && self->out == EXEC_STDOUT_NULL)
        rc = posix_spawn_file_actions_addopen (&actions, 1, "/dev/null",
                                               O_WRONLY, 0);
    else if (!rc && self->out == EXEC_STDOUT_STDERR)
        rc = posix_spawn_file_actions_adddup2 (&actions, 2, 1);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2 (&actions, err_fd, 2);
    if (!rc)
        rc = posix_spawn_file_actions_addclosefrom_np (&actions, 3);
    if (!rc)
        rc = posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETPGROUP
                                                  | POSIX_SPAWN_SETSIGMASK
                                                  | POSIX_SPAWN_SETSIGDEF);
    if (!rc)
        rc = posix_spawnattr_setpgroup (&attr, 0);
    if (!rc)
        rc = posix_spawnattr_setsigmask (&attr, &none);
    if (!rc)
        rc = posix_spawnattr_setsigdefault (&attr, &all);
    if (!rc)
        rc = posix_spawn (pid, self->path, &actions, &attr, self->argv, envp);
    posix_spawnattr_destroy (&attr);
    posix_spawn_file_actions_destroy (&actions);
    return rc;
}
#else
/* fork and exec, doing in the child what posix_spawn's actions would. A
   close-on-exec pipe carries an exec failure's errno back. Only
   async-signal-safe calls between fork and exec. */
static int
s_spawn (const exec_state_t *self, char **envp, int in_fd, int err_fd,
         pid_t *pid)
{
    int status[2];
    if (s_pipe (status) != 0)
        return errno;
    struct rlimit nofile;
    int max_fd = 65536;
    if (getrlimit (RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY
        && nofile.rlim_cur < (rlim_t) INT_MAX)
        max_fd = (int) nofile.rlim_cur;
    sigset_t all, saved;
    sigfillset (&all);
    /* No handler of the hub may run in the child before its reset. */
    pthread_sigmask (SIG_SETMASK, &all, &saved);
    pid_t child = fork ();
    if (child == 0) {
        int e = 0;
        setpgid (0, 0);
        struct sigaction dfl;
        memset (&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
            sigaction (sig, &dfl, NULL);
        if (dup2 (in_fd, 0) < 0)
            e = errno;
        if (!e && self->out == EXEC_STDOUT_NULL) {
            int null = open ("/dev/null", O_WRONLY);
            if (null < 0 || dup2 (null, 1) < 0)
                e = errno;
            if (null > 2)
                close (null);
        }
        else if (!e && self->out == EXEC_STDOUT_STDERR && dup2 (2, 1) < 0)
            e = errno;
        if (!e && dup2 (err_fd, 2) < 0)
            e = errno;
        if (!e) {
            bool closed = false;
#ifdef SYS_close_range
            closed = (status[1] == 3
                      || syscall (SYS_close_range, 3, status[1] - 1, 0) == 0)
                     && syscall (SYS_close_range, status[1] + 1, ~0U, 0) == 0;
#endif
            for (int fd = 3; !closed && fd < max_fd; fd++)
                if (fd != status[1])
                    close (fd);
            sigset_t none;
            sigemptyset (&none);
            sigprocmask (SIG_SETMASK, &none, NULL);
            execve (self->path, self->argv, envp);
            e = errno;
        }
        while (write (status[1], &e, sizeof e) < 0 && errno == EINTR)
            ;
        _exit (127);
    }
    int fork_errno = errno;
    if (child > 0)
        setpgid (child, child); /* as the child does: whoever is first */
    pthread_sigmask (SIG_SETMASK, &saved, NULL);
    close (status[1]);
    if (child < 0) {
        close (status[0]);
        return fork_errno;
    }
    int e = 0;
    ssize_t n;
    while ((n = read (status[0], &e, sizeof e)) < 0 && errno == EINTR)
        ;
    close (status[0]);
    if (n == (ssize_t) sizeof e) {
        while (waitpid (child, NULL, 0) < 0 && errno == EINTR)
            ;
        return e;
    }
    *pid = child;
    return 0;
}
#endif

/* The pidfd of a child, or -1 where the kernel has none. */
static int
s_pidfd (pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int) syscall (SYS_pidfd_open, pid, 0);
#else
    (void) pid;
    return -1;
#endif
}

/* Has the child exited? It stays a zombie (WNOWAIT): its pid, which is
   also its group's id, cannot be reused until it is reaped. */
static bool
s_exited (pid_t pid)
{
    siginfo_t info;
    memset (&info, 0, sizeof info);
    return waitid (P_PID, (id_t) pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0
           && info.si_pid == pid;
}

static void
s_signal_group (pid_t pid, int sig)
{
    if (kill (-pid, sig) != 0 && errno == ESRCH)
        kill (pid, sig);
}

/* What the conversation with one child keeps. */
typedef struct {
    int in_fd; /* our end of its stdin, -1 once closed */
    int err_fd; /* our end of its stderr, -1 once at end of file */
    const uint8_t *body;
    size_t left;
    bool wrote_epipe; /* a write raised SIGPIPE */
    char line[EXEC_LINE_MAX + 1]; /* stderr's first line, NUL-terminated */
    size_t line_len;
    bool line_done;
} exec_talk_t;

static void
s_write_body (exec_talk_t *talk)
{
    while (talk->left > 0) {
        ssize_t n = write (talk->in_fd, talk->body, talk->left);
        if (n > 0) {
            talk->body += n;
            talk->left -= (size_t) n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* the pipe is full: poll says when there is room */
        /* EPIPE: the command closed its stdin or exited without reading
           all of it. Its exit status decides, not this. */
        if (n < 0 && errno == EPIPE)
            talk->wrote_epipe = true;
        break;
    }
    s_close (&talk->in_fd); /* all written, or no use: end of file */
}

static void
s_keep_line (exec_talk_t *talk, const char *data, size_t size)
{
    for (size_t i = 0; i < size && !talk->line_done; i++) {
        if (data[i] == '\n' || talk->line_len == EXEC_LINE_MAX) {
            talk->line_done = true;
            break;
        }
        talk->line[talk->line_len++] = data[i];
    }
    talk->line[talk->line_len] = '\0';
}

/* Reads what stderr has now; at end of file closes it. `budget`, when not
   NULL, bounds the bytes read: after the child exited, whatever it left
   running may write forever. */
static void
s_read_stderr (exec_talk_t *talk, size_t *budget)
{
    char buf[4096];
    while (talk->err_fd >= 0) {
        if (budget && *budget == 0)
            return;
        ssize_t n = read (talk->err_fd, buf, sizeof buf);
        if (n > 0) {
            s_keep_line (talk, buf, (size_t) n);
            if (budget)
                *budget = (size_t) n > *budget ? 0 : *budget - (size_t) n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        s_close (&talk->err_fd); /* end of file, or an error */
    }
}

/* Runs the conversation until the child exits, signalling its group when
   the deadline passes. Returns true when it timed out. */
static bool
s_converse (const exec_state_t *self, pid_t pid, int pidfd,
            exec_talk_t *talk)
{
    int64_t deadline = fanhub_now_ns () + self->timeout_ns;
    enum { RUNNING, TERMINATING, KILLED } phase = RUNNING;
    if (talk->left == 0)
        s_close (&talk->in_fd);
    while (!s_exited (pid)) {
        int64_t now = fanhub_now_ns ();
        if (phase != KILLED && now >= deadline) {
            s_close (&talk->in_fd);
            if (phase == RUNNING && self->grace_ns > 0) {
                s_signal_group (pid, SIGTERM);
                phase = TERMINATING;
                deadline = now + self->grace_ns;
            }
            else {
                s_signal_group (pid, SIGKILL);
                phase = KILLED;
            }
            continue;
        }
        struct pollfd fds[3];
        int nfds = 0;
        int in_at = -1, err_at = -1;
        if (talk->in_fd >= 0) {
            in_at = nfds;
            fds[nfds++] = (struct pollfd) { .fd = talk->in_fd,
                                            .events = POLLOUT };
        }
        if (talk->err_fd >= 0) {
            err_at = nfds;
            fds[nfds++] = (struct pollfd) { .fd = talk->err_fd,
                                            .events = POLLIN };
        }
        if (pidfd >= 0)
            fds[nfds++] = (struct pollfd) { .fd = pidfd, .events = POLLIN };
        int timeout = -1;
        if (phase != KILLED) {
            int64_t ms = (deadline - now + 999999) / 1000000;
            timeout = ms > INT_MAX ? INT_MAX : (int) ms;
        }
        if (pidfd < 0 && (timeout < 0 || timeout > EXEC_POLL_STEP_MS))
            timeout = EXEC_POLL_STEP_MS;
        if (poll (fds, (nfds_t) nfds, timeout) < 0) {
            if (errno == EINTR)
                continue;
            /* poll itself broke (ENOMEM): do not spin, wait in steps. */
            nanosleep (&(struct timespec) { 0, EXEC_POLL_STEP_MS * 1000000 },
                       NULL);
            continue;
        }
        if (in_at >= 0 && fds[in_at].revents)
            s_write_body (talk);
        if (err_at >= 0 && fds[err_at].revents)
            s_read_stderr (talk, NULL);
    }
    if (phase != RUNNING)
        s_signal_group (pid, SIGKILL); /* what it left behind, too */
    return phase != RUNNING;
}

/* A signal's name for the reason line, without strsignal's locale and
   thread-safety questions. */
static const char *
s_signal_name (int sig)
{
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    }
    return NULL;
}

/* Writes "what: first line of stderr" (or what alone) into the reason,
   with control characters of the line shown as '?'. */
static void
s_reason (exec_outcome_t *out, const exec_talk_t *talk, const char *what)
{
    char line[EXEC_LINE_MAX + 1];
    size_t n = talk->line_len;
    while (n > 0 && (talk->line[n - 1] == '\r' || talk->line[n - 1] == ' '))
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) talk->line[i];
        line[i] = c < 0x20 || c == 0x7F ? '?' : (char) c;
    }
    line[n] = '\0';
    if (n)
        snprintf (out->reason, sizeof out->reason, "%s: %s", what, line);
    else
        snprintf (out->reason, sizeof out->reason, "%s (nothing on stderr)",
                  what);
}

static void
s_run (const exec_state_t *self, const fanhub_msg_t *msg, exec_outcome_t *out)
{
    const fanhub_host_t *host = self->host;
    fanhub_bytes_t topic = host->msg_topic (msg);
    fanhub_bytes_t body = host->msg_body (msg);
    out->result = FANHUB_FAIL;
    out->reason[0] = '\0';

    /* The environment: the snapshot and the three of this message. */
    char seq_env[32];
    snprintf (seq_env, sizeof seq_env, "FANHUB_SEQ=%llu",
              (unsigned long long) host->msg_seq (msg));
    size_t topic_len = topic.size ? strnlen (topic.data, topic.size) : 0;
    char *topic_env = malloc (sizeof "FANHUB_TOPIC=" + topic_len);
    char **envp = malloc ((self->nenv + 4) * sizeof *envp);
    if (!topic_env || !envp) {
        free (topic_env);
        free (envp);
        out->result = FANHUB_RETRY;
        snprintf (out->reason, sizeof out->reason,
                  "cannot run: out of memory");
        return;
    }
    memcpy (topic_env, "FANHUB_TOPIC=", sizeof "FANHUB_TOPIC=" - 1);
    if (topic_len)
        memcpy (topic_env + sizeof "FANHUB_TOPIC=" - 1, topic.data, topic_len);
    topic_env[sizeof "FANHUB_TOPIC=" - 1 + topic_len] = '\0';
    if (self->nenv)
        memcpy (envp, self->env, self->nenv * sizeof *envp);
    envp[self->nenv] = topic_env;
    envp[self->nenv + 1] = seq_env;
    envp[self->nenv + 2] = self->consumer_env;
    envp[self->nenv + 3] = NULL;

    int in_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
    pid_t pid = -1;
    int rc = 0;
    if (s_pipe (in_pipe) != 0 || s_pipe (err_pipe) != 0)
        rc = errno;
    else if (fcntl (in_pipe[1], F_SETFL, O_NONBLOCK) != 0
             || fcntl (err_pipe[0], F_SETFL, O_NONBLOCK) != 0)
        rc = errno;
    else
        rc = s_spawn (self, envp, in_pipe[0], err_pipe[1], &pid);
    free (topic_env);
    free (envp);
    s_close (&in_pipe[0]);
    s_close (&err_pipe[1]);
    if (rc != 0) {
        s_close (&in_pipe[1]);
        s_close (&err_pipe[0]);
        /* Out of processes, descriptors or memory passes; a program that
           cannot be executed stays so. */
        bool transient = rc == EAGAIN || rc == ENOMEM || rc == EMFILE
                         || rc == ENFILE;
        out->result = transient ? FANHUB_RETRY : FANHUB_FAIL;
        snprintf (out->reason, sizeof out->reason, "cannot run %s: %s",
                  self->path, strerror (rc));
        return;
    }

    exec_talk_t talk = {
        .in_fd = in_pipe[1],
        .err_fd = err_pipe[0],
        .body = (const uint8_t *) body.data,
        .left = body.size,
    };
    int pidfd = s_pidfd (pid);

    /* SIGPIPE from writing to a command that stopped reading: blocked on
       this thread, and taken back below unless it was pending before. */
    sigset_t pipe_set, saved_mask, pending;
    sigemptyset (&pipe_set);
    sigaddset (&pipe_set, SIGPIPE);
    sigemptyset (&pending);
    sigpending (&pending);
    bool was_pending = sigismember (&pending, SIGPIPE) == 1;
    pthread_sigmask (SIG_BLOCK, &pipe_set, &saved_mask);

    bool timed_out = s_converse (self, pid, pidfd, &talk);

    if (talk.wrote_epipe && !was_pending) {
        struct timespec zero = { 0, 0 };
        while (sigtimedwait (&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask (SIG_SETMASK, &saved_mask, NULL);

    size_t budget = EXEC_DRAIN_MAX;
    s_read_stderr (&talk, &budget);
    s_close (&talk.in_fd);
    s_close (&talk.err_fd);
    if (pidfd >= 0)
        close (pidfd);

    int status = 0;
    pid_t reaped;
    while ((reaped = waitpid (pid, &status, 0)) < 0 && errno == EINTR)
        ;

    char what[128];
    if (timed_out) {
        snprintf (what, sizeof what, "timed out after %lld ms",
                  (long long) (self->timeout_ns / 1000000));
        s_reason (out, &talk, what);
        out->result = FANHUB_FAIL;
    }
    else if (reaped < 0) {
        /* Someone else reaped it: SIGCHLD set to SIG_IGN in the host. */
        snprintf (out->reason, sizeof out->reason,
                  "exit status unknown: waitpid: %s", strerror (errno));
        out->result = FANHUB_FAIL;
    }
    else if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        out->result = FANHUB_OK;
    else if (WIFEXITED (status)) {
        int code = WEXITSTATUS (status);
        snprintf (what, sizeof what, "exit status %d%s", code,
                  code == EXEC_EX_TEMPFAIL ? " (EX_TEMPFAIL)" : "");
        s_reason (out, &talk, what);
        out->result = code == EXEC_EX_TEMPFAIL ? FANHUB_RETRY : FANHUB_FAIL;
    }
    else {
        int sig = WIFSIGNALED (status) ? WTERMSIG (status) : 0;
        const char *name = s_signal_name (sig);
        if (name)
            snprintf (what, sizeof what, "killed by signal %d (%s)", sig,
                      name);
        else
            snprintf (what, sizeof what, "killed by signal %d", sig);
        s_reason (out, &talk, what);
        out->result = FANHUB_FAIL;
    }
}

/* -------------------------------------------------------------------------
   The failure log */

/* Takes one line's worth of credit when there is one. Credit grows by one
   line a second up to a burst of ten. */
static bool
s_take_credit (exec_state_t *self, int64_t now)
{
    int64_t credit = self->credit + (now - self->last_line);
    if (credit > EXEC_LOG_BURST_NS)
        credit = EXEC_LOG_BURST_NS;
    if (credit < EXEC_SECOND_NS)
        return false;
    self->credit = credit - EXEC_SECOND_NS;
    self->last_line = now;
    return true;
}

/* The topic for a log line: at most 200 bytes, cut at a character. */
static int
s_topic_len (fanhub_bytes_t topic)
{
    size_t n = topic.size;
    if (n > 200) {
        n = 200;
        while (n > 0 && (((const uint8_t *) topic.data)[n] & 0xC0) == 0x80)
            n--;
    }
    return (int) n;
}

static void
s_account (exec_state_t *self, const fanhub_msg_t *msg,
           const exec_outcome_t *out)
{
    pthread_mutex_lock (&self->lock);
    int64_t now = fanhub_now_ns ();
    if (out->result == FANHUB_OK) {
        if (self->failing && s_take_credit (self, now))
            self->host->log (self->ctx, FANHUB_LOG_INFO,
                             "command succeeds again after %llu failed "
                             "run%s",
                             (unsigned long long) self->streak,
                             self->streak == 1 ? "" : "s");
        self->failing = false;
        self->streak = 0;
    }
    else {
        bool starts = !self->failing;
        bool due = starts || now - self->last_line >= EXEC_SECOND_NS;
        if (due && s_take_credit (self, now)) {
            fanhub_bytes_t topic = self->host->msg_topic (msg);
            char more[64] = "";
            if (self->unlogged)
                snprintf (more, sizeof more, " (%llu failures not logged)",
                          (unsigned long long) self->unlogged);
            self->host->log (self->ctx, FANHUB_LOG_WARNING,
                             "message %llu (%.*s): %s%s%s",
                             (unsigned long long) self->host->msg_seq (msg),
                             s_topic_len (topic),
                             topic.size ? (const char *) topic.data : "",
                             out->reason,
                             out->result == FANHUB_RETRY ? "; answering RETRY"
                                                         : "",
                             more);
            self->unlogged = 0;
        }
        else
            self->unlogged++;
        self->failing = true;
        self->streak++;
    }
    pthread_mutex_unlock (&self->lock);
}

static fanhub_result_t
s_consume (void *state, const fanhub_msg_t *msg)
{
    exec_state_t *self = (exec_state_t *) state;
    exec_outcome_t out;
    s_run (self, msg, &out);
    s_account (self, msg, &out);
    if (out.result != FANHUB_OK) /* for the hub's log line and the dead letter */
        self->host->set_reason (self->ctx, "%s", out.reason);
    return out.result;
}

FANHUB_CONSUMER_DEFINE (s_desc, .name = "exec", .version = "1.0",
                        .flags = FANHUB_CONSUMER_THREAD_SAFE, .init = s_init, .consume = s_consume,
                        .options = s_options, .fini = s_fini, .check = s_check)
