/*  fs - directories and whole files. See fs.h. */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
fh_fs_mkdir_p (const char *dir, char *err, size_t errlen)
{
    char *path = strdup (dir);
    if (!path) {
        snprintf (err, errlen, "%s: out of memory", dir);
        errno = ENOMEM;
        return -1;
    }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir (path, 0750) != 0 && errno != EEXIST) {
            int error = errno;
            snprintf (err, errlen, "%s: cannot create directory: %s", path, strerror (error));
            free (path);
            errno = error;
            return -1;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    free (path);
    return 0;
}

int
fh_fs_mkdir_parent (const char *path, char *err, size_t errlen)
{
    const char *slash = strrchr (path, '/');
    if (!slash || slash == path)
        return 0;
    char *dir = strndup (path, (size_t) (slash - path));
    if (!dir) {
        snprintf (err, errlen, "%s: out of memory", path);
        errno = ENOMEM;
        return -1;
    }
    int rc = fh_fs_mkdir_p (dir, err, errlen);
    int error = errno;
    free (dir);
    errno = error;
    return rc;
}

int
fh_fs_fsync (int fd)
{
    int rc;
    do
        rc = fsync (fd);
    while (rc != 0 && errno == EINTR);
    return rc;
}

int
fh_fs_fdatasync (int fd)
{
    int rc;
    do
        rc = fdatasync (fd);
    while (rc != 0 && errno == EINTR);
    return rc;
}

int
fh_fs_sync_dir (const char *dir, int fd, char *err, size_t errlen)
{
    int own = fd < 0 ? open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    int use = fd < 0 ? own : fd;
    if (use < 0 || fh_fs_fsync (use) != 0) {
        int error = errno;
        snprintf (err, errlen, "%s: fsync of the directory: %s", dir, strerror (error));
        if (own >= 0)
            close (own);
        errno = error;
        return -1;
    }
    if (own >= 0)
        close (own);
    return 0;
}

char *
fh_fs_read_file (const char *path, size_t limit, size_t *size, char *err, size_t errlen)
{
    FILE *file = fopen (path, "rb");
    if (!file) {
        int error = errno;
        snprintf (err, errlen, "%s: cannot open: %s", path, strerror (error));
        errno = error;
        return NULL;
    }
    size_t len = 0, room = 4096;
    char *text = malloc (room);
    int error = text ? 0 : ENOMEM;
    while (!error) {
        if (len + 1 == room) {
            char *grown = room <= limit ? realloc (text, room * 2) : NULL;
            if (!grown) {
                error = room <= limit ? ENOMEM : EFBIG;
                break;
            }
            text = grown;
            room *= 2;
        }
        errno = 0;
        size_t got = fread (text + len, 1, room - len - 1, file);
        len += got;
        if (got == 0) {
            error = ferror (file) ? (errno ? errno : EIO) : 0;
            break;
        }
    }
    fclose (file);
    if (!error && len > limit)
        error = EFBIG;
    if (error) {
        if (error == EFBIG)
            snprintf (err, errlen, "%s: longer than %zu bytes", path, limit);
        else
            snprintf (err, errlen, "%s: cannot read: %s", path, strerror (error));
        free (text);
        errno = error;
        return NULL;
    }
    text[len] = '\0';
    if (size)
        *size = len;
    return text;
}
