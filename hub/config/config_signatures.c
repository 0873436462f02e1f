/*  config_signatures - bus.validate_signatures: kept as an option tree
    (config.h), checked here by loading it once (fedmsg_settings.h), so a
    CA, CRL or policy that does not load fails `fanhub check` and a start
    with FILE:LINE:COL. The enqueuer loads it again for its own verifier.
*/
#include "config_internal.h"

#include "fedmsg_settings.h"

#include <stdio.h>

static int
s_check (const fanhub_option_t *tree, const char *source, char *err, size_t errlen)
{
    bool deliver;
    const char *where = NULL;
    char why[1024];
    fh_sig_verifier_t *verifier = fh_sig_settings_load (tree, &deliver, &where, why, sizeof why);
    if (!verifier) {
        snprintf (err, errlen, "%s: bus.validate_signatures.%s", where ? where : source, why);
        return -1;
    }
    fh_sig_verifier_destroy (&verifier);
    return 0;
}

int
fh_cfg_parse_signatures (fh_yaml_t *ctx, yaml_node_t *node, void *target,
                         const fh_cfg_field_t *field)
{
    return fh_cfg_parse_checked_tree (ctx, node, target, field, "ca:, crl:", s_check);
}
