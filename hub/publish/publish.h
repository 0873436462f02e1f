/*  publish - a consumer's publisher: the messages its plugin publishes
    (host->publish, ABI 1.5) onto the consumer's `publish:` endpoints, as
    fedmsg-hub consumers put messages on the bus.

    One ZeroMQ XPUB socket per consumer with publish:, bound and connected
    at the consumer's start (fh_publisher_open), closed at its end. Any
    thread may publish: a mutex guards the socket (a socket may move
    between threads with a full fence, which the mutex gives), and every
    send is ZMQ_DONTWAIT, so publish never blocks the caller.

    Nothing is dropped silently. ZMQ_XPUB_NODROP with a SNDHWM of
    publish.queue makes a subscriber's full pipe an EAGAIN, counted in
    failed. With connect: endpoints (a fedmsg-relay's inbound), a message
    published while no subscriber is there (the relay is down, or not yet
    subscribed: PUB/SUB would send it nowhere) is held, up to publish.queue
    messages, and sent once a subscription arrives (seen at the next
    publish or tick); past that bound it is refused and counted. A bind-
    only publisher is a PUB: what nobody subscribes to goes nowhere.

    envelope: fedmsg wraps each body (it must be JSON) in fedmsg's envelope,
    signed with sign: (fedmsg_sender.h). local: true also hands each message
    to this hub's consumers through the enqueuer's injection socket, as
    `fanhub emit` does (fh_publisher_set_local names it).

    published counts what was accepted (sent, or held, and with local:
    true handed to the enqueuer too); failed what was refused (a bad topic
    or body, a full queue, before open or after close; a message the
    endpoints took but the enqueuer could not, local: true, is failed)
    and what was held and never sent when the publisher closed (the
    consumer's lineage keeps an instance's figures before its fini, so
    that last count is seen only in the warning that says it).
*/
#ifndef FH_PUBLISH_H_INCLUDED
#define FH_PUBLISH_H_INCLUDED

#include "config.h"
#include "consumer_counts.h"

#include <stddef.h>
#include <stdint.h>

typedef struct fh_publisher fh_publisher_t;

/* For consumer `name` (the log's word) with its publish: settings (not
   kept: copied). Loads the signing pair. NULL with one line in err. */
fh_publisher_t *fh_publisher_new (const char *name, const fh_publish_config_t *config, char *err,
                                  size_t errlen);
/* Creates the socket, binds and connects; logs the endpoints (a tcp
   port '*' as the one libzmq chose). -1 with one line in err. */
int fh_publisher_open (fh_publisher_t *self, char *err, size_t errlen);
/* Publishes one message (topic: non-empty UTF-8). 0 when sent or held,
   -1 when refused (logged, rate-limited). Any thread; never blocks. */
int fh_publisher_send (fh_publisher_t *self, const char *topic, const void *body, size_t size);
/* About once a second: reads the subscriptions, sends what is held when a
   subscriber is there. Any thread. */
void fh_publisher_tick (fh_publisher_t *self);
/* Its counters (published, publish_failed) in the shape of a consumer's
   figures, for a snapshot to add in by the registry's rows; lock-free
   (fh_count_read). */
const fh_consumer_counts_t *fh_publisher_tally (const fh_publisher_t *self);
/* The endpoints as opened, bound ones with the port libzmq chose, one
   space between them ("" before open). Any thread. */
void fh_publisher_endpoints (fh_publisher_t *self, char *buf, size_t size);
/* Closes the socket (what is still held is counted failed); later
   publishes are refused. Safe with NULL and twice; nulls *self_p. */
void fh_publisher_destroy (fh_publisher_t **self_p);

/* Process-wide: the enqueuer's injection endpoint, for local: true (the
   hub sets it once its enqueuer runs, and NULL as it stops: a local
   publish is then refused, counted). */
void fh_publisher_set_local (const char *inject_endpoint);

#endif
