/*  control_path - where the control socket lives, and who may own it.
    See control_path.h. */
#include "control_path.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

void
fh_control_path_private_dir (char *buf, size_t size)
{
    /* Root's is /run/fanhub-0, never the packages' /run/fanhub: that one
       belongs to the fanhub user (0750), and a hub run by hand as root
       beside the packaged one would be refused there. */
    uid_t uid = geteuid ();
    if (uid == 0)
        snprintf (buf, size, "/run/fanhub-0");
    else
        snprintf (buf, size, "/tmp/fanhub-%lu", (unsigned long) uid);
}

/* "uid N (name)" for messages. */
static const char *
s_who (uid_t uid, char *buf, size_t size)
{
    struct passwd *pw = getpwuid (uid);
    if (pw && pw->pw_name)
        snprintf (buf, size, "uid %lu (%s)", (unsigned long) uid, pw->pw_name);
    else
        snprintf (buf, size, "uid %lu", (unsigned long) uid);
    return buf;
}

/* The directory of path, made 0700 when missing, and checked. */
static int
s_prepare_dir (const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (!slash)
        snprintf (dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    char private_dir[PATH_MAX];
    fh_control_path_private_dir (private_dir, sizeof private_dir);
    /* Strict only where the default would put it: with a runtime
       directory set (systemd's /run/fanhub, 0750, say), the operator
       chose the directory. */
    const char *runtime = getenv ("RUNTIME_DIRECTORY"), *xdg = getenv ("XDG_RUNTIME_DIR");
    bool private = strcmp (dir, private_dir) == 0 && !(runtime && *runtime) && !(xdg && *xdg);
    if (mkdir (dir, 0700) != 0 && errno != EEXIST) {
        snprintf (err, errlen, "control: cannot create directory %s: %s", dir, strerror (errno));
        return -1;
    }
    /* The private directory is not followed through a symlink: whoever
       made the link would choose where the socket goes. */
    struct stat st;
    if ((private ? lstat (dir, &st) : stat (dir, &st)) != 0) {
        snprintf (err, errlen, "control: cannot check directory %s: %s", dir, strerror (errno));
        return -1;
    }
    char who[128];
    uid_t me = geteuid ();
    if (!S_ISDIR (st.st_mode)) {
        snprintf (err, errlen,
                  "control: %s is not a directory (%s); refusing to put the "
                  "control socket there",
                  dir, S_ISLNK (st.st_mode) ? "a symbolic link" : "something else");
        return -1;
    }
    if (private && (st.st_uid != me || (st.st_mode & 077) != 0)) {
        snprintf (err, errlen,
                  "control: the private directory %s belongs to %s with mode %04o; it must be "
                  "this hub's user's (%lu) with mode 0700: remove it, or set control: (or "
                  "RUNTIME_DIRECTORY)",
                  dir, s_who (st.st_uid, who, sizeof who), (unsigned) (st.st_mode & 07777),
                  (unsigned long) me);
        return -1;
    }
    if (st.st_uid != me && st.st_uid != 0) {
        snprintf (err, errlen,
                  "control: directory %s belongs to %s, not to this hub's user or "
                  "root; refusing to put the control socket there",
                  dir, s_who (st.st_uid, who, sizeof who));
        return -1;
    }
    if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
        snprintf (err, errlen,
                  "control: directory %s (mode %04o) is writable by other users "
                  "and not sticky: they could replace the control socket; use a directory "
                  "only this hub's user can write",
                  dir, (unsigned) (st.st_mode & 07777));
        return -1;
    }
    return 0;
}

