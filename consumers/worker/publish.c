/*  publish - a worker's PUBLISH frames (protocol 2): the message onto the
    consumer's publish: endpoints through host->publish (ABI 1.5), as a
    fedmsg-hub consumer's publish put it on the bus. No answer goes back:
    a message the hub refuses (no publish:, a full queue, a body that is
    not JSON with envelope: fedmsg) is logged and counted by the hub
    (publish_failed). A PUBLISH from a process whose READY spoke protocol
    1, or a malformed one, is a protocol error.
*/
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool
worker_publish_frame (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, char *why,
                      size_t whylen)
{
    if (p->protocol < 2) {
        snprintf (why, whylen,
                  "protocol error: a PUBLISH from a worker whose READY spoke protocol %lld "
                  "(PUBLISH is protocol 2)",
                  p->protocol);
        return false;
    }
    const char *topic;
    const uint8_t *body;
    size_t topic_size, body_size;
    char err[128];
    if (wire_publish (payload, size, &topic, &topic_size, &body, &body_size, err, sizeof err)
        != 0) {
        snprintf (why, whylen, "protocol error: %s", err);
        return false;
    }
    if (!FANHUB_HOST_HAS_1_5 (w->host)) {
        w->host->log (w->ctx, FANHUB_LOG_WARNING,
                      "worker %zu published on '%.*s', but this hub has no publish (ABI 1.5); "
                      "dropped",
                      p->index, (int) topic_size, topic);
        return true;
    }
    char *text = malloc (topic_size + 1); /* host->publish takes a C string */
    if (!text) {
        w->host->log (w->ctx, FANHUB_LOG_ERROR, "worker %zu: a PUBLISH is dropped: out of memory",
                      p->index);
        return true;
    }
    memcpy (text, topic, topic_size);
    text[topic_size] = '\0';
    w->host->publish (w->ctx, text, body, body_size);
    free (text);
    return true;
}
