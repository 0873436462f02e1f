/*  proc - one worker process: spawn, kill, reap, read its output lines.

    The child gets the socket's end on fd 3, /dev/null on stdin, a pipe
    each on stdout and stderr, and no other descriptor of the hub (which
    holds many without close-on-exec). It runs in a process group of its
    own, so a terminal's ^C reaches the hub only (which then quits its
    workers in order), and killing the group takes whatever the worker
    started with it. Its signal mask is empty and every signal has its
    default action: the hub blocks and ignores some, and both would be
    inherited across exec. posix_spawn (a vfork in glibc) keeps the start
    cheap beside a big hub.

    A process group does not hold what leaves it: a child that calls
    setsid, or one orphaned when the worker exits, outlived the worker and
    the hub. So each process is spawned with a mark of its own in its
    environment, FANHUB_WORKER_TAG=HUBPID.SERIAL, which every descendant
    inherits and which /proc/PID/environ shows for as long as it lives
    (what a process does to its environ later does not change it). When
    the worker ends (it exits, is restarted, or the hub stops),
    s_kill_tagged sends SIGKILL to every process carrying the mark and to
    every descendant of those or of the worker (by parent pid), round
    after round until none is left. Why not the kernel's other tools:
    PR_SET_CHILD_SUBREAPER would make the hub the parent of every orphan
    of every plugin's children, owing them a wait nobody else may do; a
    cgroup needs a delegated hierarchy the hub cannot count on; a pidfd
    follows one process, not what it starts. What escapes: a descendant
    that execs with its environment cleared and then is orphaned (its
    parent chain to the worker broken); run the hub under systemd
    (KillMode=control-group) for those.
*/
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np */

#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { FD_FLOOR = 10 }; /* our ends: never 0-3, so the child's dup2s never meet them */

static int
s_raise (int fd)
{
    if (fd < 0 || fd >= FD_FLOOR)
        return fd;
    int high = fcntl (fd, F_DUPFD_CLOEXEC, FD_FLOOR);
    int saved = errno;
    close (fd);
    errno = saved;
    return high;
}

static void
s_close (int *fd)
{
    if (*fd >= 0)
        close (*fd);
    *fd = -1;
}

void
proc_close (proc_t *p)
{
    s_close (&p->sock);
    s_close (&p->out);
    s_close (&p->err);
}

/* What one /proc scan saw of a process. */
typedef struct {
    pid_t pid, ppid;
    bool marked;
} s_seen_t;

/* Whether /proc/PID/environ holds the exact entry tag. */
static bool
s_has_tag (pid_t pid, const char *tag)
{
    char path[64];
    snprintf (path, sizeof path, "/proc/%d/environ", (int) pid);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false; /* gone, or another user's */
    size_t cap = 1 << 16, size = 0, len = strlen (tag);
    char *buf = malloc (cap + 1);
    ssize_t n = 0;
    while (buf && (n = read (fd, buf + size, cap - size)) > 0) {
        size += (size_t) n;
        if (size == cap) {
            char *more = cap < (1 << 24) ? realloc (buf, 2 * cap + 1) : NULL;
            if (!more)
                break;
            buf = more;
            cap *= 2;
        }
    }
    close (fd);
    bool found = false;
    for (size_t at = 0; buf && at < size && !found; at += strnlen (buf + at, size - at) + 1)
        found = size - at >= len + 1 ? memcmp (buf + at, tag, len + 1) == 0
                                     : size - at == len && memcmp (buf + at, tag, len) == 0;
    free (buf);
    return found;
}

/* Parent pid from /proc/PID/stat (after the command's last ')'), or -1
   (also for a zombie: dead already, and SIGKILL would "succeed"). */
