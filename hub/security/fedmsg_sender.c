/*  fedmsg_sender - one sender of fedmsg envelopes. See fedmsg_sender.h. */
#include "fedmsg_sender.h"

#include "fedmsg_sign.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fh_fedmsg_sender {
    fh_fedmsg_signer_t *signer; /* or NULL */
    char *username;
    bool json_only;
    uint64_t i;   /* the last envelope's counter */
    fh_buf_t buf; /* the last envelope */
};

fh_fedmsg_sender_t *
fh_fedmsg_sender_new (const char *key_file, const char *cert_file, const char *username,
                      bool json_only, char *err, size_t errlen)
{
    if (!key_file != !cert_file) {
        snprintf (err, errlen, "a signing key and its certificate go together");
        return NULL;
    }
    fh_fedmsg_sender_t *self = calloc (1, sizeof *self);
    if (!self || !(self->username = strdup (username ? username : fh_fedmsg_username ()))) {
        free (self);
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->json_only = json_only;
    if (key_file && !(self->signer = fh_fedmsg_signer_new (key_file, cert_file, err, errlen)))
        fh_fedmsg_sender_destroy (&self);
    return self;
}

void
fh_fedmsg_sender_destroy (fh_fedmsg_sender_t **self_p)
{
    fh_fedmsg_sender_t *self = *self_p;
    if (!self)
        return;
    fh_fedmsg_signer_destroy (&self->signer);
    free (self->username);
    free (self->buf.data);
    free (self);
    *self_p = NULL;
}

int
fh_fedmsg_sender_wrap (fh_fedmsg_sender_t *self, const char *topic, size_t topic_size,
                       const void *body, size_t body_size, const void **data, size_t *size,
                       char *id, char *err, size_t errlen)
{
    self->buf.size = 0;
    self->buf.failed = false;
    int64_t now = (int64_t) time (NULL);
    json_t *msg;
    if (self->json_only) {
        json_error_t error;
        msg = json_loadb (body, body_size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
        if (!msg)
            snprintf (err, errlen, "the body is not JSON (%s, at byte %d)", error.text,
                      error.position);
    }
    else
        msg = fh_fedmsg_msg_of (body, body_size, err, errlen);
    if (!msg)
        return -1;
    int rc = fh_fedmsg_wrap_json (topic, topic_size, msg, self->i + 1, now, self->username,
                                  self->signer, &self->buf, id, err, errlen);
    if (rc != 0)
        return -1;
    self->i++;
    *data = self->buf.data;
    *size = self->buf.size;
    return 0;
}
