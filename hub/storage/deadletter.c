/*  deadletter - a consumer's dead-letter store. See deadletter.h.

    Files are addressed by path rather than through a held directory
    descriptor: the store is opened by the hub for its whole run and by
    short-lived commands, and adds are rare, so the extra path lookups cost
    nothing that matters. The mutex guards only the choice of IDs; two
    threads adding at once write different files.
*/
#include "deadletter.h"

#include "fs.h"

#include "spool_record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SUFFIX ".dl"
#define TMP_PREFIX ".tmp-"
#define STALE_TMP_SECONDS 3600
#define META_FIXED 24u

struct fh_deadletter {
    char *dir;
    char *consumer;
    pthread_mutex_t lock;
    uint64_t last_id;
};

bool
fh_deadletter_id_valid (const char *id)
{
    for (int i = 0; i < 16; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return id[16] == '\0';
}

/* "ID.dl" -> the ID's value; false for any other name. */
static bool
s_name_id (const char *name, uint64_t *id)
{
    if (strlen (name) != 16 + strlen (SUFFIX) || strcmp (name + 16, SUFFIX) != 0)
        return false;
    char text[FH_DEADLETTER_ID_SIZE];
    memcpy (text, name, 16);
    text[16] = '\0';
    if (!fh_deadletter_id_valid (text))
        return false;
    *id = strtoull (text, NULL, 16);
    return true;
}

fh_deadletter_t *
fh_deadletter_open (const char *dir, const char *consumer, bool create, char *err, size_t errlen)
{
    if (create && fh_fs_mkdir_p (dir, err, errlen) != 0)
        return NULL;
    fh_deadletter_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "%s: out of memory", dir);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    self->dir = strdup (dir);
    self->consumer = strdup (consumer ? consumer : "");
    if (!self->dir || !self->consumer) {
        snprintf (err, errlen, "%s: out of memory", dir);
        fh_deadletter_close (&self);
        return NULL;
    }
    if (!create)
        return self;
    /* IDs go on from the highest there is, whatever the clock says; and
       what an add cut short long ago goes. */
    DIR *listing = opendir (dir);
    if (!listing) {
        snprintf (err, errlen, "%s: cannot list: %s", dir, strerror (errno));
        fh_deadletter_close (&self);
        return NULL;
    }
    struct dirent *entry;
    time_t stale = time (NULL) - STALE_TMP_SECONDS;
    while ((entry = readdir (listing))) {
        uint64_t id;
        if (s_name_id (entry->d_name, &id) && id > self->last_id)
            self->last_id = id;
        struct stat st;
        if (strncmp (entry->d_name, TMP_PREFIX, strlen (TMP_PREFIX)) == 0
            && fstatat (dirfd (listing), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0
            && st.st_mtime < stale)
            unlinkat (dirfd (listing), entry->d_name, 0);
    }
    closedir (listing);
    return self;
}

void
fh_deadletter_close (fh_deadletter_t **self_p)
{
    fh_deadletter_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_destroy (&self->lock);
    free (self->dir);
    free (self->consumer);
    free (self);
    *self_p = NULL;
}

/* ---------------------------------------------------------------- add */

/* How many bytes of text fit in max without cutting a UTF-8 sequence. */
static size_t
s_cut (const char *text, size_t max)
{
    size_t len = strlen (text);
    if (len <= max)
        return len;
    len = max;
    while (len > 0 && ((uint8_t) text[len] & 0xC0) == 0x80)
        len--;
    return len;
}

static uint64_t
s_next_id (fh_deadletter_t *self)
{
    struct timespec now;
    clock_gettime (CLOCK_REALTIME, &now);
    uint64_t us = (uint64_t) now.tv_sec * 1000000 + (uint64_t) now.tv_nsec / 1000;
    pthread_mutex_lock (&self->lock);
    uint64_t id = us > self->last_id ? us : self->last_id + 1;
    self->last_id = id;
    pthread_mutex_unlock (&self->lock);
    return id;
}

/* Writes data to a new file at path and fsyncs it. */
static int
s_write_file (const char *path, const uint8_t *data, size_t size, char *err, size_t errlen)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
        snprintf (err, errlen, "%s: cannot create: %s", path, strerror (errno));
        return -1;
    }
    size_t done = 0;
    const char *what = NULL;
    while (done < size) {
        ssize_t n = write (fd, data + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            what = "write";
            break;
        }
        done += (size_t) n;
    }
    if (!what && fh_fs_fsync (fd) != 0)
        what = "fsync";
    int saved = errno;
    close (fd);
    if (what) {
        snprintf (err, errlen, "%s: %s: %s", path, what, strerror (saved));
        unlink (path);
        errno = saved;
        return -1;
    }
    return 0;
}

