/*  declare.c - the amqp plugin's `declare: true`: the topology the worker
    hubs' bus.amqp declares (hub/amqp/source_amqp.c, with the same
    arguments, so either side may declare first), declared by the bridge
    at each connect, so that a message published before any worker hub
    started has a queue to go to. See bridge.h.
*/
#include "bridge.h"

#include <amqp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
bridge_declare_free (bridge_declare_t *d)
{
    for (size_t i = 0; i < d->binding_count; i++)
        free (d->bindings[i]);
    free (d->bindings);
    free (d->queue);
    free (d->hash_exchange);
    free (d->hash_header);
    free (d->queue_type);
    free (d->dead_letter_exchange);
    memset (d, 0, sizeof *d);
}

int
bridge_declare_read (const fanhub_host_t *host, const fanhub_option_t *bindings,
                     bridge_declare_t *out, char *err, size_t errlen)
{
    size_t count = bindings ? host->option_count (bindings) : 1;
    out->bindings = calloc (count ? count : 1, sizeof *out->bindings);
    if (!out->bindings) {
        snprintf (err, errlen, "amqp: out of memory");
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const char *key = bindings ? host->option_scalar (host->option_at (bindings, i, NULL))
                                   : "#";
        if (!(out->bindings[out->binding_count++] = strdup (key ? key : ""))) {
            snprintf (err, errlen, "amqp: out of memory");
            return -1;
        }
    }
    if (!out->hash_exchange && out->queue) {
        size_t len = strlen (out->queue) + sizeof ".hash";
        if (!(out->hash_exchange = malloc (len))) {
            snprintf (err, errlen, "amqp: out of memory");
            return -1;
        }
        snprintf (out->hash_exchange, len, "%s.hash", out->queue);
    }
    return 0;
}

static int
s_ok (amqp_connection_state_t conn, const char *what, char *why, size_t whylen)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply (conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION
        && (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD
            || r.reply.id == AMQP_CONNECTION_CLOSE_METHOD)) {
        amqp_channel_close_t *m = r.reply.decoded; /* same layout as connection.close */
        snprintf (why, whylen, "declare: %s: %u %.*s", what, m->reply_code, (int) m->reply_text.len,
                  (const char *) m->reply_text.bytes);
    }
    else
        snprintf (why, whylen, "declare: %s: %s", what,
                  r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                      ? amqp_error_string2 (r.library_error)
                      : "unexpected reply");
    return -1;
}

/* The queues' arguments, as the workers give them. */
static amqp_table_t
s_arguments (const bridge_declare_t *d, amqp_table_entry_t *e)
{
    int n = 0;
    e[n].key = amqp_cstring_bytes ("x-queue-type");
    e[n].value.kind = AMQP_FIELD_KIND_UTF8;
    e[n++].value.value.bytes = amqp_cstring_bytes (d->queue_type);
    if (d->shards) {
        e[n].key = amqp_cstring_bytes ("x-single-active-consumer");
        e[n].value.kind = AMQP_FIELD_KIND_BOOLEAN;
        e[n++].value.value.boolean = 1;
    }
    if (d->dead_letter_exchange) {
        e[n].key = amqp_cstring_bytes ("x-dead-letter-exchange");
        e[n].value.kind = AMQP_FIELD_KIND_UTF8;
        e[n++].value.value.bytes = amqp_cstring_bytes (d->dead_letter_exchange);
    }
    return (amqp_table_t){n, e};
}

int
bridge_declare_run (const bridge_declare_t *d, const char *exchange, void *conn_arg, int channel,
                    char *why, size_t whylen)
{
    amqp_connection_state_t conn = conn_arg;
    amqp_channel_t ch = (amqp_channel_t) channel;
    amqp_table_entry_t entries[3];
    amqp_table_t arguments = s_arguments (d, entries);
    if (d->shards) {
        amqp_table_entry_t header
            = {amqp_cstring_bytes ("hash-header"), {.kind = AMQP_FIELD_KIND_UTF8}};
        if (d->hash_header)
            header.value.value.bytes = amqp_cstring_bytes (d->hash_header);
        amqp_table_t exchange_arguments = {d->hash_header ? 1 : 0, &header};
        amqp_exchange_declare (conn, ch, amqp_cstring_bytes (d->hash_exchange),
                               amqp_cstring_bytes ("x-consistent-hash"), 0, 1, 0, 0,
                               exchange_arguments);
        if (s_ok (conn, "the consistent-hash exchange", why, whylen))
            return -1;
    }
    for (size_t i = 0; i < (d->shards ? d->shards : 1); i++) {
        char queue[300];
        if (d->shards)
            snprintf (queue, sizeof queue, "%s.%zu", d->queue, i);
        else
            snprintf (queue, sizeof queue, "%s", d->queue);
        amqp_queue_declare (conn, ch, amqp_cstring_bytes (queue), 0, 1, 0, 0, arguments);
        if (s_ok (conn, "a queue", why, whylen))
            return -1;
        if (d->shards) {
            amqp_queue_bind (conn, ch, amqp_cstring_bytes (queue),
                             amqp_cstring_bytes (d->hash_exchange), amqp_cstring_bytes ("1"),
                             amqp_empty_table);
            if (s_ok (conn, "a shard queue's binding", why, whylen))
                return -1;
        }
    }
    const char *target = d->shards ? d->hash_exchange : d->queue;
    for (size_t i = 0; exchange[0] && i < d->binding_count; i++) {
        amqp_bytes_t key = amqp_cstring_bytes (d->bindings[i]);
        if (d->shards)
            amqp_exchange_bind (conn, ch, amqp_cstring_bytes (target),
                                amqp_cstring_bytes (exchange), key, amqp_empty_table);
        else
            amqp_queue_bind (conn, ch, amqp_cstring_bytes (target), amqp_cstring_bytes (exchange),
                             key, amqp_empty_table);
        if (s_ok (conn, "a binding to the exchange", why, whylen))
            return -1;
    }
    return 0;
}

/* Words for an RPC reply that is not normal. */
void
bridge_reply_why (const void *reply, const char *what, char *why, size_t whylen)
{
    amqp_rpc_reply_t r = *(const amqp_rpc_reply_t *) reply;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        snprintf (why, whylen, "%s: %s", what, amqp_error_string2 (r.library_error));
    else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION
             && r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        amqp_connection_close_t *m = r.reply.decoded;
        snprintf (why, whylen, "%s: the broker closed the connection: %u %.*s", what, m->reply_code,
                  (int) m->reply_text.len, (const char *) m->reply_text.bytes);
    }
    else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION
             && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *m = r.reply.decoded;
        snprintf (why, whylen, "%s: the broker closed the channel: %u %.*s", what, m->reply_code,
                  (int) m->reply_text.len, (const char *) m->reply_text.bytes);
    }
    else
        snprintf (why, whylen, "%s: unexpected reply", what);
}

/* True when a reply says the broker refused who we are or where we go:
   a configuration error, not a passing state. */
bool
bridge_refused_login (const void *reply)
{
    amqp_rpc_reply_t r = *(const amqp_rpc_reply_t *) reply;
    if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION
        || r.reply.id != AMQP_CONNECTION_CLOSE_METHOD)
        return false;
    amqp_connection_close_t *m = r.reply.decoded;
    return m->reply_code == AMQP_ACCESS_REFUSED || m->reply_code == AMQP_NOT_ALLOWED;
}
