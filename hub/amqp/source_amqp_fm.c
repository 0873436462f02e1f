/*  source_amqp_fm - the AMQP source of one fedora_messaging consumer:
    its settings, login, topology and consumers from the config.toml as
    fm_config.py normalised it (config_fedora.c).

    As fedora-messaging's consumer does (fedora_messaging/twisted/
    protocol.py at 48c5ccbc): the file's amqp_url, [tls] (ca_cert,
    certfile, keyfile), [client_properties]; exchanges, queues (with
    their arguments) and bindings declared at each connect, passively
    with passive_declares (bindings then left as they are); one channel,
    basic.qos prefetch_count per consumer (global false, as pika's
    default), one basic.consume per queue. Everything else of the source
    is source_amqp.c's.
*/
#include "source_amqp_settings.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_TABLE_MAX 64 /* entries of one arguments table */

static char *
s_dup (const char *text, bool *oom)
{
    char *copy = text ? strdup (text) : NULL;
    *oom |= text && !copy;
    return copy;
}

fh_amqp_settings_t *
fh_amqp_settings_from_fedora (const json_t *fm, const char *consumer, char *err, size_t errlen)
{
    const char *file = json_string_value (json_object_get (fm, "file"));
    const char *url = json_string_value (json_object_get (fm, "amqp_url"));
    fh_amqp_settings_t *self = calloc (1, sizeof *self);
    char *copy = url ? strdup (url) : NULL;
    if (!self || !copy) {
        free (self);
        free (copy);
        snprintf (err, errlen, "%s: out of memory", file);
        return NULL;
    }
    struct amqp_connection_info info;
    amqp_default_connection_info (&info);
    char *query = strchr (copy, '?'); /* pika's options: connection_attempts... */
    if (query)
        *query = '\0';
    if (amqp_parse_url (copy, &info) != AMQP_STATUS_OK) {
        snprintf (err, errlen,
                  "%s: amqp_url: expected amqp://[USER[:PASSWORD]@]HOST[:PORT][/VHOST] "
                  "or amqps://..., got '%s'",
                  file, url);
        free (copy);
        free (self);
        return NULL;
    }
    bool oom = false;
    self->host = s_dup (info.host && *info.host ? info.host : "localhost", &oom);
    self->port = info.port;
    self->tls = info.ssl;
    self->vhost = s_dup (info.vhost && *info.vhost ? info.vhost : "/", &oom);
    self->user = s_dup (info.user ? info.user : "guest", &oom);
    self->password = s_dup (info.password ? info.password : "guest", &oom);
    free (copy);
    const json_t *tls = json_object_get (fm, "tls");
    self->ca_file = s_dup (json_string_value (json_object_get (tls, "ca_cert")), &oom);
    self->cert_file = s_dup (json_string_value (json_object_get (tls, "certfile")), &oom);
    self->key_file = s_dup (json_string_value (json_object_get (tls, "keyfile")), &oom);
    self->verify_peer = self->ca_file != NULL;
    self->verify_hostname = self->ca_file != NULL;
    const json_t *first = json_array_get (json_object_get (fm, "queues"), 0);
    self->queue = s_dup (json_string_value (json_object_get (first, "name")), &oom);
    self->exchange = s_dup ("", &oom);
    self->queue_type = s_dup ("classic", &oom);
    self->prefetch = (size_t) json_integer_value (json_object_get (fm, "prefetch_count"));
    self->heartbeat_s = 30;
    self->declare = !json_is_true (json_object_get (fm, "passive_declares"));
    self->reconnect_max_ms = 10000;
    self->fedora = json_incref ((json_t *) fm);
    self->target = s_dup (consumer, &oom);
    if (oom || !self->queue) {
        snprintf (err, errlen, "%s: %s", file, oom ? "out of memory" : "no queue");
        fh_amqp_settings_destroy (&self);
    }
    else if (self->tls && !self->ca_file) {
        snprintf (err, errlen, "%s: tls.ca_cert: required with amqps://", file);
        fh_amqp_settings_destroy (&self);
    }
    else if (!self->cert_file != !self->key_file) {
        snprintf (err, errlen, "%s: tls: certfile and keyfile go together", file);
        fh_amqp_settings_destroy (&self);
    }
    return self;
}

/* A TOML value as an AMQP field value; false for what has none (a
   table in an array, say), which is left out. */
static bool
s_field (const json_t *value, amqp_field_value_t *out)
{
    switch (json_typeof (value)) {
    case JSON_STRING:
        out->kind = AMQP_FIELD_KIND_UTF8;
        out->value.bytes = amqp_cstring_bytes (json_string_value (value));
        return true;
    case JSON_INTEGER:
        out->kind = AMQP_FIELD_KIND_I64;
        out->value.i64 = json_integer_value (value);
        return true;
    case JSON_REAL:
        out->kind = AMQP_FIELD_KIND_F64;
        out->value.f64 = json_real_value (value);
        return true;
    case JSON_TRUE:
    case JSON_FALSE:
        out->kind = AMQP_FIELD_KIND_BOOLEAN;
        out->value.boolean = json_is_true (value);
        return true;
    default: return false;
    }
}

/* A JSON object of scalars as an AMQP table (x-message-ttl,
   x-dead-letter-exchange, x-queue-type...); entries has S_TABLE_MAX. */