int
fh_control_path_prepare (const char *path, bool *stale, char *err, size_t errlen)
{
    *stale = false;
    if (s_prepare_dir (path, err, errlen) != 0)
        return -1;
    struct stat st;
    if (lstat (path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        snprintf (err, errlen, "control: cannot check %s: %s", path, strerror (errno));
        return -1;
    }
    char who[128];
    if (!S_ISSOCK (st.st_mode)) {
        snprintf (err, errlen,
                  "control: %s exists and is not a socket; refusing to replace "
                  "it (remove it, or choose another control:)",
                  path);
        return -1;
    }
    if (st.st_uid != geteuid ()) {
        snprintf (err, errlen,
                  "control: %s is a socket of %s, not of this hub's user; "
                  "refusing to replace it",
                  path, s_who (st.st_uid, who, sizeof who));
        return -1;
    }
    *stale = true;
    return 0;
}

static char s_bound[256];

const char *
fh_control_path_bound (void)
{
    return s_bound;
}

int
fh_control_path_bind (void *socket, const char *endpoint)
{
    mode_t old = umask (0117);
    int rc = zmq_bind (socket, endpoint);
    int error = zmq_errno ();
    umask (old);
    /* Only a port the kernel chose is read back: any other endpoint stays
       as written (libzmq would resolve localhost, for one). */
    const char *port = strrchr (endpoint, ':');
    bool chosen = strncmp (endpoint, "tcp://", 6) == 0 && port
                  && (strcmp (port, ":*") == 0 || strcmp (port, ":0") == 0);
    size_t size = sizeof s_bound;
    if (rc == 0
        && (!chosen || zmq_getsockopt (socket, ZMQ_LAST_ENDPOINT, s_bound, &size) != 0
            || !s_bound[0]))
        snprintf (s_bound, sizeof s_bound, "%s", endpoint);
    errno = error;
    return rc;
}

/* The user FANHUB_CONTROL_USER names (a name or a number), or -1. */
static long
s_expected_user (void)
{
    const char *name = getenv ("FANHUB_CONTROL_USER");
    if (!name || !*name)
        return -1;
    char *end;
    long uid = strtol (name, &end, 10);
    if (*end == '\0' && uid >= 0)
        return uid;
    struct passwd *pw = getpwnam (name);
    return pw ? (long) pw->pw_uid : -1;
}

/* True when path is missing and path.busy is a socket: the hub hides it. */
static bool
s_hidden (const char *path)
{
    char busy[PATH_MAX];
    struct stat st;
    int n = snprintf (busy, sizeof busy, "%s.busy", path);
    return n > 0 && (size_t) n < sizeof busy && lstat (path, &st) != 0 && errno == ENOENT
           && lstat (busy, &st) == 0 && S_ISSOCK (st.st_mode);
}

int
fh_control_path_wait_shown (const char *path, int wait_ms)
{
    int waited = 0;
    while (waited < wait_ms && s_hidden (path)) {
        struct timespec pause = {0, 20 * 1000000};
        nanosleep (&pause, NULL);
        waited += 20;
    }
    return waited;
}

int
fh_control_path_check_owner (const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (lstat (path, &st) != 0) {
        int error = errno;
        if (s_hidden (path))
            snprintf (err, errlen,
                      "ipc://%s is renamed %s.busy for now: the hub has as many control clients "
                      "as its descriptors allow (hub.control_refused); try again when one has "
                      "left",
                      path, path);
        else
            snprintf (err, errlen, "ipc://%s: %s: is the hub running, with this control endpoint?",
                      path, strerror (error));
        return -1;
    }
    if (!S_ISSOCK (st.st_mode)) {
        snprintf (err, errlen, "ipc://%s is not a socket: not a hub's control endpoint", path);
        return -1;
    }
    uid_t me = geteuid ();
    long expected = s_expected_user ();
    if (st.st_uid != me && st.st_uid != 0 && (long) st.st_uid != expected) {
        char who[128], mine[128];
        snprintf (err, errlen,
                  "ipc://%s belongs to %s, not to you (%s) or root: refusing to talk to it "
                  "(another user may have taken the path; for a hub that runs as another "
                  "user, name it in FANHUB_CONTROL_USER)",
                  path, s_who (st.st_uid, who, sizeof who), s_who (me, mine, sizeof mine));
        return -1;
    }
    return 0;
}
