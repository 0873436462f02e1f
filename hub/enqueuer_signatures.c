/*  enqueuer_signatures - bus.validate_signatures on the enqueuer thread:
    each bus message's fedmsg signature checked before it is numbered and
    routed (fedmsg_sign.h), each failure counted by reason and logged,
    rate-limited, with its msg_id and the certificate's name. See
    enqueuer_internal.h.
*/
#include "enqueuer_internal.h"

#include "fedmsg_settings.h"

#include <stdio.h>

int
fh_enq_signatures_open (fh_enqueuer_t *self, char *err, size_t errlen)
{
    if (!self->config->signatures)
        return 0;
    const char *where = NULL;
    char why[1024];
    self->verifier = fh_sig_settings_load (self->config->signatures, &self->sig_deliver, &where,
                                           why, sizeof why);
    if (!self->verifier) {
        snprintf (err, errlen, "%s: bus.validate_signatures.%s", where ? where : "?", why);
        return -1;
    }
    return 0;
}

void
fh_enq_signatures_close (fh_enqueuer_t *self)
{
    fh_sig_verifier_destroy (&self->verifier);
}

bool
fh_enq_signature_refused (fh_enqueuer_t *self, zmq_msg_t *frames)
{
    fh_sig_detail_t detail;
    fh_sig_reason_t reason = fh_sig_verify (self->verifier, zmq_msg_data (&frames[0]),
                                            zmq_msg_size (&frames[0]), zmq_msg_data (&frames[1]),
                                            zmq_msg_size (&frames[1]), &detail);
    fh_bump (&self->sig_checked);
    if (reason == FH_SIG_OK)
        return false;
    fh_bump (&self->sig_failed[reason]);
    fh_log_limited (&self->sig_log[reason], FANHUB_LOG_WARNING,
                    "%s a bus message that failed its signature check (%s): topic %.*s, "
                    "msg_id %s, signer %s",
                    self->sig_deliver ? "delivered" : "dropped", fh_sig_reason_name (reason),
                    (int) zmq_msg_size (&frames[0]), (const char *) zmq_msg_data (&frames[0]),
                    detail.msg_id[0] ? detail.msg_id : "(none)",
                    detail.signer[0] ? detail.signer : "(none)");
    return !self->sig_deliver;
}
