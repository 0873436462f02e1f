/*  cmd_dead_letter - `fanhub dead-letter`: a consumer's dead letters.

    list and show read the store offline (state_dir/CONSUMER/dead-letter,
    deadletter.h): they need neither a running hub nor its lock, and they
    never change the store. An entry that cannot be read is shown with its
    error and makes the exit status 1; the others are shown all the same.
    list without a consumer sums up every consumer of the state directory:
    the configuration's, then any other directory there with dead letters
    (a consumer since removed from the file).
*/
#include "cli.h"
#include "commands.h"
#include "config.h"
#include "control.h"
#include "deadletter.h"
#include "fedmsg.h"
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fanhub/sdk.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TOPIC_COLUMN_MAX 60

enum { S_OPT_STATE_DIR = FH_CLI_LONG_ONLY, S_OPT_JSON, S_OPT_ID };

static const fh_cli_option_t s_options[] = {
    {'c', "config", "FILE",
     "take state_dir from this configuration\n"
     "(default: the built-in default configuration)"},
    {S_OPT_STATE_DIR, "state-dir", "DIR", "the state directory itself"},
    {S_OPT_JSON, "json", NULL,
     "list: one JSON object per line; show: one JSON\n"
     "object, the body as \"body\" (UTF-8) or\n"
     "\"body_base64\""},
    {S_OPT_ID, "id", "ID", "replay: only this entry (repeatable, at most 256)"},
    FH_CLI_CURVE_OPTIONS,
    {0, NULL, NULL, NULL},
};

static const fh_cli_command_t s_command = {
    "dead-letter",
    "list [-c FILE | --state-dir DIR] [--json] [CONSUMER]\n"
    "show [-c FILE | --state-dir DIR] [--json] CONSUMER ID\n"
    "replay [-c FILE] [--id ID]... CONSUMER",
    "A consumer's dead letters: messages it failed (FANHUB_FAIL) or gave up\n"
    "on (retries used up), kept in STATE_DIR/CONSUMER/dead-letter/ with the\n"
    "reason, the number of attempts and when the first and last were made.\n"
    "Reads the store directly: the hub may be running or not.\n"
    "\n"
    "  list   one line per entry, oldest first: ID, hub sequence number,\n"
    "         topic, body size in bytes, attempts, first and last attempt\n"
    "         (RFC 3339, UTC), reason; without CONSUMER, one line per\n"
    "         consumer: how many, the oldest and newest (last attempt)\n"
    "  show   one entry's metadata, a blank line, then its body as stored\n"
    "  replay puts entries (all, or each --id) back in front of the consumer:\n"
    "         into the running hub through its control socket, or, when no hub\n"
    "         runs, into the consumer's spool for the next start. An entry is\n"
    "         removed only once the hub (or the spool) has taken it. Fix the\n"
    "         cause of the failure first.",
    s_options,
    "Exit status: 0 ok, 1 an entry could not be read (or no such entry),\n"
    "2 bad usage or configuration.",
};

/* RFC 3339 in UTC, with `digits` fraction digits (3 or 9); "-" for 0. */
static void
s_rfc3339 (int64_t ns, int digits, char *out, size_t size)
{
    char text[FANHUB_RFC3339_SIZE];
    if (ns != 0)
        fanhub_rfc3339 (text, ns, digits);
    snprintf (out, size, "%s", ns != 0 ? text : "-");
}

/* Text for a terminal: control bytes become '?', and at most max bytes
   (then "..."). */
static void
s_printable (const char *text, size_t len, size_t max, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 4 < size; i++) {
        if (i == max) {
            memcpy (out + n, "...", 3);
            n += 3;
            break;
        }
        unsigned char c = (unsigned char) text[i];
        out[n++] = c < 0x20 || c == 0x7f ? '?' : (char) c;
    }
    out[n] = '\0';
}

/* A JSON string of bytes that should be UTF-8; when they are not, the
   bytes above ASCII become '?'. */
