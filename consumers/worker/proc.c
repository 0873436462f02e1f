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
*/
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np */

#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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
    int rc = posix_spawnp (&pid, argv[0], &actions, &attr, argv, envp);
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
    p->pid = pid;
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