static pid_t
s_ppid (pid_t pid)
{
    char path[64], text[1024];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read (fd, text, sizeof text - 1);
    close (fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    char *end = strrchr (text, ')');
    int ppid;
    char state;
    if (!end || sscanf (end + 1, " %c %d", &state, &ppid) != 2 || state == 'Z' || state == 'X')
        return -1;
    return (pid_t) ppid;
}

/* One round: SIGKILL to every process with the tag and to every
   descendant of those or of root (when > 0). How many were sent one. */
static size_t
s_kill_round (const char *tag, pid_t root)
{
    DIR *dir = opendir ("/proc");
    if (!dir)
        return 0;
    size_t count = 0, cap = 0;
    s_seen_t *seen = NULL;
    pid_t self = getpid ();
    for (struct dirent *entry; (entry = readdir (dir));) {
        char *end;
        long pid = strtol (entry->d_name, &end, 10);
        if (*end || pid <= 0 || (pid_t) pid == self)
            continue;
        if (count == cap) {
            s_seen_t *more = realloc (seen, (cap = cap ? 2 * cap : 256) * sizeof *seen);
            if (!more)
                break;
            seen = more;
        }
        pid_t ppid = s_ppid ((pid_t) pid);
        if (ppid < 0)
            continue; /* gone, or a zombie */
        seen[count++]
            = (s_seen_t){(pid_t) pid, ppid, (pid_t) pid == root || s_has_tag ((pid_t) pid, tag)};
    }
    closedir (dir);
    /* Descendants: marked parents mark their children, until none is new. */
    for (bool more = true; more;) {
        more = false;
        for (size_t i = 0; i < count; i++)
            for (size_t j = 0; !seen[i].marked && j < count; j++)
                if (seen[j].marked && seen[i].ppid == seen[j].pid)
                    seen[i].marked = more = true;
    }
    size_t killed = 0;
    for (size_t i = 0; i < count; i++)
        if (seen[i].marked && seen[i].pid != root && kill (seen[i].pid, SIGKILL) == 0)
            killed++;
    free (seen);
    return killed;
}

/* Everything p started, wherever it went (see the top of this file).
   Rounds again while a round killed some: one may have forked meanwhile. */
static void
s_kill_tagged (proc_t *p)
{
    if (!p->tag[0])
        return;
    for (int round = 0; round < 8 && s_kill_round (p->tag, p->pid); round++)
        ;
}

/* envp plus p's tag, made afresh (a serial of the process). */
static char **
s_tagged_envp (proc_t *p, char *const envp[])
{
    static atomic_uint_fast64_t serial;
    snprintf (p->tag, sizeof p->tag, "FANHUB_WORKER_TAG=%d.%llu", (int) getpid (),
              (unsigned long long) atomic_fetch_add (&serial, 1) + 1);
    size_t count = 0;
    while (envp[count])
        count++;
    char **out = calloc (count + 2, sizeof *out);
    if (out) {
        memcpy (out, envp, count * sizeof *out);
        out[count] = p->tag;
    }
    return out;
}

int
proc_spawn (proc_t *p, char *const argv[], char *const envp[], char *err, size_t errlen)
{
    int pair[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1};
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0 || pipe2 (out, O_CLOEXEC)
        || pipe2 (errp, O_CLOEXEC)) {
        snprintf (err, errlen, "cannot make its socket and pipes: %s", strerror (errno));
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        pair[i] = s_raise (pair[i]);
        out[i] = s_raise (out[i]);
        errp[i] = s_raise (errp[i]);
    }
    if (pair[0] < 0 || pair[1] < 0 || out[0] < 0 || out[1] < 0 || errp[0] < 0 || errp[1] < 0) {
        snprintf (err, errlen, "cannot move its descriptors: %s", strerror (errno));
        goto fail;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init (&actions);
    posix_spawnattr_init (&attr);
    posix_spawn_file_actions_addopen (&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2 (&actions, out[1], 1);
    posix_spawn_file_actions_adddup2 (&actions, errp[1], 2);
    posix_spawn_file_actions_adddup2 (&actions, pair[1], 3);
    posix_spawn_file_actions_addclosefrom_np (&actions, 4);
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setsigdefault (&attr, &all);
    posix_spawnattr_setpgroup (&attr, 0);
    posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
                                         | POSIX_SPAWN_SETPGROUP);
    pid_t pid;
    char **tagged = s_tagged_envp (p, envp);
    int rc = tagged ? posix_spawnp (&pid, argv[0], &actions, &attr, argv, tagged) : ENOMEM;
    free (tagged);
    posix_spawn_file_actions_destroy (&actions);
    posix_spawnattr_destroy (&attr);
    if (rc != 0) {
        snprintf (err, errlen, "cannot run %s: %s", argv[0], strerror (rc));
        goto fail;
    }
    close (pair[1]);
    close (out[1]);
    close (errp[1]);
    fcntl (pair[0], F_SETFL, O_NONBLOCK);
    fcntl (out[0], F_SETFL, O_NONBLOCK);
    fcntl (errp[0], F_SETFL, O_NONBLOCK);
    p->pid = p->last_pid = pid;
    p->status = -1;
    p->sock = pair[0];
    p->out = out[0];
    p->err = errp[0];
    p->in.size = p->outq.size = 0;
    p->out_line.size = p->err_line.size = 0;
    p->out_line.cut = p->err_line.cut = false;
    p->last_err[0] = '\0';
    p->in_flight = 0;
    p->running = 0;
    p->solo = false;
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        s_close (&pair[i]);
        s_close (&out[i]);
        s_close (&errp[i]);
    }
    return -1;
}

int
proc_try_reap (proc_t *p)
{
    if (p->pid <= 0)
        return -1;
    int status;
    pid_t got = waitpid (p->pid, &status, WNOHANG);
    if (got == p->pid) {
        p->pid = 0;
        p->status = status; /* for proc_kill */
        return status;
    }
    return -1;
}

int
proc_kill (proc_t *p)
{
    int status = p->status;
    p->status = -1;
    s_kill_tagged (p); /* before the worker: its children still name it */
    p->tag[0] = '\0';
    if (p->pid > 0) {
        /* The group while the leader is unreaped: its id cannot be reused. */
        kill (-p->pid, SIGKILL);
        kill (p->pid, SIGKILL);
        while (waitpid (p->pid, &status, 0) < 0 && errno == EINTR)
            ;
        p->pid = 0;
    }
    proc_close (p);
    return status;
}

bool
proc_read_lines (proc_t *p, int fd, proc_line_t *line,
                 void (*emit) (void *arg, proc_t *p, bool is_err, const char *line), void *arg)
{
    char chunk[8192];
    for (int reads = 0; reads < 16; reads++) {
        ssize_t n = read (fd, chunk, sizeof chunk);
        if (n == 0)
            return false;
        if (n < 0)
            return errno == EAGAIN || errno == EINTR;
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] == '\n') {
                line->data[line->size] = '\0';
                emit (arg, p, fd == p->err, line->data);
                line->size = 0;
                line->cut = false;
            }
            else if (line->size + 1 < sizeof line->data)
                line->data[line->size++] = chunk[i];
            else
                line->cut = true;
        }
    }
    return true;
}