static json_t *
s_json_text (const char *text, size_t len)
{
    if (fanhub_utf8_valid (text, len))
        return json_stringn (text, len);
    char *copy = malloc (len + 1);
    if (!copy)
        return NULL;
    for (size_t i = 0; i < len; i++)
        copy[i] = (unsigned char) text[i] < 0x80 ? text[i] : '?';
    json_t *value = json_stringn (copy, len);
    free (copy);
    return value;
}

static json_t *
s_json_time (int64_t ns)
{
    if (ns == 0)
        return json_null ();
    char text[64];
    s_rfc3339 (ns, 9, text, sizeof text);
    return json_string (text);
}

/* The msg_id of an entry's body (read from its file: a list has no
   bodies), or "" when it has none. */
static void
s_msg_id (fh_deadletter_t *store, const fh_deadletter_entry_t *e, char *id, size_t size)
{
    id[0] = '\0';
    fh_deadletter_entry_t full;
    char err[256];
    if (e->error || fh_deadletter_load (store, e->id, &full, err, sizeof err) != 0)
        return;
    if (full.frame_count > 1)
        fh_fedmsg_msg_id (full.frames[1].data, full.frames[1].size, id, size);
    fh_deadletter_entry_clear (&full);
}

static json_t *
s_entry_json (const fh_deadletter_entry_t *e, const char *msg_id)
{
    json_t *obj = json_object ();
    json_object_set_new (obj, "id", json_string (e->id));
    if (e->error) {
        json_object_set_new (obj, "error", s_json_text (e->error, strlen (e->error)));
        return obj;
    }
    json_object_set_new (obj, "consumer", s_json_text (e->consumer, strlen (e->consumer)));
    json_object_set_new (obj, "seq", json_integer ((json_int_t) e->seq));
    json_object_set_new (obj, "msg_id",
                         *msg_id ? s_json_text (msg_id, strlen (msg_id)) : json_null ());
    json_object_set_new (obj, "topic", s_json_text (e->topic, e->topic_len));
    json_object_set_new (obj, "size", json_integer ((json_int_t) e->body_bytes));
    json_object_set_new (obj, "frames", json_integer ((json_int_t) e->frame_count));
    json_object_set_new (obj, "total_bytes", json_integer ((json_int_t) e->total_bytes));
    json_object_set_new (obj, "attempts", json_integer ((json_int_t) e->attempts));
    json_object_set_new (obj, "received", s_json_time (e->received_wall_ns));
    json_object_set_new (obj, "first_attempt", s_json_time (e->first_attempt_ns));
    json_object_set_new (obj, "last_attempt", s_json_time (e->last_attempt_ns));
    json_object_set_new (obj, "received_ns", json_integer (e->received_wall_ns));
    json_object_set_new (obj, "first_attempt_ns", json_integer (e->first_attempt_ns));
    json_object_set_new (obj, "last_attempt_ns", json_integer (e->last_attempt_ns));
    json_object_set_new (obj, "reason", s_json_text (e->reason, strlen (e->reason)));
    return obj;
}

