/*  config_reload - a reload's questions, answered from the tables that
    parse the file: which keys differ between two configurations, and
    whether a consumer's differ only in keys a running instance takes.
*/
#include "config_internal.h"

#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static bool
s_string_equal (const char *a, const char *b)
{
    return a == b || (a && b && strcmp (a, b) == 0);
}

static bool
s_strlist_equal (const fh_strlist_t *a, const fh_strlist_t *b)
{
    if (a->count != b->count)
        return false;
    for (size_t i = 0; i < a->count; i++)
        if (strcmp (a->items[i], b->items[i]) != 0)
            return false;
    return true;
}

/* Whether a field holds the same value in a and b (the field's address
   in each). Every parse function stores one type: a function missing
   here is a programmer's error, caught by the unit test that compares
   every key. */
static bool
s_field_equal (const fh_cfg_field_t *field, const void *a, const void *b)
{
    fh_cfg_parse_fn *parse = field->parse;
    if (!parse)
        return fh_cfg_typed_equal (field, a, b);
    if (parse == fh_cfg_parse_permille)
        return *(const int64_t *) a == *(const int64_t *) b;
    if (parse == fh_cfg_parse_name || parse == fh_cfg_parse_consumer_name
        || parse == fh_cfg_parse_plugin || parse == fh_cfg_parse_control
        || parse == fh_cfg_parse_listen || parse == fh_cfg_parse_bind_endpoint
        || parse == fh_cfg_parse_order_by || parse == fh_cfg_parse_producer
        || parse == fh_cfg_parse_key)
        return s_string_equal (*(char *const *) a, *(char *const *) b);
    if (parse == fh_cfg_parse_endpoints || parse == fh_cfg_parse_topics
        || parse == fh_cfg_parse_keys || parse == fh_cfg_parse_addresses
        || parse == fh_cfg_parse_include)
        return s_strlist_equal (a, b);
    if (parse == fh_cfg_parse_shard)
        return memcmp (a, b, 2 * sizeof (size_t)) == 0;
    if (parse == fh_cfg_parse_options || parse == fh_cfg_parse_amqp
        || parse == fh_cfg_parse_signatures)
        return fh_option_equal (*(fanhub_option_t *const *) a, *(fanhub_option_t *const *) b);
    if (parse == fh_cfg_parse_fedora_messaging) { /* the file as it read, normalised */
        const json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;
        return x == y || (x && y && json_equal (x, y));
    }
    assert (!"a configuration field without a comparison");
    return false;
}

/* Appends to out the keys of section (at a and b) that differ and are
   not live; returns how many. Consumers are compared by the hub. */
static size_t
s_diff_section (const fh_cfg_section_t *section, const char *prefix, const void *a, const void *b,
                bool live_only, char *out, size_t outlen)
{
    size_t found = 0;
    for (const fh_cfg_field_t *field = section->fields; field->opt.name; field++) {
        const char *fa = (const char *) a + field->opt.offset;
        const char *fb = (const char *) b + field->opt.offset;
        char key[128];
        snprintf (key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", field->opt.name);
        if (field->parse == fh_cfg_parse_consumers)
            continue;
        if (field->parse == fh_cfg_parse_section) {
            found += s_diff_section (field->section, key, fa, fb, live_only, out, outlen);
            continue;
        }
        if (field->live == live_only && !s_field_equal (field, fa, fb)) {
            size_t used = strlen (out);
            snprintf (out + used, outlen - used, "%s%s", used ? ", " : "", key);
            found++;
        }
    }
    return found;
}

size_t
fh_config_restart_keys (const fh_config_t *running, const fh_config_t *next, char *out,
                        size_t outlen)
{
    out[0] = '\0';
    return s_diff_section (&fh_cfg_top_section, "", running, next, false, out, outlen);
}

bool
fh_config_consumer_same (const fh_consumer_config_t *a, const fh_consumer_config_t *b)
{
    char keys[512] = "";
    /* "where" is not a key: a consumer that moved in the file is the same. */
    return s_diff_section (&fh_cfg_consumer_section, "", a, b, false, keys, sizeof keys) == 0;
}
