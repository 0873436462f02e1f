/*  fedmsg - the fedmsg envelope: wrapping a body as fedmsg.core did, and
    finding a message's msg_id to name it by.

    A fedmsg body is a JSON object {"i", "msg", "msg_id", "timestamp",
    "topic", "username"} (and, signed, "crypto", "signature",
    "certificate": fedmsg_sign.h), encoded as fedmsg.encoding.dumps did
    (pyjson.h). fedmsg.core stamped `timestamp` as int(time.time()): the
    signatures of production messages verify only over whole seconds.
*/
#ifndef FH_FEDMSG_H_INCLUDED
#define FH_FEDMSG_H_INCLUDED

#include "fanhub/consumer.h"
#include "pyjson.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* "2026-" and a UUID4: 41 characters, room for a longer one read back. */
#define FH_FEDMSG_ID_SIZE 64

typedef struct fh_fedmsg_signer fh_fedmsg_signer_t;

/* Writes a new msg_id, as fedmsg made them: the UTC year, '-', a random
   UUID4 (from OpenSSL's generator). Returns 0, or -1 when no randomness. */
int fh_fedmsg_new_id (char id[FH_FEDMSG_ID_SIZE]);

/* The envelope of one message: msg is the body parsed as JSON, or, when it
   is not JSON, {"log": TEXT} as fedmsg-logger sent lines (TEXT must then be
   UTF-8). i is the sender's counter (fedmsg's first is 1); timestamp in
   whole seconds. Signed with signer when not NULL. Appends the encoded
   envelope to out; returns 0, or -1 with why in err. */
int fh_fedmsg_wrap (const char *topic, size_t topic_size, const void *body, size_t body_size,
                    uint64_t i, int64_t timestamp, const char *username, fh_fedmsg_signer_t *signer,
                    fh_buf_t *out, char *err, size_t errlen);

/* The envelope's msg member for a body: the body as JSON, or {"log":
   TEXT}. NULL with why in err. */
json_t *fh_fedmsg_msg_of (const void *body, size_t body_size, char *err, size_t errlen);
/* fh_fedmsg_wrap for a msg parsed already (a consumer's JSON body):
   its reference is taken, whatever the outcome. The msg_id given is
   copied into id when not NULL. */
int fh_fedmsg_wrap_json (const char *topic, size_t topic_size, json_t *msg, uint64_t i,
                         int64_t timestamp, const char *username, fh_fedmsg_signer_t *signer,
                         fh_buf_t *out, char *id, char *err, size_t errlen);

/* The sender's name as fedmsg took it (getpass.getuser: LOGNAME, USER,
   LNAME, USERNAME, then the password database); "unknown" if none. */
const char *fh_fedmsg_username (void);

/* The body's top-level "msg_id" when it is a JSON object with a string
   one: copied (truncated to fit) into id, true. Cheap when the body has
   no "msg_id" at all (one memmem); otherwise a parse: call it where a
   message is named, never per message on the data path. */
bool fh_fedmsg_msg_id (const void *body, size_t size, char *id, size_t id_size);
/* A msg_id (a JSON string) for naming a message: copied, truncated to
   fit, control characters (a \u0000 too) as '?'. False when value is not
   a string (id is then ""). Inline: fedmsg.c and fedmsg_sign.c both name
   messages, and fedmsg.c calls fedmsg_sign.c, not back. */
static inline bool
fh_fedmsg_id_copy (const json_t *value, char *id, size_t id_size)
{
    if (id_size == 0)
        return false;
    id[0] = '\0';
    if (!json_is_string (value))
        return false;
    size_t len = json_string_length (value);
    len = len < id_size - 1 ? len : id_size - 1;
    memcpy (id, json_string_value (value), len);
    id[len] = '\0';
    /* It names the message in logs and tables: no control characters. */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char) id[i] < 0x20 || id[i] == 0x7f)
            id[i] = '?';
    return true;
}
/* " msg_id ID" when the body (a fanhub_bytes_t) has one, else "": for log
   lines that name a message by its seq. */
void fh_fedmsg_id_note (fanhub_bytes_t body, char *note, size_t size);

#endif
