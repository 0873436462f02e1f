/*  fedora.c - the amqp plugin's `envelope: fedora-messaging`: a message
    published as fedora-messaging publishes (fedora_messaging/message.py),
    so that its consumers take it as their own: message_id from the fedmsg
    msg_id (a new UUID4 when there is none), content_type application/json,
    content_encoding utf-8, and the headers fedora_messaging_schema,
    fedora_messaging_severity, sent-at (from the fedmsg timestamp, else the
    time the hub received it) and priority 0. See docs/fedora.md.
*/
#include "bridge.h"

#include <fanhub/sdk.h>

#include <amqp.h>

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static void
s_rules_free (bridge_rule_t *rules, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free (rules[i].prefix);
        free (rules[i].name);
    }
    free (rules);
}

void
bridge_fedora_free (bridge_fedora_t *f)
{
    free (f->schema);
    s_rules_free (f->schemas, f->schema_count);
    s_rules_free (f->severities, f->severity_count);
    memset (f, 0, sizeof *f);
}

/* A {PREFIX: VALUE} map: names (schemas) or severities 10..50. */
static int
s_rules (const fanhub_host_t *host, const fanhub_option_t *node, const char *key, bool severity,
         bridge_rule_t **out, size_t *count, char *err, size_t errlen)
{
    if (!node)
        return 0;
    if (host->option_kind (node) != FANHUB_OPTION_MAP) {
        snprintf (err, errlen, "options.%s: expected a map of topic prefix: %s (%s)", key,
                  severity ? "severity" : "schema", host->option_where (node));
        return -1;
    }
    size_t n = host->option_count (node);
    *out = calloc (n ? n : 1, sizeof **out);
    if (!*out) {
        snprintf (err, errlen, "amqp: out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *prefix;
        const fanhub_option_t *value = host->option_at (node, i, &prefix);
        const char *text = host->option_scalar (value);
        char *end = NULL;
        long number = text ? strtol (text, &end, 10) : 0;
        if (!text || !*text || (severity && (*end || number < 10 || number > 50))) {
            snprintf (err, errlen, "options.%s.%s: expected %s (%s)", key, prefix,
                      severity ? "a severity from 10 to 50" : "a schema name",
                      host->option_where (value));
            return -1;
        }
        bridge_rule_t *rule = &(*out)[(*count)++];
        rule->prefix = strdup (prefix);
        rule->name = severity ? NULL : strdup (text);
        rule->severity = (int) number;
        if (!rule->prefix || (!severity && !rule->name)) {
            snprintf (err, errlen, "amqp: out of memory");
            return -1;
        }
    }
    return 0;
}

int
bridge_fedora_read (const fanhub_host_t *host, const fanhub_option_t *options, bridge_fedora_t *out,
                    char *err, size_t errlen)
{
    return s_rules (host, host->option_get (options, "schemas"), "schemas", false, &out->schemas,
                    &out->schema_count, err, errlen)
                   || s_rules (host, host->option_get (options, "severities"), "severities", true,
                               &out->severities, &out->severity_count, err, errlen)
               ? -1
               : 0;
}

static const bridge_rule_t *
s_match (const bridge_rule_t *rules, size_t count, const char *key, size_t key_size)
{
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen (rules[i].prefix);
        if (len <= key_size && memcmp (rules[i].prefix, key, len) == 0)
            return &rules[i];
    }
    return NULL;
}

/* A random UUID4, as fedora-messaging makes message ids. */
static void
s_uuid4 (char *out, size_t size)
{
    unsigned char u[16] = {0};
    if (getrandom (u, sizeof u, 0) != (ssize_t) sizeof u) {
        /* No entropy at all: the clock, so ids still differ. */
        struct timespec ts;
        clock_gettime (CLOCK_REALTIME, &ts);
        memcpy (u, &ts, sizeof ts < sizeof u ? sizeof ts : sizeof u);
    }
    u[6] = (unsigned char) ((u[6] & 0x0F) | 0x40);
    u[8] = (unsigned char) ((u[8] & 0x3F) | 0x80);
    snprintf (out, size, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
              u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
              u[13], u[14], u[15]);
}

