/*  enqueuer_signatures - bus.validate_signatures on the enqueuer thread:
    each bus message's fedmsg signature checked before it is numbered and
    routed (fedmsg_sign.h), each failure counted by reason and logged,
    rate-limited, with its msg_id and the certificate's name. See
    enqueuer_internal.h.
*/
#include "enqueuer_internal.h"

#include "fedmsg_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* What a reload hands over: a verifier (NULL: validation off). */
typedef struct {
    fh_sig_verifier_t *verifier;
    bool deliver;
} s_next_t;

static int
s_load (const fh_config_t *config, fh_sig_verifier_t **verifier, bool *deliver, char *err,
        size_t errlen)
{
    *verifier = NULL;
    if (!config->signatures)
        return 0;
    const char *where = NULL;
    char why[1024];
    *verifier = fh_sig_settings_load (config->signatures, deliver, &where, why, sizeof why);
    if (!*verifier) {
        snprintf (err, errlen, "%s: bus.validate_signatures.%s", where ? where : "?", why);
        return -1;
    }
    return 0;
}

/* A verifier in force: what other threads and the CRL warning see. */
static void
s_in_force (fh_enqueuer_t *self)
{
    atomic_store (&self->sig_on, self->verifier != NULL);
    atomic_store (&self->sig_crl_next,
                  self->verifier ? fh_sig_verifier_crl_next_update (self->verifier) : 0);
    self->sig_crl_warned = false;
}

int
fh_enq_signatures_open (fh_enqueuer_t *self, char *err, size_t errlen)
{
    int rc = s_load (self->config, &self->verifier, &self->sig_deliver, err, errlen);
    s_in_force (self);
    return rc;
}

static void
s_next_free (s_next_t *next)
{
    if (next) {
        fh_sig_verifier_destroy (&next->verifier);
        free (next);
    }
}

void
fh_enq_signatures_close (fh_enqueuer_t *self)
{
    fh_sig_verifier_destroy (&self->verifier);
    s_next_free (atomic_exchange (&self->sig_next, NULL));
}

int
fh_enqueuer_reload_signatures (fh_enqueuer_t *self, const fh_config_t *config, char *err,
                               size_t errlen)
{
    s_next_t *next = calloc (1, sizeof *next);
    if (!next) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    if (s_load (config, &next->verifier, &next->deliver, err, errlen) < 0) {
        free (next);
        return -1;
    }
    /* One the actor has not taken yet was never used: freed here. */
    s_next_free (atomic_exchange (&self->sig_next, next));
    return 0;
}

void
fh_enq_signatures_take (fh_enqueuer_t *self)
{
    s_next_t *next = atomic_exchange (&self->sig_next, NULL);
    if (!next)
        return;
    fh_sig_verifier_destroy (&self->verifier);
    self->verifier = next->verifier;
    self->sig_deliver = next->deliver;
    free (next);
    s_in_force (self);
}

void
fh_enq_signatures_tick (fh_enqueuer_t *self)
{
    if (atomic_load_explicit (&self->sig_next, memory_order_relaxed))
        fh_enq_signatures_take (self);
    int64_t next = atomic_load_explicit (&self->sig_crl_next, memory_order_relaxed);
    if (!next || self->sig_crl_warned || (int64_t) time (NULL) < next)
        return;
    self->sig_crl_warned = true;
    time_t at = (time_t) next;
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r (&at, &tm))
        strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fh_warning ("bus.validate_signatures: the CRL expired at %s (its nextUpdate): %s until a "
                "current one is loaded (fanhub reload)",
                when,
                fh_sig_verifier_crl_expired_accept (self->verifier)
                    ? "signed messages still pass (on_crl_expired: accept)"
                    : "every signed message is refused as crl_expired (on_crl_expired: reject)");
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