int
fh_deadletter_add (fh_deadletter_t *self, const fh_deadletter_item_t *item,
                   char id[FH_DEADLETTER_ID_SIZE], char *err, size_t errlen)
{
    if (item->frame_count == 0) {
        snprintf (err, errlen, "%s: a message of no frames", self->dir);
        errno = EINVAL;
        return -1;
    }
    size_t message = fh_record_message_size (item->frames, item->frame_count);
    if (message == 0) {
        snprintf (err, errlen, "%s: message too large for a dead letter", self->dir);
        errno = EMSGSIZE;
        return -1;
    }
    const char *reason = item->reason ? item->reason : "";
    size_t reason_len = s_cut (reason, FH_DEADLETTER_MAX_REASON);
    size_t consumer_len = s_cut (self->consumer, FH_DEADLETTER_MAX_CONSUMER);
    size_t meta = META_FIXED + 4 + reason_len + 4 + consumer_len;
    size_t total = FH_RECORD_HEADER + meta + FH_RECORD_HEADER + message;
    uint8_t *buf = malloc (total);
    if (!buf) {
        snprintf (err, errlen, "%s: out of memory", self->dir);
        errno = ENOMEM;
        return -1;
    }
    uint8_t *p = buf + FH_RECORD_HEADER;
    p[0] = FH_RECORD_TYPE_DEADLETTER;
    p[1] = p[2] = p[3] = 0;
    fh_put_u32 (p + 4, item->attempts);
    fh_put_u64 (p + 8, (uint64_t) item->first_attempt_ns);
    fh_put_u64 (p + 16, (uint64_t) item->last_attempt_ns);
    fh_put_u32 (p + 24, (uint32_t) reason_len);
    memcpy (p + 28, reason, reason_len);
    fh_put_u32 (p + 28 + reason_len, (uint32_t) consumer_len);
    memcpy (p + 32 + reason_len, self->consumer, consumer_len);
    fh_record_seal (buf, p, (uint32_t) meta);
    fh_record_encode_message (buf + FH_RECORD_HEADER + meta, message, item->seq,
                              item->received_wall_ns, item->frames, item->frame_count);

    size_t pathlen = strlen (self->dir) + 64;
    char *tmp = malloc (pathlen), *final = malloc (pathlen);
    int rc = -1;
    if (!tmp || !final) {
        snprintf (err, errlen, "%s: out of memory", self->dir);
        errno = ENOMEM;
        goto done;
    }
    /* link(2) never replaces: a name taken (by another process adding to
       the same store) means the next ID. */
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t value = s_next_id (self);
        snprintf (id, FH_DEADLETTER_ID_SIZE, "%016" PRIx64, value);
        snprintf (tmp, pathlen, "%s/" TMP_PREFIX "%s" SUFFIX, self->dir, id);
        snprintf (final, pathlen, "%s/%s" SUFFIX, self->dir, id);
        if (s_write_file (tmp, buf, total, err, errlen) != 0)
            goto done;
        int linked = link (tmp, final);
        int saved = errno;
        unlink (tmp);
        if (linked == 0) {
            rc = fh_fs_sync_dir (self->dir, -1, err, errlen);
            goto done;
        }
        if (saved != EEXIST) {
            snprintf (err, errlen, "%s: cannot create: %s", final, strerror (saved));
            errno = saved;
            goto done;
        }
    }
    snprintf (err, errlen, "%s: no free entry name", self->dir);
    errno = EEXIST;
done:;
    int saved = errno;
    free (tmp);
    free (final);
    free (buf);
    errno = saved;
    return rc;
}

/* ---------------------------------------------------------------- read */

void
fh_deadletter_entry_clear (fh_deadletter_entry_t *entry)
{
    free (entry->error);
    free (entry->reason);
    free (entry->consumer);
    free (entry->topic);
    free (entry->frames);
    free (entry->storage);
    memset (entry, 0, sizeof *entry);
}

void
fh_deadletter_entries_free (fh_deadletter_entry_t *entries, size_t count)
{
    for (size_t i = 0; i < count; i++)
        fh_deadletter_entry_clear (&entries[i]);
    free (entries);
}