/* fedora-messaging's sent-at: RFC 3339 with "+00:00" for 'Z'. */
static void
s_sent_at (int64_t seconds, char *out, size_t size)
{
    char text[FANHUB_RFC3339_SIZE];
    size_t n = fanhub_rfc3339 (text, seconds * 1000000000, 0);
    snprintf (out, size, "%.*s+00:00", (int) n - 1, text);
}

bridge_job_t *
bridge_fedora_job (const bridge_fedora_t *f, const char *key, size_t key_size, const void *body,
                   size_t body_size, int64_t received_ns)
{
    json_t *root = json_loadb (body, body_size, JSON_ALLOW_NUL, NULL);
    json_t *id_json = json_object_get (root, "msg_id");
    const char *msg_id = json_string_value (id_json);
    size_t id_size = json_string_length (id_json);
    json_t *timestamp = json_object_get (root, "timestamp");
    char *inner = NULL;
    if (f->body_msg && json_object_get (root, "msg"))
        inner = json_dumps (json_object_get (root, "msg"),
                            JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    const char *out_body = inner ? inner : body;
    size_t out_size = inner ? strlen (inner) : body_size;
    bridge_job_t *job = malloc (sizeof *job + key_size + out_size);
    if (job) {
        memset (job, 0, sizeof *job);
        job->fedora = true;
        job->json = root != NULL;
        job->key_size = key_size;
        job->body_size = out_size;
        memcpy (job->data, key, key_size);
        memcpy (job->data + key_size, out_body, out_size);
        /* One with a \u0000 in it cannot be a C string: a new one. */
        if (msg_id && id_size < sizeof job->props.message_id && !memchr (msg_id, 0, id_size))
            snprintf (job->props.message_id, sizeof job->props.message_id, "%s", msg_id);
        else
            s_uuid4 (job->props.message_id, sizeof job->props.message_id);
        /* A timestamp beyond what 64-bit nanoseconds hold (year 2262) is
           no time the message was sent: the receive time stands in. */
        double stamp = json_number_value (timestamp);
        bool usable = json_is_number (timestamp) && stamp > -9.2e9 && stamp < 9.2e9;
        s_sent_at (usable ? (int64_t) stamp : received_ns / 1000000000, job->props.sent_at,
                   sizeof job->props.sent_at);
        const bridge_rule_t *schema = s_match (f->schemas, f->schema_count, key, key_size);
        const bridge_rule_t *severity = s_match (f->severities, f->severity_count, key, key_size);
        job->props.schema = schema ? schema->name : f->schema;
        job->props.severity = severity ? severity->severity : f->severity;
    }
    free (inner);
    json_decref (root);
    return job;
}

/* envelope: fedora-messaging: what fedora_messaging/message.py sets. */
void
bridge_fedora_props (const bridge_job_t *job, void *props_arg, void *headers_arg)
{
    amqp_basic_properties_t *props = props_arg;
    amqp_table_entry_t *headers = headers_arg;
    const bridge_fedora_props_t *f = &job->props;
    props->_flags |= AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_CONTENT_ENCODING_FLAG
                     | AMQP_BASIC_MESSAGE_ID_FLAG;
    props->content_type = amqp_cstring_bytes ("application/json");
    props->content_encoding = amqp_cstring_bytes ("utf-8");
    props->message_id = amqp_cstring_bytes (f->message_id);
    int n = props->headers.num_entries;
    headers[n].key = amqp_cstring_bytes ("fedora_messaging_schema");
    headers[n].value.kind = AMQP_FIELD_KIND_UTF8;
    headers[n++].value.value.bytes = amqp_cstring_bytes (f->schema);
    headers[n].key = amqp_cstring_bytes ("fedora_messaging_severity");
    headers[n].value.kind = AMQP_FIELD_KIND_I32;
    headers[n++].value.value.i32 = f->severity;
    headers[n].key = amqp_cstring_bytes ("sent-at");
    headers[n].value.kind = AMQP_FIELD_KIND_UTF8;
    headers[n++].value.value.bytes = amqp_cstring_bytes (f->sent_at);
    headers[n].key = amqp_cstring_bytes ("priority");
    headers[n].value.kind = AMQP_FIELD_KIND_I32;
    headers[n++].value.value.i32 = 0;
    props->headers.num_entries = n;
}
