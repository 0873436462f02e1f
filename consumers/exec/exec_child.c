/*  exec_child - running the command once. See exec.c for the contract
    (the child's descriptors, signals and process group; the conversation)
    and exec_internal.h for how the files share the work. */
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np, sigabbrev_np */

#include "exec_internal.h"

#include <fanhub/sdk.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* glibc 2.34 brought posix_spawn_file_actions_addclosefrom_np; elsewhere
   the child is made with fork and closes the descriptors itself. */
#if defined(__GLIBC__) && !defined(EXEC_FORCE_FORK)                                                \
    && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define EXEC_HAVE_CLOSEFROM_NP 1
#endif

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
s_spawn (const exec_state_t *self, char **envp, int in_fd, int err_fd, pid_t *pid)
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
        rc = posix_spawn_file_actions_addopen (&actions, 1, "/dev/null", O_WRONLY, 0);
    else if (!rc && self->out == EXEC_STDOUT_STDERR)
        rc = posix_spawn_file_actions_adddup2 (&actions, 2, 1);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2 (&actions, err_fd, 2);
    if (!rc)
        rc = posix_spawn_file_actions_addclosefrom_np (&actions, 3);
    if (!rc)
        rc = posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK
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
s_spawn (const exec_state_t *self, char **envp, int in_fd, int err_fd, pid_t *pid)
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
            closed = (status[1] == 3 || syscall (SYS_close_range, 3, status[1] - 1, 0) == 0)
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
    int in_fd;  /* our end of its stdin, -1 once closed */
    int err_fd; /* our end of its stderr, -1 once at end of file */
    const uint8_t *body;
    size_t left;
    bool wrote_epipe;             /* a write raised SIGPIPE */
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
s_converse (const exec_state_t *self, pid_t pid, int pidfd, exec_talk_t *talk)
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
            fds[nfds++] = (struct pollfd){.fd = talk->in_fd, .events = POLLOUT};
        }
        if (talk->err_fd >= 0) {
            err_at = nfds;
            fds[nfds++] = (struct pollfd){.fd = talk->err_fd, .events = POLLIN};
        }
        if (pidfd >= 0)
            fds[nfds++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
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
            nanosleep (&(struct timespec){0, EXEC_POLL_STEP_MS * 1000000}, NULL);
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
        fanhub_utf8_format (out->reason, sizeof out->reason, "%s: %s", what, line);
    else
        snprintf (out->reason, sizeof out->reason, "%s (nothing on stderr)", what);
}

/* The environment of one run: the snapshot at init and the three
   variables of this message. envp and *topic_env are malloc'd (the
   strings but topic_env are borrowed); NULL when out of memory. */
static char **
s_environment (const exec_state_t *self, const fanhub_msg_t *msg, char seq_env[32],
               char **topic_env)
{
    const fanhub_host_t *host = self->host;
    fanhub_bytes_t topic = host->msg_topic (msg);
    snprintf (seq_env, 32, "FANHUB_SEQ=%llu", (unsigned long long) host->msg_seq (msg));
    size_t topic_len = topic.size ? strnlen (topic.data, topic.size) : 0;
    size_t prefix = sizeof "FANHUB_TOPIC=" - 1;
    *topic_env = malloc (prefix + topic_len + 1);
    char **envp = malloc ((self->nenv + 4) * sizeof *envp);
    if (!*topic_env || !envp) {
        free (*topic_env);
        free (envp);
        *topic_env = NULL;
        return NULL;
    }
    memcpy (*topic_env, "FANHUB_TOPIC=", prefix);
    if (topic_len)
        memcpy (*topic_env + prefix, topic.data, topic_len);
    (*topic_env)[prefix + topic_len] = '\0';
    if (self->nenv)
        memcpy (envp, self->env, self->nenv * sizeof *envp);
    envp[self->nenv] = *topic_env;
    envp[self->nenv + 1] = seq_env;
    envp[self->nenv + 2] = self->consumer_env;
    envp[self->nenv + 3] = NULL;
    return envp;
}

/* Makes the pipes and starts the child: 0, with our ends in *in_w and
   *err_r, or -1 with the outcome written. */
