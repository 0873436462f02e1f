/*  fs - the file-system steps the hub repeats: making a directory with its
    parents, syncing a directory, reading a whole file.

    Every function answers 0 (or a result) on success and -1 (or NULL)
    with one line in err that names the path and says what failed, e.g.
    "/var/lib/fanhub/spool: cannot create directory: Permission denied";
    errno is kept from the failing call.
*/
#ifndef FH_FS_H_INCLUDED
#define FH_FS_H_INCLUDED

#include <stddef.h>

/* mkdir -p: dir and any missing parent, mode 0750 (less the umask). */
int fh_fs_mkdir_p (const char *dir, char *err, size_t errlen);

/* mkdir -p for the directory a file will be created in (path up to its
   last '/'; nothing for a bare name or one right under '/'). */
int fh_fs_mkdir_parent (const char *path, char *err, size_t errlen);

/* fsync and fdatasync, tried again when interrupted (EINTR): an
   interrupted sync is not a failed one (fault injection found a stop
   that exited 1 over it). 0, or -1 with errno. */
int fh_fs_fsync (int fd);
int fh_fs_fdatasync (int fd);

/* fsync of a directory, so that names created, renamed or removed in it
   survive a machine crash. With fd < 0 the directory is opened (and
   closed) here; else fd is an open descriptor of dir. */
int fh_fs_sync_dir (const char *dir, int fd, char *err, size_t errlen);

/* The whole file, NUL-terminated (malloc'd; *size, when not NULL, gets
   its length without the NUL). Reads to the end, so it works for /proc
   files whose size says 0. A file longer than limit bytes is refused. */
char *fh_fs_read_file (const char *path, size_t limit, size_t *size, char *err, size_t errlen);

#endif
