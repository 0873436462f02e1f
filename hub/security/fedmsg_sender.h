/*  fedmsg_sender - one sender of fedmsg envelopes: its signing pair, its
    username and its counter `i`, what `fanhub pub --fedmsg`, `emit
    --fedmsg` and a consumer's `publish: {envelope: fedmsg}` share.

    Each wrap takes the next i (fedmsg's first is 1) and the time now, in
    whole seconds, and signs when the sender has a pair (fedmsg_sign.h).
    A body that is not JSON goes as {"log": TEXT} (fedmsg-logger's lines),
    or, with json_only (a consumer's publish), is refused. A sender is
    used by one thread at a time; its envelope lives until the next wrap.
*/
#ifndef FH_FEDMSG_SENDER_H_INCLUDED
#define FH_FEDMSG_SENDER_H_INCLUDED

#include "fedmsg.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct fh_fedmsg_sender fh_fedmsg_sender_t;

/* key_file and cert_file both, or neither (no signature); username NULL:
   fh_fedmsg_username (). NULL with why in err (a pair that does not load,
   one without the other, out of memory). */
fh_fedmsg_sender_t *fh_fedmsg_sender_new (const char *key_file, const char *cert_file,
                                          const char *username, bool json_only, char *err,
                                          size_t errlen);
/* Safe with NULL and twice; nulls *self_p. */
void fh_fedmsg_sender_destroy (fh_fedmsg_sender_t **self_p);
/* Wraps one body: 0 with the envelope in *data and *size (until the next
   wrap) and its msg_id in id (may be NULL); or -1 with why in err, the
   counter unmoved. */
int fh_fedmsg_sender_wrap (fh_fedmsg_sender_t *self, const char *topic, size_t topic_size,
                           const void *body, size_t body_size, const void **data, size_t *size,
                           char *id, char *err, size_t errlen);

#endif