static amqp_table_t
s_table (const json_t *object, amqp_table_entry_t *entries)
{
    int count = 0;
    const char *key;
    json_t *value;
    json_object_foreach ((json_t *) object, key, value)
    {
        if (count == S_TABLE_MAX)
            break;
        entries[count].key = amqp_cstring_bytes (key);
        if (s_field (value, &entries[count].value))
            count++;
    }
    return (amqp_table_t){count, entries};
}

static int
s_rpc (amqp_connection_state_t conn, const char *what, const char *name, char *why, size_t len)
{
    amqp_rpc_reply_t reply = amqp_get_rpc_reply (conn);
    if (reply.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION
        && reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        amqp_channel_close_t *close = reply.reply.decoded;
        snprintf (why, len, "%s %s: the broker closed the channel: %u %.*s", what, name,
                  close->reply_code, (int) close->reply_text.len,
                  (const char *) close->reply_text.bytes);
    }
    else
        snprintf (why, len, "%s %s: %s", what, name,
                  reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                      ? amqp_error_string2 (reply.library_error)
                      : "refused by the broker");
    return -1;
}

amqp_rpc_reply_t
fh_amqp_fedora_login (amqp_connection_state_t conn, const fh_amqp_settings_t *settings)
{
    amqp_table_entry_t entries[S_TABLE_MAX];
    amqp_table_t properties
        = s_table (json_object_get (settings->fedora, "client_properties"), entries);
    return amqp_login_with_properties (conn, settings->vhost, 0, 131072, settings->heartbeat_s,
                                       &properties, AMQP_SASL_METHOD_PLAIN, settings->user,
                                       settings->password);
}

int
fh_amqp_fedora_declare (amqp_connection_state_t conn, const fh_amqp_settings_t *settings, char *why,
                        size_t len)
{
    const json_t *fm = settings->fedora;
    amqp_boolean_t passive = !settings->declare;
    amqp_table_entry_t entries[S_TABLE_MAX];
    size_t i;
    json_t *item;
    json_array_foreach (json_object_get (fm, "exchanges"), i, item)
    {
        const char *name = json_string_value (json_object_get (item, "name"));
        if (strncmp (name, "amq.", 4) == 0)
            continue; /* the broker's own: declaring them is refused */
        amqp_exchange_declare (
            conn, 1, amqp_cstring_bytes (name),
            amqp_cstring_bytes (json_string_value (json_object_get (item, "type"))), passive,
            json_is_true (json_object_get (item, "durable")),
            json_is_true (json_object_get (item, "auto_delete")), 0,
            s_table (json_object_get (item, "arguments"), entries));
        if (s_rpc (conn, "declaring the exchange", name, why, len))
            return -1;
    }
    json_array_foreach (json_object_get (fm, "queues"), i, item)
    {
        const char *name = json_string_value (json_object_get (item, "name"));
        amqp_queue_declare (conn, 1, amqp_cstring_bytes (name), passive,
                            json_is_true (json_object_get (item, "durable")),
                            json_is_true (json_object_get (item, "exclusive")),
                            json_is_true (json_object_get (item, "auto_delete")),
                            s_table (json_object_get (item, "arguments"), entries));
        if (s_rpc (conn, "declaring the queue", name, why, len))
            return -1;
    }
    json_array_foreach (passive ? NULL : json_object_get (fm, "bindings"), i, item)
    {
        const char *queue = json_string_value (json_object_get (item, "queue"));
        amqp_queue_bind (
            conn, 1, amqp_cstring_bytes (queue),
            amqp_cstring_bytes (json_string_value (json_object_get (item, "exchange"))),
            amqp_cstring_bytes (json_string_value (json_object_get (item, "routing_key"))),
            s_table (json_object_get (item, "arguments"), entries));
        if (s_rpc (conn, "binding the queue", queue, why, len))
            return -1;
    }
    return 0;
}

int
fh_amqp_fedora_consume (amqp_connection_state_t conn, const fh_amqp_settings_t *settings, char *why,
                        size_t len)
{
    char host[128] = "", tag[400];
    gethostname (host, sizeof host - 1);
    size_t i;
    json_t *item;
    json_array_foreach (json_object_get (settings->fedora, "queues"), i, item)
    {
        const char *name = json_string_value (json_object_get (item, "name"));
        /* fanhub@HOST:PID/CONSUMER: `rabbitmqctl list_consumers` tells
           whose it is. */
        snprintf (tag, sizeof tag, "fanhub@%s:%ld/%s/%zu", host, (long) getpid (), settings->target,
                  i);
        amqp_basic_consume (conn, 1, amqp_cstring_bytes (name), amqp_cstring_bytes (tag), 0, 0, 0,
                            amqp_empty_table);
        if (s_rpc (conn, "consuming from queue", name, why, len))
            return -1;
    }
    return 0;
}

const char *
fh_amqp_fedora_queue (const fh_amqp_settings_t *settings, const amqp_envelope_t *envelope)
{
    const amqp_bytes_t *tag = &envelope->consumer_tag;
    size_t at = tag->len, index = 0, scale = 1;
    const char *bytes = tag->bytes;
    while (at > 0 && bytes[at - 1] >= '0' && bytes[at - 1] <= '9' && scale < 1000000) {
        index += (size_t) (bytes[at - 1] - '0') * scale;
        scale *= 10;
        at--;
    }
    if (at == tag->len || at == 0 || bytes[at - 1] != '/')
        return NULL;
    const json_t *queue = json_array_get (json_object_get (settings->fedora, "queues"), index);
    return json_string_value (json_object_get (queue, "name"));
}
