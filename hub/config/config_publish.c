/*  config_publish - a consumer's `publish:`: where the messages its
    plugin publishes (host->publish, ABI 1.5) go, and in what shape.

    bind and connect are endpoint lists (at least one endpoint between
    them, or local: true), envelope none or fedmsg, sign {cert, key} (fedmsg only: the
    pair is loaded here once, so `fanhub check` refuses a key that does
    not load, with FILE:LINE:COL), local, queue. No key is live: a reload
    that changes one replaces the consumer (config_reload.c compares the
    rows of these tables). publish.h uses the values.
*/
#include "config_internal.h"

#include "fedmsg_sign.h"

#include <stddef.h>
#include <stdlib.h>

static const char *const s_envelope_words[] = {"none", "fedmsg", NULL};

/* Across the keys: an endpoint at least; sign needs the fedmsg
   envelope, and its pair loads. */
static int
s_publish_finish (fh_yaml_t *ctx, yaml_node_t *node, void *target)
{
    fh_publish_config_t *publish = target;
    if (publish->bind.count + publish->connect.count == 0 && !publish->local)
        return fh_yaml_error (ctx, node->start_mark,
                              "expected at least one endpoint in bind: or connect:, or local: "
                              "true");
    if (!publish->queue)
        publish->queue = FH_DEFAULT_PUBLISH_QUEUE;
    if (!publish->sign.key)
        return 0;
    if (publish->envelope != FH_ENVELOPE_FEDMSG)
        return fh_yaml_key_error (ctx, node, "sign",
                                  "a signature is part of fedmsg's envelope: give envelope: "
                                  "fedmsg");
    char why[512];
    fh_fedmsg_signer_t *signer
        = fh_fedmsg_signer_new (publish->sign.key, publish->sign.cert, why, sizeof why);
    if (!signer)
        return fh_yaml_key_error (ctx, node, "sign", "%s", why);
    fh_fedmsg_signer_destroy (&signer);
    return 0;
}

/* clang-format off */
static const fh_cfg_field_t s_sign_fields[] = {
    { .opt = { .name = "cert", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_publish_config_t, sign.cert), .flags = FANHUB_OPT_REQUIRED } },
    { .opt = { .name = "key", .type = FANHUB_OPT_FILE,
               .offset = offsetof (fh_publish_config_t, sign.key), .flags = FANHUB_OPT_REQUIRED } },
    { .opt = { .name = NULL } },
};

static const fh_cfg_section_t s_sign_section = { s_sign_fields, NULL };

static const fh_cfg_field_t s_publish_fields[] = {
    { .opt = { .name = "bind", .offset = offsetof (fh_publish_config_t, bind),
               .flags = FANHUB_OPT_BIND }, .parse = fh_cfg_parse_endpoints },
    { .opt = { .name = "connect", .offset = offsetof (fh_publish_config_t, connect) },
      .parse = fh_cfg_parse_endpoints },
    { .opt = { .name = "envelope", .type = FANHUB_OPT_ENUM,
               .offset = offsetof (fh_publish_config_t, envelope), .values = s_envelope_words } },
    { .opt = { .name = "sign" }, .parse = fh_cfg_parse_section, .section = &s_sign_section },
    { .opt = { .name = "local", .type = FANHUB_OPT_BOOL,
               .offset = offsetof (fh_publish_config_t, local) } },
    { .opt = { .name = "queue", .type = FANHUB_OPT_UINT,
               .offset = offsetof (fh_publish_config_t, queue), .min = 1, .max = 10000000 } },
    { .opt = { .name = NULL } },
};
/* clang-format on */

const fh_cfg_section_t fh_cfg_publish_section = {s_publish_fields, s_publish_finish};

void
fh_cfg_publish_clear (fh_publish_config_t *publish)
{
    fh_cfg_strlist_clear (&publish->bind);
    fh_cfg_strlist_clear (&publish->connect);
    free (publish->sign.cert);
    free (publish->sign.key);
    publish->sign.cert = publish->sign.key = NULL;
}
