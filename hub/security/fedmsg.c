/*  fedmsg - the fedmsg envelope. See fedmsg.h. */
#define _GNU_SOURCE /* memmem */
#include "fedmsg.h"

#include "fedmsg_sign.h"

#include <openssl/rand.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
fh_fedmsg_new_id (char id[FH_FEDMSG_ID_SIZE])
{
    unsigned char u[16];
    if (RAND_bytes (u, sizeof u) != 1)
        return -1;
    u[6] = (unsigned char) ((u[6] & 0x0F) | 0x40); /* version 4 */
    u[8] = (unsigned char) ((u[8] & 0x3F) | 0x80); /* RFC 4122 variant */
    time_t now = time (NULL);
    struct tm tm;
    gmtime_r (&now, &tm);
    snprintf (id, FH_FEDMSG_ID_SIZE,
              "%d-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
              tm.tm_year + 1900, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
              u[11], u[12], u[13], u[14], u[15]);
    return 0;
}

const char *
fh_fedmsg_username (void)
{
    static const char *const vars[] = {"LOGNAME", "USER", "LNAME", "USERNAME"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *value = getenv (vars[i]);
        if (value && *value)
            return value;
    }
    struct passwd *pw = getpwuid (geteuid ());
    return pw && pw->pw_name ? pw->pw_name : "unknown";
}

json_t *
fh_fedmsg_msg_of (const void *body, size_t body_size, char *err, size_t errlen)
{
    json_t *msg = json_loadb (body, body_size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (msg)
        return msg;
    json_t *text = json_stringn (body, body_size);
    if (!text) {
        snprintf (err, errlen, "the body is neither JSON nor UTF-8 text");
        return NULL;
    }
    msg = json_object ();
    if (!msg || json_object_set_new (msg, "log", text) < 0) {
        json_decref (msg);
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    return msg;
}

int
fh_fedmsg_wrap (const char *topic, size_t topic_size, const void *body, size_t body_size,
                uint64_t i, int64_t timestamp, const char *username, fh_fedmsg_signer_t *signer,
                fh_buf_t *out, char *err, size_t errlen)
{
    json_t *msg = fh_fedmsg_msg_of (body, body_size, err, errlen);
    if (!msg)
        return -1;
    return fh_fedmsg_wrap_json (topic, topic_size, msg, i, timestamp, username, signer, out, NULL,
                                err, errlen);
}

int
fh_fedmsg_wrap_json (const char *topic, size_t topic_size, json_t *msg, uint64_t i,
                     int64_t timestamp, const char *username, fh_fedmsg_signer_t *signer,
                     fh_buf_t *out, char *id_out, char *err, size_t errlen)
{
    char id[FH_FEDMSG_ID_SIZE];
    if (fh_fedmsg_new_id (id) < 0) {
        json_decref (msg);
        snprintf (err, errlen, "no randomness for a msg_id");
        return -1;
    }
    json_t *topic_json = json_stringn (topic, topic_size);
    json_t *envelope = json_pack ("{s:o, s:o, s:s, s:I, s:I, s:s}", "topic", topic_json, "msg", msg,
                                  "msg_id", id, "timestamp", (json_int_t) timestamp, "i",
                                  (json_int_t) i, "username", username);
    if (!envelope) {
        snprintf (err, errlen, topic_json ? "out of memory" : "the topic is not UTF-8");
        return -1;
    }
    int rc = signer ? fh_fedmsg_sign (signer, envelope, err, errlen) : 0;
    if (rc == 0) {
        fh_pyjson_encode (out, envelope);
        if (out->failed) {
            snprintf (err, errlen, "out of memory");
            rc = -1;
        }
    }
    if (rc == 0 && id_out)
        memcpy (id_out, id, sizeof id);
    json_decref (envelope);
    return rc;
}

bool
fh_fedmsg_msg_id (const void *body, size_t size, char *id, size_t id_size)
{
    static const char key[] = "\"msg_id\"";
    if (id_size == 0 || size < sizeof key || !memmem (body, size, key, sizeof key - 1))
        return false;
    json_t *root = json_loadb (body, size, JSON_ALLOW_NUL, NULL);
    bool found = fh_fedmsg_id_copy (json_object_get (root, "msg_id"), id, id_size);
    json_decref (root);
    return found;
}

void
fh_fedmsg_id_note (fanhub_bytes_t body, char *note, size_t size)
{
    char id[FH_FEDMSG_ID_SIZE];
    if (size && fh_fedmsg_msg_id (body.data, body.size, id, sizeof id))
        snprintf (note, size, " msg_id %s", id);
    else if (size)
        note[0] = '\0';
}