static char *
s_strndup (const void *data, size_t size)
{
    char *text = malloc (size + 1);
    if (text) {
        if (size)
            memcpy (text, data, size);
        text[size] = '\0';
    }
    return text;
}

/* Reads a whole file. NULL with errno (ENOENT when missing). */
static uint8_t *
s_read_file (const char *path, size_t *size)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return NULL;
    if (fstat (fd, &st) != 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return NULL;
    }
    size_t want = (size_t) st.st_size;
    uint8_t *buf = malloc (want ? want : 1);
    size_t got = 0;
    while (buf && got < want) {
        ssize_t n = read (fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0) {
                int saved = errno;
                free (buf);
                close (fd);
                errno = saved;
                return NULL;
            }
            break; /* shorter than it said: the parse will find it torn */
        }
        got += (size_t) n;
    }
    if (!buf)
        errno = ENOMEM;
    close (fd);
    *size = got;
    return buf;
}

/* Decodes the file's bytes into entry; the reason of failure otherwise.
   With keep, entry takes buf and frames point into it. */
static const char *
s_decode (uint8_t *buf, size_t len, fh_deadletter_entry_t *entry, bool keep)
{
    size_t size;
    const uint8_t *p;
    uint32_t plen;
    if (len == 0)
        return "empty file";
    if (fh_record_parse (buf, len, true, &size, &p, &plen) != FH_RECORD_OK)
        return "metadata record torn or failing its checksum";
    if (plen < META_FIXED + 8 || p[0] != FH_RECORD_TYPE_DEADLETTER || p[1] || p[2] || p[3])
        return "not dead-letter metadata";
    uint32_t reason_len = fh_get_u32 (p + 24);
    if (reason_len > FH_DEADLETTER_MAX_REASON || plen < META_FIXED + 8 + reason_len)
        return "malformed metadata";
    uint32_t consumer_len = fh_get_u32 (p + 28 + reason_len);
    if (consumer_len > FH_DEADLETTER_MAX_CONSUMER
        || plen != META_FIXED + 8 + reason_len + consumer_len)
        return "malformed metadata";
    entry->attempts = fh_get_u32 (p + 4);
    entry->first_attempt_ns = (int64_t) fh_get_u64 (p + 8);
    entry->last_attempt_ns = (int64_t) fh_get_u64 (p + 16);
    entry->reason = s_strndup (p + 28, reason_len);
    entry->consumer = s_strndup (p + 32 + reason_len, consumer_len);

    size_t first = size;
    if (fh_record_parse (buf + first, len - first, true, &size, &p, &plen) != FH_RECORD_OK)
        return "message record torn or failing its checksum";
    if (first + size != len)
        return "bytes after the message";
    uint32_t count;
    if (!fh_record_decode_message (p, plen, &entry->seq, &entry->received_wall_ns, &count, NULL, 0))
        return "malformed message";
    fanhub_bytes_t *frames = malloc (count * sizeof *frames);
    if (!frames)
        return "out of memory";
    fh_record_decode_message (p, plen, &entry->seq, &entry->received_wall_ns, &count, frames,
                              count);
    entry->frame_count = count;
    entry->topic = s_strndup (frames[0].data, frames[0].size);
    entry->topic_len = frames[0].size;
    entry->body_bytes = count > 1 ? frames[1].size : 0;
    entry->total_bytes = 0;
    for (uint32_t i = 0; i < count; i++)
        entry->total_bytes += frames[i].size;
    if (!entry->reason || !entry->consumer || !entry->topic) {
        free (frames);
        return "out of memory";
    }
    if (keep) {
        entry->frames = frames;
        entry->storage = buf;
    }
    else
        free (frames);
    return NULL;
}

/* Reads entry id into *entry. -1 and errno when the file cannot be read
   or decoded; then only entry->id and entry->error are set. */
