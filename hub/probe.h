/*  probe - would creating this file or directory work? Asked without
    creating, opening or locking anything, for `fanhub check`.

    The answers come from stat(2) and faccessat(2) with the effective ids
    (AT_EACCESS), so they say what the permission bits say; a read-only
    mount, a full disk or a sandbox (systemd's ProtectSystem=) can still
    refuse at run time. Header-only so that plugins built like outside
    plugins can use it without linking the hub.
*/
#ifndef FH_PROBE_H_INCLUDED
#define FH_PROBE_H_INCLUDED

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The deepest existing ancestor of path (path itself excluded) into
   ancestor: "." for a relative path whose first part is missing. */
static inline void
fh_probe_existing_ancestor (const char *path, char *ancestor, size_t size)
{
    snprintf (ancestor, size, "%s", path);
    for (;;) {
        char *slash = strrchr (ancestor, '/');
        while (slash && slash > ancestor && slash[1] == '\0') { /* trailing '/' */
            *slash = '\0';
            slash = strrchr (ancestor, '/');
        }
        if (!slash) {
            snprintf (ancestor, size, ".");
            return;
        }
        if (slash == ancestor) {
            ancestor[1] = '\0'; /* "/" */
            return;
        }
        *slash = '\0';
        struct stat st;
        if (stat (ancestor, &st) == 0)
            return;
    }
}

/* 0 when a directory one may write into is at path, or can be made there
   with its missing parents (then *exists is false); else -1 with why,
   e.g. "/var/log is not writable". */
static inline int
fh_probe_directory (const char *path, bool *exists, char *why, size_t whylen)
{
    struct stat st;
    *exists = stat (path, &st) == 0;
    const char *target = path;
    char ancestor[PATH_MAX];
    if (!*exists) {
        /* ENOTDIR: a file where a parent should be; said below by name. */
        if (errno != ENOENT && errno != ENOTDIR) {
            snprintf (why, whylen, "%s: %s", path, strerror (errno));
            return -1;
        }
        fh_probe_existing_ancestor (path, ancestor, sizeof ancestor);
        target = ancestor;
        if (stat (target, &st) != 0) {
            snprintf (why, whylen, "%s: %s", target, strerror (errno));
            return -1;
        }
    }
    if (!S_ISDIR (st.st_mode)) {
        snprintf (why, whylen, "%s is not a directory", target);
        return -1;
    }
    if (faccessat (AT_FDCWD, target, W_OK | X_OK, AT_EACCESS) != 0) {
        snprintf (why, whylen, "%s is not writable: %s", target, strerror (errno));
        return -1;
    }
    return 0;
}

/* 0 when open (path, O_WRONLY | O_CREAT) would work: the file is there
   and writable, or its directory is there and writable (*exists tells
   which); else -1 with why, in open(2)'s words where it has them. */
static inline int
fh_probe_file (const char *path, bool *exists, char *why, size_t whylen)
{
    struct stat st;
    *exists = stat (path, &st) == 0;
    if (*exists) {
        if (S_ISDIR (st.st_mode)) {
            snprintf (why, whylen, "%s", strerror (EISDIR));
            return -1;
        }
        if (faccessat (AT_FDCWD, path, W_OK, AT_EACCESS) != 0) {
            snprintf (why, whylen, "%s", strerror (errno));
            return -1;
        }
        return 0;
    }
    if (errno != ENOENT && errno != ENOTDIR) {
        snprintf (why, whylen, "%s", strerror (errno));
        return -1;
    }
    char dir[PATH_MAX];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (!slash)
        snprintf (dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat (dir, &st) != 0) {
        snprintf (why, whylen, "%s (directory %s)", strerror (errno), dir);
        return -1;
    }
    if (!S_ISDIR (st.st_mode)) {
        snprintf (why, whylen, "%s (%s)", strerror (ENOTDIR), dir);
        return -1;
    }
    if (faccessat (AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
        snprintf (why, whylen, "%s (directory %s)", strerror (errno), dir);
        return -1;
    }
    return 0;
}

#endif
