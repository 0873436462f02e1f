/*  config_signatures - bus.validate_signatures: kept as an option tree
    (config.h), checked here by loading it once (fedmsg_settings.h), so a
    CA, CRL or policy that does not load fails `fanhub check` and a start
    with FILE:LINE:COL. The enqueuer loads it again for its own verifier.
*/
#include "config_internal.h"

#include "fedmsg_settings.h"

#include <stdio.h>

int
fh_cfg_parse_signatures (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                         const fh_cfg_field_t *field)
{
    if (node->type != YAML_MAPPING_NODE) {
        char buf[FH_YAML_GOT_SIZE];
        return fh_yaml_error (ctx, node->start_mark, "expected a map (ca:, crl:, ...), got %s",
                              fh_yaml_got (node, buf, sizeof buf));
    }
    if (fh_cfg_parse_options (ctx, node, target, field))
        return -1;
    const char *where = NULL;
    char why[1024];
    bool deliver;
    fh_sig_verifier_t *verifier
        = fh_sig_settings_load (*(fanhub_option_t **) target, &deliver, &where, why, sizeof why);
    if (!verifier) {
        snprintf (ctx->err, ctx->errlen, "%s: bus.validate_signatures.%s",
                  where ? where : ctx->source, why);
        return -1;
    }
    fh_sig_verifier_destroy (&verifier);
    return 0;
}