static int
s_load (fh_deadletter_t *self, const char *id, fh_deadletter_entry_t *entry, bool keep)
{
    memset (entry, 0, sizeof *entry);
    memcpy (entry->id, id, FH_DEADLETTER_ID_SIZE);
    size_t pathlen = strlen (self->dir) + 32;
    char *path = malloc (pathlen);
    if (!path) {
        entry->error = strdup ("out of memory");
        errno = ENOMEM;
        return -1;
    }
    snprintf (path, pathlen, "%s/%s" SUFFIX, self->dir, id);
    size_t len = 0;
    uint8_t *buf = s_read_file (path, &len);
    int saved = 0;
    const char *why = NULL;
    char detail[96];
    if (!buf) {
        saved = errno;
        why = saved == ENOENT ? "no such entry" : strerror (saved);
    }
    else {
        const char *damage = s_decode (buf, len, entry, keep);
        if (damage) {
            saved = strcmp (damage, "out of memory") == 0 ? ENOMEM : EBADMSG;
            snprintf (detail, sizeof detail, saved == ENOMEM ? "%s" : "damaged: %s", damage);
            why = detail;
        }
        if (damage || !keep)
            free (buf); /* else the entry holds it */
    }
    if (why) {
        fh_deadletter_entry_clear (entry);
        memcpy (entry->id, id, FH_DEADLETTER_ID_SIZE);
        entry->error = malloc (strlen (path) + strlen (why) + 3);
        if (entry->error)
            sprintf (entry->error, "%s: %s", path, why);
    }
    free (path);
    if (saved) {
        errno = saved;
        return -1;
    }
    return 0;
}

static int
s_id_cmp (const void *a, const void *b)
{
    return strcmp (((const fh_deadletter_entry_t *) a)->id,
                   ((const fh_deadletter_entry_t *) b)->id);
}

int
fh_deadletter_list (fh_deadletter_t *self, fh_deadletter_entry_t **entries, size_t *count,
                    char *err, size_t errlen)
{
    *entries = NULL;
    *count = 0;
    DIR *listing = opendir (self->dir);
    if (!listing && errno == ENOENT)
        return 0; /* nothing was ever dead-lettered */
    if (!listing) {
        snprintf (err, errlen, "%s: cannot list: %s", self->dir, strerror (errno));
        return -1;
    }
    fh_deadletter_entry_t *list = NULL;
    size_t n = 0, cap = 0;
    struct dirent *dirent;
    while ((dirent = readdir (listing))) {
        uint64_t value;
        if (!s_name_id (dirent->d_name, &value))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            fh_deadletter_entry_t *bigger = realloc (list, cap * sizeof *bigger);
            if (!bigger) {
                closedir (listing);
                fh_deadletter_entries_free (list, n);
                snprintf (err, errlen, "%s: out of memory", self->dir);
                return -1;
            }
            list = bigger;
        }
        char id[FH_DEADLETTER_ID_SIZE];
        memcpy (id, dirent->d_name, 16);
        id[16] = '\0';
        /* A damaged entry is listed with its error: the operator sees it.
           One removed since the directory was read (a replay) is not. */
        if (s_load (self, id, &list[n], false) != 0 && errno == ENOENT)
            fh_deadletter_entry_clear (&list[n]);
        else
            n++;
    }
    closedir (listing);
    if (n)
        qsort (list, n, sizeof *list, s_id_cmp);
    *entries = list;
    *count = n;
    return 0;
}

int
fh_deadletter_load (fh_deadletter_t *self, const char *id, fh_deadletter_entry_t *entry, char *err,
                    size_t errlen)
{
    if (!fh_deadletter_id_valid (id)) {
        memset (entry, 0, sizeof *entry);
        snprintf (err, errlen, "%s: '%s' is not an entry ID (16 hex digits)", self->dir, id);
        errno = EINVAL;
        return -1;
    }
    if (s_load (self, id, entry, true) == 0)
        return 0;
    int saved = errno;
    snprintf (err, errlen, "%s", entry->error ? entry->error : "out of memory");
    fh_deadletter_entry_clear (entry);
    errno = saved;
    return -1;
}

int
fh_deadletter_remove (fh_deadletter_t *self, const char *id, char *err, size_t errlen)
{
    if (!fh_deadletter_id_valid (id)) {
        snprintf (err, errlen, "%s: '%s' is not an entry ID (16 hex digits)", self->dir, id);
        errno = EINVAL;
        return -1;
    }
    size_t pathlen = strlen (self->dir) + 32;
    char *path = malloc (pathlen);
    if (!path) {
        snprintf (err, errlen, "%s: out of memory", self->dir);
        errno = ENOMEM;
        return -1;
    }
    snprintf (path, pathlen, "%s/%s" SUFFIX, self->dir, id);
    int rc = unlink (path);
    if (rc != 0) {
        int saved = errno;
        snprintf (err, errlen, "%s: %s", path,
                  saved == ENOENT ? "no such entry" : strerror (saved));
        errno = saved;
    }
    free (path);
    if (rc != 0)
        return -1;
    return fh_fs_sync_dir (self->dir, -1, err, errlen);
}
