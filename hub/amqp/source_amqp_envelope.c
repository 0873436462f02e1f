/*  source_amqp_envelope - bus.amqp's `envelope: fedora-messaging`: a
    delivery published by fedora-messaging becomes a fedmsg envelope, so
    that the hub and its consumers see its id as `msg_id`, as fedmsg
    consumers read it. See source_amqp_settings.h and docs/fedora.md.
    Also a fedora_messaging consumer's third frame: the delivery's
    properties, as fedora-messaging's Message is made from them.
*/
#include "source_amqp_settings.h"

#include "clock.h"
#include "pyjson.h"

#include <amqp.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One AMQP header value as JSON, or NULL for kinds JSON has no word for. */
static json_t *
s_field_json (const amqp_field_value_t *v)
{
    switch (v->kind) {
    case AMQP_FIELD_KIND_BOOLEAN: return json_boolean (v->value.boolean);
    case AMQP_FIELD_KIND_I8: return json_integer (v->value.i8);
    case AMQP_FIELD_KIND_U8: return json_integer (v->value.u8);
    case AMQP_FIELD_KIND_I16: return json_integer (v->value.i16);
    case AMQP_FIELD_KIND_U16: return json_integer (v->value.u16);
    case AMQP_FIELD_KIND_I32: return json_integer (v->value.i32);
    case AMQP_FIELD_KIND_U32: return json_integer (v->value.u32);
    case AMQP_FIELD_KIND_I64: return json_integer (v->value.i64);
    case AMQP_FIELD_KIND_U64:
    case AMQP_FIELD_KIND_TIMESTAMP: return json_integer ((json_int_t) v->value.u64);
    case AMQP_FIELD_KIND_F32: return json_real (v->value.f32);
    case AMQP_FIELD_KIND_F64: return json_real (v->value.f64);
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: return json_stringn (v->value.bytes.bytes, v->value.bytes.len);
    default: return NULL;
    }
}

/* fedora-messaging's sent-at, "2024-06-21T12:52:29+00:00" (RFC 3339:
   microseconds and another offset allowed), in whole seconds; -1 when it
   is not one. */
static int64_t
s_sent_at (const amqp_bytes_t *text)
{
    char buf[64];
    int64_t ns;
    if (text->len == 0 || text->len >= sizeof buf)
        return -1;
    memcpy (buf, text->bytes, text->len);
    buf[text->len] = '\0';
    if (!fh_clock_parse_rfc3339 (buf, &ns))
        return -1;
    return ns >= 0 ? ns / 1000000000 : -1; /* before 1970: not a sending time */
}

int
fh_amqp_fedora_envelope (const amqp_envelope_t *envelope, fh_buf_t *out)
{
    const amqp_basic_properties_t *p = &envelope->message.properties;
    const amqp_bytes_t *body = &envelope->message.body;
    json_t *msg = json_loadb (body->bytes, body->len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    json_t *topic = json_stringn (envelope->routing_key.bytes, envelope->routing_key.len);
    json_t *root = json_object ();
    json_t *headers = json_object ();
    int64_t timestamp = -1;
    if (!msg || !topic || !root || !headers) {
        json_decref (msg);
        json_decref (topic);
        json_decref (root);
        json_decref (headers);
        return -1; /* not JSON (or a topic that is not UTF-8): as it came */
    }
    for (int i = 0; (p->_flags & AMQP_BASIC_HEADERS_FLAG) && i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        json_t *value = s_field_json (&e->value);
        if (value)
            json_object_setn_new (headers, e->key.bytes, e->key.len, value);
        if (e->key.len == 7 && memcmp (e->key.bytes, "sent-at", 7) == 0
            && e->value.kind == AMQP_FIELD_KIND_UTF8)
            timestamp = s_sent_at (&e->value.value.bytes);
    }
    if (timestamp < 0 && (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG))
        timestamp = (int64_t) p->timestamp;
    if (timestamp < 0)
        timestamp = (int64_t) time (NULL);
    json_object_set_new (root, "topic", topic);
    json_object_set_new (root, "msg", msg);
    json_object_set_new (root, "timestamp", json_integer ((json_int_t) timestamp));
    json_object_set_new (root, "headers", headers);
    if ((p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) && p->message_id.len)
        json_object_set_new (root, "msg_id", json_stringn (p->message_id.bytes, p->message_id.len));
    fh_pyjson_encode (out, root);
    json_decref (root);
    return out->failed ? -1 : 0;
}

int
fh_amqp_fedora_properties (const amqp_envelope_t *envelope, const char *queue, fh_buf_t *out)
{
    const amqp_basic_properties_t *p = &envelope->message.properties;
    json_t *root = json_object ();
    json_t *headers = json_object ();
    if (!root || !headers) {
        json_decref (root);
        json_decref (headers);
        return -1;
    }
    for (int i = 0; (p->_flags & AMQP_BASIC_HEADERS_FLAG) && i < p->headers.num_entries; i++) {
        const amqp_table_entry_t *e = &p->headers.entries[i];
        json_t *value = s_field_json (&e->value);
        if (value)
            json_object_setn_new (headers, e->key.bytes, e->key.len, value);
    }
    json_object_set_new (root, "headers", headers);
    const struct {
        uint32_t flag;
        const char *name;
        const amqp_bytes_t *value;
    } texts[] = {
        {AMQP_BASIC_MESSAGE_ID_FLAG, "message_id", &p->message_id},
        {AMQP_BASIC_CONTENT_TYPE_FLAG, "content_type", &p->content_type},
        {AMQP_BASIC_CONTENT_ENCODING_FLAG, "content_encoding", &p->content_encoding},
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        if (p->_flags & texts[i].flag)
            json_object_set_new (root, texts[i].name,
                                 json_stringn (texts[i].value->bytes, texts[i].value->len));
    if (p->_flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        json_object_set_new (root, "delivery_mode", json_integer (p->delivery_mode));
    if (p->_flags & AMQP_BASIC_PRIORITY_FLAG)
        json_object_set_new (root, "priority", json_integer (p->priority));
    if (queue)
        json_object_set_new (root, "queue", json_string (queue));
    fh_pyjson_encode (out, root);
    json_decref (root);
    return out->failed ? -1 : 0;
}