static int
s_start (const exec_state_t *self, const fanhub_msg_t *msg, pid_t *pid, int *in_w, int *err_r,
         exec_outcome_t *out)
{
    char seq_env[32];
    char *topic_env = NULL;
    char **envp = s_environment (self, msg, seq_env, &topic_env);
    if (!envp) {
        out->result = FANHUB_RETRY;
        snprintf (out->reason, sizeof out->reason, "cannot run: out of memory");
        return -1;
    }
    int in_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    int rc = 0;
    if (s_pipe (in_pipe) != 0 || s_pipe (err_pipe) != 0)
        rc = errno;
    else if (fcntl (in_pipe[1], F_SETFL, O_NONBLOCK) != 0
             || fcntl (err_pipe[0], F_SETFL, O_NONBLOCK) != 0)
        rc = errno;
    else
        rc = s_spawn (self, envp, in_pipe[0], err_pipe[1], pid);
    free (topic_env);
    free (envp);
    s_close (&in_pipe[0]);
    s_close (&err_pipe[1]);
    *in_w = in_pipe[1];
    *err_r = err_pipe[0];
    if (rc == 0)
        return 0;
    s_close (in_w);
    s_close (err_r);
    /* Out of processes, descriptors or memory passes; a program that
       cannot be executed stays so. */
    bool transient = rc == EAGAIN || rc == ENOMEM || rc == EMFILE || rc == ENFILE;
    out->result = transient ? FANHUB_RETRY : FANHUB_FAIL;
    snprintf (out->reason, sizeof out->reason, "cannot run %s: %s", self->path, strerror (rc));
    return -1;
}

/* The conversation with SIGPIPE blocked on this thread: one raised by
   writing to a command that stopped reading is taken back, unless it was
   pending before. Returns true when the run timed out. */
static bool
s_converse_quietly (const exec_state_t *self, pid_t pid, int pidfd, exec_talk_t *talk)
{
    sigset_t pipe_set, saved_mask, pending;
    sigemptyset (&pipe_set);
    sigaddset (&pipe_set, SIGPIPE);
    sigemptyset (&pending);
    sigpending (&pending);
    bool was_pending = sigismember (&pending, SIGPIPE) == 1;
    pthread_sigmask (SIG_BLOCK, &pipe_set, &saved_mask);
    bool timed_out = s_converse (self, pid, pidfd, talk);
    if (talk->wrote_epipe && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait (&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask (SIG_SETMASK, &saved_mask, NULL);
    return timed_out;
}

/* The outcome from how the child ended. */
static void
s_verdict (const exec_state_t *self, const exec_talk_t *talk, bool timed_out, pid_t reaped,
           int status, exec_outcome_t *out)
{
    char what[128];
    out->result = FANHUB_FAIL;
    if (timed_out) {
        snprintf (what, sizeof what, "timed out after %lld ms",
                  (long long) (self->timeout_ns / 1000000));
        s_reason (out, talk, what);
    }
    else if (reaped < 0) /* someone else reaped it: SIGCHLD set to SIG_IGN in the host */
        snprintf (out->reason, sizeof out->reason, "exit status unknown: waitpid: %s",
                  strerror (errno));
    else if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
        out->result = FANHUB_OK;
    else if (WIFEXITED (status)) {
        int code = WEXITSTATUS (status);
        snprintf (what, sizeof what, "exit status %d%s", code,
                  code == EXEC_EX_TEMPFAIL ? " (EX_TEMPFAIL)" : "");
        s_reason (out, talk, what);
        if (code == EXEC_EX_TEMPFAIL)
            out->result = FANHUB_RETRY;
    }
    else {
        int sig = WIFSIGNALED (status) ? WTERMSIG (status) : 0;
        const char *name = sigabbrev_np (sig); /* "SEGV", without strsignal's locale */
        if (name)
            snprintf (what, sizeof what, "killed by signal %d (SIG%s)", sig, name);
        else
            snprintf (what, sizeof what, "killed by signal %d", sig);
        s_reason (out, talk, what);
    }
}

void
exec_run (const exec_state_t *self, const fanhub_msg_t *msg, exec_outcome_t *out)
{
    out->result = FANHUB_FAIL;
    out->reason[0] = '\0';
    pid_t pid = -1;
    int in_w = -1, err_r = -1;
    if (s_start (self, msg, &pid, &in_w, &err_r, out) != 0)
        return;
    fanhub_bytes_t body = self->host->msg_body (msg);
    exec_talk_t talk = {
        .in_fd = in_w,
        .err_fd = err_r,
        .body = (const uint8_t *) body.data,
        .left = body.size,
    };
    int pidfd = s_pidfd (pid);
    bool timed_out = s_converse_quietly (self, pid, pidfd, &talk);
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
    s_verdict (self, &talk, timed_out, reaped, status, out);
}