static int
s_print_json (json_t *obj)
{
    char *text = obj ? json_dumps (obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref (obj);
    if (!text) {
        fprintf (stderr, "fanhub dead-letter: out of memory\n");
        return -1;
    }
    puts (text);
    free (text);
    return 0;
}

/* The table of `list`: column widths from the data; the reason, last,
   runs on. */
static void
s_list_table (fh_deadletter_t *store, const fh_deadletter_entry_t *entries, size_t count)
{
    int w_seq = 3, w_topic = 5, w_size = 4, w_attempts = 8, w_id = 6;
    char cell[256];
    char (*ids)[FH_FEDMSG_ID_SIZE] = calloc (count, sizeof *ids);
    for (size_t i = 0; i < count; i++) {
        const fh_deadletter_entry_t *e = &entries[i];
        if (e->error)
            continue;
        if (ids) {
            s_msg_id (store, e, ids[i], sizeof ids[i]);
            int len = (int) strlen (ids[i]);
            w_id = len > w_id ? len : w_id;
        }
        int n = snprintf (cell, sizeof cell, "%" PRIu64, e->seq);
        w_seq = n > w_seq ? n : w_seq;
        s_printable (e->topic, e->topic_len, TOPIC_COLUMN_MAX, cell, sizeof cell);
        n = (int) strlen (cell);
        w_topic = n > w_topic ? n : w_topic;
        n = snprintf (cell, sizeof cell, "%" PRIu64, e->body_bytes);
        w_size = n > w_size ? n : w_size;
    }
    printf ("%-16s  %*s  %-*s  %-*s  %*s  %*s  %-24s  %-24s  %s\n", "ID", w_seq, "SEQ", w_topic,
            "TOPIC", w_id, "MSG_ID", w_size, "SIZE", w_attempts, "ATTEMPTS", "FIRST ATTEMPT",
            "LAST ATTEMPT", "REASON");
    for (size_t i = 0; i < count; i++) {
        const fh_deadletter_entry_t *e = &entries[i];
        char reason[1024];
        if (e->error) {
            s_printable (e->error, strlen (e->error), 512, reason, sizeof reason);
            printf ("%-16s  %*s  %-*s  %-*s  %*s  %*s  %-24s  %-24s  %s\n", e->id, w_seq, "-",
                    w_topic, "-", w_id, "-", w_size, "-", w_attempts, "-", "-", "-", reason);
            continue;
        }
        char topic[256], first[64], last[64];
        s_printable (e->topic, e->topic_len, TOPIC_COLUMN_MAX, topic, sizeof topic);
        s_printable (e->reason, strlen (e->reason), 512, reason, sizeof reason);
        s_rfc3339 (e->first_attempt_ns, 3, first, sizeof first);
        s_rfc3339 (e->last_attempt_ns, 3, last, sizeof last);
        const char *id = ids && ids[i][0] ? ids[i] : "-";
        printf ("%-16s  %*" PRIu64 "  %-*s  %-*s  %*" PRIu64 "  %*" PRIu32 "  %-24s  %-24s  %s\n",
                e->id, w_seq, e->seq, w_topic, topic, w_id, id, w_size, e->body_bytes, w_attempts,
                e->attempts, first, last, reason);
    }
    free (ids);
}

static int
s_list (fh_deadletter_t *store, const char *dir, bool json)
{
    fh_deadletter_entry_t *entries;
    size_t count;
    char err[1024];
    if (fh_deadletter_list (store, &entries, &count, err, sizeof err) != 0) {
        fprintf (stderr, "fanhub dead-letter: %s\n", err);
        return FH_EXIT_FAILURE;
    }
    size_t damaged = 0;
    for (size_t i = 0; i < count; i++)
        damaged += entries[i].error != NULL;
    if (json) {
        for (size_t i = 0; i < count; i++) {
            char msg_id[FH_FEDMSG_ID_SIZE];
            s_msg_id (store, &entries[i], msg_id, sizeof msg_id);
            if (s_print_json (s_entry_json (&entries[i], msg_id)) != 0)
                break;
        }
    }
    else if (count == 0)
        fprintf (stderr, "fanhub dead-letter: no dead letters in %s\n", dir);
    else
        s_list_table (store, entries, count);
    fh_deadletter_entries_free (entries, count);
    if (damaged) {
        fprintf (stderr, "fanhub dead-letter: %zu entr%s in %s could not be read\n", damaged,
                 damaged == 1 ? "y" : "ies", dir);
        return FH_EXIT_FAILURE;
    }
    return FH_EXIT_OK;
}

/* ---- Every consumer's count ----------------------------------------------- */

typedef struct {
    char **names;
    size_t count, size;
} s_names_t;

static int
s_names_add (s_names_t *names, const char *name)
{
    for (size_t i = 0; i < names->count; i++)
        if (strcmp (names->names[i], name) == 0)
            return 0;
    if (names->count == names->size) {
        size_t size = names->size ? names->size * 2 : 16;
        char **bigger = realloc (names->names, size * sizeof *bigger);
        if (!bigger)
            return -1;
        names->names = bigger;
        names->size = size;
    }
    names->names[names->count] = strdup (name);
    return names->names[names->count++] ? 0 : -1;
}

static int
s_compare_names (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The directories of state_dir that hold a dead-letter store, by name,
   after those already in names. -1 when state_dir cannot be read (a
   missing one holds none). */
static int
s_names_from_dir (s_names_t *names, const char *state_dir, char *err, size_t errlen)
{
    DIR *dir = opendir (state_dir);
    if (!dir) {
        snprintf (err, errlen, "%s: %s", state_dir, strerror (errno));
        return errno == ENOENT ? 0 : -1;
    }
    size_t first = names->count;
    struct dirent *entry;
    int rc = 0;
    while (rc == 0 && (entry = readdir (dir))) {
        char path[4096];
        struct stat st;
        snprintf (path, sizeof path, "%s/%s/" FH_DEADLETTER_SUBDIR, state_dir, entry->d_name);
        if (fh_config_name_valid (entry->d_name) && stat (path, &st) == 0 && S_ISDIR (st.st_mode))
            rc = s_names_add (names, entry->d_name);
    }
    closedir (dir);
    if (names->count > first)
        qsort (names->names + first, names->count - first, sizeof *names->names, s_compare_names);
    if (rc != 0)
        snprintf (err, errlen, "out of memory");
    return rc;
}

/* One consumer's line (or JSON object); the number of entries that could
   not be read in *damaged, -1 when the store cannot be read at all. */
static int
s_summary_one (const char *state_dir, const char *consumer, bool json, size_t *damaged)
{
    char dir[4096], err[1024];
    snprintf (dir, sizeof dir, "%s/%s/" FH_DEADLETTER_SUBDIR, state_dir, consumer);
    fh_deadletter_t *store = fh_deadletter_open (dir, NULL, false, err, sizeof err);
    fh_deadletter_entry_t *entries = NULL;
    size_t count = 0;
    if (!store || fh_deadletter_list (store, &entries, &count, err, sizeof err) != 0) {
        fh_deadletter_close (&store);
        fprintf (stderr, "fanhub dead-letter: %s\n", err);
        return -1;
    }
    int64_t oldest = 0, newest = 0;
    *damaged = 0;
    for (size_t i = 0; i < count; i++) {
        int64_t when = entries[i].last_attempt_ns;
        *damaged += entries[i].error != NULL;
        if (entries[i].error || when == 0)
            continue;
        oldest = oldest == 0 || when < oldest ? when : oldest;
        newest = when > newest ? when : newest;
    }
    fh_deadletter_entries_free (entries, count);
    fh_deadletter_close (&store);
    if (json) {
        json_t *obj = json_pack ("{s:s, s:I, s:I, s:o, s:o}", "consumer", consumer, "count",
                                 (json_int_t) count, "damaged", (json_int_t) *damaged, "oldest",
                                 s_json_time (oldest), "newest", s_json_time (newest));
        return s_print_json (obj);
    }
    char first[64], last[64];
    s_rfc3339 (oldest, 3, first, sizeof first);
    s_rfc3339 (newest, 3, last, sizeof last);
    printf ("%-24s  %7zu  %-24s  %s", consumer, count, first, last);
    if (*damaged)
        printf ("  %zu could not be read", *damaged);
    putchar ('\n');
    return 0;
}

/* `list` without a consumer: each consumer of config (NULL: none known)
   and each other store in state_dir, one line each. */
static int
s_summary (const fh_config_t *config, const char *state_dir, bool json)
{
    s_names_t names = {0};
    char err[4200] = "out of memory";
    int rc = 0;
    for (size_t i = 0; config && rc == 0 && i < config->consumer_count; i++)
        rc = s_names_add (&names, config->consumers[i].name);
    if (rc == 0)
        rc = s_names_from_dir (&names, state_dir, err, sizeof err);
    int status = FH_EXIT_OK;
    if (rc != 0) {
        fprintf (stderr, "fanhub dead-letter: %s\n", err);
        status = FH_EXIT_FAILURE;
    }
    else if (names.count == 0)
        fprintf (stderr, "fanhub dead-letter: no consumers and no dead letters in %s\n", state_dir);
    else if (!json)
        printf ("%-24s  %7s  %-24s  %s\n", "CONSUMER", "COUNT", "OLDEST", "NEWEST");
    size_t damaged = 0;
    for (size_t i = 0; status == FH_EXIT_OK && i < names.count; i++) {
        size_t bad = 0;
        if (s_summary_one (state_dir, names.names[i], json, &bad) != 0)
            status = FH_EXIT_FAILURE;
        damaged += bad;
    }
    for (size_t i = 0; i < names.count; i++)
        free (names.names[i]);
    free (names.names);
    if (damaged) {
        fprintf (stderr, "fanhub dead-letter: %zu entr%s could not be read\n", damaged,
                 damaged == 1 ? "y" : "ies");
        status = FH_EXIT_FAILURE;
    }
    return status;
}

static char *
s_base64 (const uint8_t *data, size_t size)
{
    char *out = malloc (fanhub_base64_size (size) + 1);
    if (out)
        out[fanhub_base64_encode (out, data, size)] = '\0';
    return out;
}

static int
s_show (fh_deadletter_t *store, const char *id, bool json)
{
    fh_deadletter_entry_t e;
    char err[1024];
    if (fh_deadletter_load (store, id, &e, err, sizeof err) != 0) {
        fprintf (stderr, "fanhub dead-letter: %s\n", err);
        return FH_EXIT_FAILURE;
    }
    fanhub_bytes_t body = e.frame_count > 1 ? e.frames[1] : (fanhub_bytes_t){"", 0};
    int status = FH_EXIT_OK;
    char msg_id[FH_FEDMSG_ID_SIZE] = "";
    fh_fedmsg_msg_id (body.data, body.size, msg_id, sizeof msg_id);
    if (json) {
        json_t *obj = s_entry_json (&e, msg_id);
        if (fanhub_utf8_valid (body.data, body.size))
            json_object_set_new (obj, "body", json_stringn (body.data, body.size));
        else {
            char *encoded = s_base64 (body.data, body.size);
            json_object_set_new (obj, "body_base64", encoded ? json_string (encoded) : NULL);
            free (encoded);
        }
        if (s_print_json (obj) != 0)
            status = FH_EXIT_FAILURE;
    }
    else {
        char text[1024], when[64];
        printf ("id:             %s\n", e.id);
        s_printable (e.consumer, strlen (e.consumer), 255, text, sizeof text);
        printf ("consumer:       %s\n", text);
        printf ("seq:            %" PRIu64 "\n", e.seq);
        s_printable (msg_id, strlen (msg_id), 255, text, sizeof text);
        printf ("msg_id:         %s\n", *msg_id ? text : "-");
        s_printable (e.topic, e.topic_len, 512, text, sizeof text);
        printf ("topic:          %s\n", text);
        s_rfc3339 (e.received_wall_ns, 9, when, sizeof when);
        printf ("received:       %s\n", when);
        printf ("attempts:       %" PRIu32 "\n", e.attempts);
        s_rfc3339 (e.first_attempt_ns, 9, when, sizeof when);
        printf ("first attempt:  %s\n", when);
        s_rfc3339 (e.last_attempt_ns, 9, when, sizeof when);
        printf ("last attempt:   %s\n", when);
        s_printable (e.reason, strlen (e.reason), 1000, text, sizeof text);
        printf ("reason:         %s\n", text);
        printf ("frames:         %" PRIu32 " (%" PRIu64 " bytes in all)\n", e.frame_count,
                e.total_bytes);
        printf ("body:           %zu bytes\n\n", body.size);
        fwrite (body.data, 1, body.size, stdout);
        if (body.size && ((const char *) body.data)[body.size - 1] != '\n' && isatty (1))
            putchar ('\n');
    }
    fh_deadletter_entry_clear (&e);
    if (fflush (stdout) != 0)
        status = FH_EXIT_FAILURE;
    return status;
}

/* Puts one loaded entry back: through the hub (spool == NULL) or into the
   consumer's spool. 0 when taken. */
static int
s_replay_one (const fh_deadletter_entry_t *entry, const char *endpoint, const char *consumer,
              fh_spool_t *spool, char *err, size_t errlen)
{
    if (spool) {
        int rc = fh_spool_append (spool, entry->seq, entry->received_wall_ns, entry->frames,
                                  entry->frame_count);
        if (rc != 0)
            snprintf (err, errlen, "%s",
                      rc == FH_SPOOL_FULL ? "the spool is full" : strerror (errno));
        return rc == 0 ? 0 : -1;
    }
    fanhub_bytes_t *frames = calloc (entry->frame_count + 2, sizeof *frames);
    if (!frames) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    frames[0] = (fanhub_bytes_t){"INJECT", 6};
    frames[1] = (fanhub_bytes_t){consumer, strlen (consumer)};
    for (uint32_t i = 0; i < entry->frame_count; i++)
        frames[2 + i] = entry->frames[i];
    char *answer
        = fh_control_call_frames (endpoint, frames, entry->frame_count + 2, 10000, err, errlen);
    free (frames);
    int rc = answer && strcmp (answer, "OK") == 0 ? 0 : -1;
    if (answer && rc != 0)
        snprintf (err, errlen, "the hub answered: %s", answer);
    free (answer);
    return rc;
}

static int
s_replay (fh_deadletter_t *store, const fh_config_t *config, const char *consumer, const char **ids,
          size_t id_count)
{
    char err[1024];
    fh_deadletter_entry_t *entries = NULL;
    size_t count = 0;
    if (fh_deadletter_list (store, &entries, &count, err, sizeof err) != 0) {
        fprintf (stderr, "fanhub dead-letter replay: %s\n", err);
        return FH_EXIT_FAILURE;
    }
    /* A running hub answers PING; otherwise the spool takes them, which
       fails (locked) if a hub holds it after all. */
    fh_spool_t *spool = NULL;
    char *pong = fh_control_call (config->control, "PING", 1000, err, sizeof err);
    bool running = pong && strcmp (pong, "PONG") == 0;
    free (pong);
    if (!running) {
        char dir[4096];
        snprintf (dir, sizeof dir, "%s/%s", config->state_dir, consumer);
        fh_spool_options_t options = {.fsync = FH_SPOOL_FSYNC_ALWAYS};
        spool = fh_spool_open (dir, &options, NULL, err, sizeof err);
        if (!spool) {
            fprintf (stderr,
                     "fanhub dead-letter replay: the hub does not answer at %s, and "
                     "the spool cannot be opened: %s\n",
                     config->control, err);
            fh_deadletter_entries_free (entries, count);
            return FH_EXIT_FAILURE;
        }
    }
    int status = FH_EXIT_OK;
    size_t replayed = 0;
    for (size_t i = 0; i < count && status == FH_EXIT_OK; i++) {
        bool wanted = id_count == 0;
        for (size_t k = 0; k < id_count; k++)
            wanted |= strcmp (ids[k], entries[i].id) == 0;
        if (!wanted)
            continue;
        fh_deadletter_entry_t entry;
        if (entries[i].error
            || fh_deadletter_load (store, entries[i].id, &entry, err, sizeof err) != 0) {
            fprintf (stderr, "fanhub dead-letter replay: %s: %s\n", entries[i].id,
                     entries[i].error ? entries[i].error : err);
            status = FH_EXIT_FAILURE;
            break;
        }
        if (s_replay_one (&entry, config->control, consumer, spool, err, sizeof err) != 0) {
            fprintf (stderr, "fanhub dead-letter replay: %s: not taken: %s\n", entry.id, err);
            status = FH_EXIT_FAILURE;
        }
        else if (fh_deadletter_remove (store, entry.id, err, sizeof err) != 0) {
            fprintf (stderr, "fanhub dead-letter replay: %s: replayed, but not removed: %s\n",
                     entry.id, err);
            status = FH_EXIT_FAILURE;
        }
        else {
            printf ("%s: replayed %s\n", entry.id, spool ? "into the spool" : "into the hub");
            replayed++;
        }
        fh_deadletter_entry_clear (&entry);
    }
    for (size_t k = 0; k < id_count; k++) {
        bool found = false;
        for (size_t i = 0; i < count; i++)
            found |= strcmp (ids[k], entries[i].id) == 0;
        if (!found) {
            fprintf (stderr, "fanhub dead-letter replay: no entry %s\n", ids[k]);
            status = FH_EXIT_FAILURE;
        }
    }
    fh_deadletter_entries_free (entries, count);
    fh_spool_close (&spool);
    if (status == FH_EXIT_OK)
        printf ("%zu replayed\n", replayed);
    return status;
}

/* The checks of what was given, once parsed; FH_EXIT_OK or the usage
   status (the error said). */
static int
s_check_args (bool show, bool replay, const char *path, const char *state_dir, const char *consumer,
              const char *id)
{
    if (path && state_dir) {
        fprintf (stderr, "fanhub dead-letter: give -c or --state-dir, not both\n");
        return FH_EXIT_USAGE;
    }
    if (replay && state_dir) {
        fprintf (stderr, "fanhub dead-letter replay: needs the configuration (-c), to find "
                         "the hub\n");
        return FH_EXIT_USAGE;
    }
    if (consumer && !fh_config_name_valid (consumer)) {
        fprintf (stderr,
                 "fanhub dead-letter: '%s' is not a consumer name (1 to 64 of A-Z a-z 0-9 "
                 "_ . -, not starting with .: the hub's rule)\n",
                 consumer);
        return FH_EXIT_USAGE;
    }
    if (show && id && !fh_deadletter_id_valid (id)) {
        fprintf (stderr,
                 "fanhub dead-letter: '%s' is not an entry ID (16 hex digits, as "
                 "'fanhub dead-letter list' shows them)\n",
                 id);
        return FH_EXIT_USAGE;
    }
    return FH_EXIT_OK;
}

/* Without --state-dir: the configuration, its state_dir (a note when it
   has no such consumer) and, for replay, the keys to reach the hub.
   FH_EXIT_OK with *config_p set, or the exit status (the error said). */
static int
s_load (fh_cli_t *cli, const char *path, const char *consumer, bool replay, fh_config_t **config_p)
{
    char err[2048];
    fh_config_t *config = fh_cli_load_config (path, err, sizeof err);
    if (!config) {
        fprintf (stderr, "fanhub dead-letter: %s\n", err);
        return FH_EXIT_USAGE;
    }
    if (!config->state_dir) {
        fprintf (stderr,
                 "fanhub dead-letter: %s: no state_dir: dead letters are kept "
                 "only with a state_dir\n",
                 config->source);
        fh_config_destroy (&config);
        return FH_EXIT_USAGE;
    }
    bool known = !consumer;
    for (size_t i = 0; consumer && i < config->consumer_count; i++)
        known |= strcmp (config->consumers[i].name, consumer) == 0;
    if (!known)
        fprintf (stderr, "fanhub dead-letter: note: %s has no consumer '%s'\n", config->source,
                 consumer);
    int keys = replay ? fh_cli_control_keys (cli, config, config->control) : FH_EXIT_OK;
    if (keys != FH_EXIT_OK) {
        fh_config_destroy (&config);
        return keys;
    }
    *config_p = config;
    return FH_EXIT_OK;
}

typedef enum { S_LIST, S_SHOW, S_REPLAY } s_action_t;

/* The action on consumer's store in state_dir: the exit status. */
static int
s_on_store (const fh_config_t *config, const char *state_dir, const char *consumer,
            s_action_t action, const char *id, bool json, const char **ids, size_t id_count)
{
    size_t dirlen = strlen (state_dir) + strlen (consumer) + sizeof FH_DEADLETTER_SUBDIR + 2;
    char *dir = malloc (dirlen);
    if (!dir) {
        fprintf (stderr, "fanhub dead-letter: out of memory\n");
        return FH_EXIT_FAILURE;
    }
    snprintf (dir, dirlen, "%s/%s/" FH_DEADLETTER_SUBDIR, state_dir, consumer);
    char err[2048];
    int status;
    fh_deadletter_t *store = fh_deadletter_open (dir, NULL, false, err, sizeof err);
    if (!store) {
        fprintf (stderr, "fanhub dead-letter: %s\n", err);
        status = FH_EXIT_FAILURE;
    }
    else
        status = action == S_REPLAY ? s_replay (store, config, consumer, ids, id_count)
                 : action == S_SHOW ? s_show (store, id, json)
                                    : s_list (store, dir, json);
    fh_deadletter_close (&store);
    free (dir);
    return status;
}

int
fh_cmd_dead_letter (int argc, char **argv)
{
    const char *action = argc >= 2 ? argv[1] : "";
    fh_cli_t cli;
    int opt;
    const char *arg;
    if (action[0] == '-' || !*action) {
        /* No action: options alone (--help, --version) or a usage error. */
        fh_cli_begin (&cli, &s_command, argc, argv);
        while ((opt = fh_cli_next (&cli, &arg)) > 0)
            ;
        if (opt < 0)
            return fh_cli_status (&cli);
        return fh_cli_usage_error (&s_command, "expected an action: list, show or replay");
    }
    bool show = strcmp (action, "show") == 0;
    bool replay = strcmp (action, "replay") == 0;
    if (!show && !replay && strcmp (action, "list") != 0)
        return fh_cli_usage_error (&s_command, "'%s' is not an action (list, show, replay)",
                                   action);
    const char *path = NULL, *state_dir = NULL;
    bool json = false;
    const char *ids[256];
    size_t id_count = 0;
    fh_cli_begin (&cli, &s_command, argc - 1, argv + 1);
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        switch (opt) {
        case 'c': path = arg; break;
        case S_OPT_STATE_DIR: state_dir = arg; break;
        case S_OPT_JSON: json = true; break;
        case S_OPT_ID:
            if (!replay || id_count == sizeof ids / sizeof ids[0] || !fh_deadletter_id_valid (arg))
                return fh_cli_usage_error (&s_command, "--id takes an entry ID (16 hex "
                                                       "digits), with replay, at most 256 times");
            ids[id_count++] = arg;
            break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    int wanted = show ? 2 : 1, given = argc - 1 - cli.next;
    bool every = !show && !replay && given == 0; /* list: every consumer */
    if (given != wanted && !every)
        return fh_cli_usage_error (&s_command, "%s: expected %s", action,
                                   show     ? "CONSUMER ID"
                                   : replay ? "CONSUMER"
                                            : "at most a CONSUMER");
    const char *consumer = every ? NULL : argv[1 + cli.next];
    const char *id = show ? argv[2 + cli.next] : NULL;
    int status = s_check_args (show, replay, path, state_dir, consumer, id);
    fh_config_t *config = NULL;
    if (status == FH_EXIT_OK && !state_dir
        && (status = s_load (&cli, path, consumer, replay, &config)) == FH_EXIT_OK)
        state_dir = config->state_dir;
    if (status == FH_EXIT_OK && every)
        status = s_summary (config, state_dir, json);
    if (status != FH_EXIT_OK || every) {
        fh_config_destroy (&config);
        return status;
    }
    status = s_on_store (config, state_dir, consumer,
                         show     ? S_SHOW
                         : replay ? S_REPLAY
                                  : S_LIST,
                         id, json, ids, id_count);
    fh_config_destroy (&config);
    return status;
}
