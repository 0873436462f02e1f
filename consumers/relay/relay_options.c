/*  relay_options - the relay plugin's options. See relay_options.h. */
#include "relay_options.h"

#include <fanhub/sdk.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R(name, type, field, def, lo, hi, flags, help)                                             \
    {                                                                                              \
        name, type, offsetof (relay_options_t, field), def, lo, hi, NULL, flags, help              \
    }
const fanhub_opt_t relay_option_table[] = {
    R ("bind", FANHUB_OPT_ENDPOINTS, bind, NULL, 0, 0, FANHUB_OPT_BIND,
       "endpoint(s) to bind the PUB socket to (or connect)"),
    R ("connect", FANHUB_OPT_ENDPOINTS, connect, NULL, 0, 0, FANHUB_OPT_ALTERNATIVE,
       "endpoint(s) to connect the PUB socket to (or bind)"),
    R ("topic_prefix", FANHUB_OPT_MAP, prefix, NULL, 0, 0, 0,
       "{from: PREFIX, to: PREFIX}: rewrite the start of topics"),
    R ("topic_prefix.from", FANHUB_OPT_STRING, from, NULL, 0, 0, FANHUB_OPT_REQUIRED,
       "the prefix to replace (\"\" is allowed)"),
    R ("topic_prefix.to", FANHUB_OPT_STRING, to, NULL, 0, 0, FANHUB_OPT_REQUIRED,
       "what replaces it (\"\" is allowed)"),
    R ("sndhwm", FANHUB_OPT_INT, sndhwm, "0", 0, INT_MAX, 0,
       "messages queued per subscriber before ZeroMQ drops (0: no limit)"),
    R ("linger_ms", FANHUB_OPT_INT, linger_ms, "1000", -1, RELAY_MS_MAX, 0,
       "how long fini waits for queued messages to go out (-1: forever)"),
    R ("require_subscriber", FANHUB_OPT_BOOL, require_subscriber, "false", 0, 0, 0,
       "answer RETRY while no subscriber wants the topic"),
    R ("subscriber_wait_ms", FANHUB_OPT_DURATION, subscriber_wait_ms, "0", 0, RELAY_MS_MAX, 0,
       "with require_subscriber: how long to wait for one"),
    R ("curve", FANHUB_OPT_MAP, curve, NULL, 0, 0, 0,
       "CurveZMQ: {secret_key_file, server_public_key | allow, allow_dir}"),
    R ("curve.secret_key_file", FANHUB_OPT_FILE, secret_key_file, NULL, 0, 0, FANHUB_OPT_REQUIRED,
       "the relay's key pair (fanhub keygen writes one)"),
    R ("curve.server_public_key", FANHUB_OPT_STRING, server_public_key, NULL, 0, 0, 0,
       "with connect: the receiving hub's public key (40 characters of Z85)"),
    R ("curve.allow", FANHUB_OPT_STRINGS, allow, NULL, 0, 0, 0,
       "with bind: the public keys of the subscribers to let in"),
    R ("curve.allow_dir", FANHUB_OPT_FILE, allow_dir, NULL, 0, 0, 0,
       "with bind: a directory of the subscribers' public key files"),
    FANHUB_OPT_END,
};

const fanhub_option_t *
relay_endpoint_at (const fanhub_host_t *host, const fanhub_option_t *node, size_t i)
{
    if (host->option_kind (node) == FANHUB_OPTION_SCALAR)
        return i == 0 ? node : NULL;
    return host->option_at (node, i, NULL);
}

/* options.curve: what its keys mean together (the table read each). */
static int
s_check_curve (const fanhub_host_t *host, relay_options_t *out, bool binding, char *err,
               size_t errlen)
{
    const char *where = host->option_where (out->curve);
    if (out->server_public_key && !fanhub_curve_key_valid (out->server_public_key)) {
        snprintf (err, errlen,
                  "options.curve.server_public_key: expected a CurveZMQ public key (40 "
                  "characters of Z85) (%s)",
                  host->option_where (host->option_get (out->curve, "server_public_key")));
        return -1;
    }
    for (size_t k = 0; out->allow && k < host->option_count (out->allow); k++)
        if (!fanhub_curve_key_valid (host->option_scalar (host->option_at (out->allow, k, NULL)))) {
            snprintf (err, errlen,
                      "options.curve.allow[%zu]: expected a CurveZMQ public key (40 characters "
                      "of Z85) (%s)",
                      k, host->option_where (out->allow));
            return -1;
        }
    if (!binding && !out->server_public_key) {
        snprintf (err, errlen,
                  "options.curve.server_public_key: missing: with connect, "
                  "the receiving hub's public key (%s)",
                  where);
        return -1;
    }
    if (binding && !out->allow_dir && !(out->allow && host->option_count (out->allow))) {
        snprintf (err, errlen,
                  "options.curve.allow: missing: with bind, the keys of the "
                  "subscribers to let in (allow: or allow_dir:) (%s)",
                  where);
        return -1;
    }
    char why[512];
    if (fanhub_curve_load_secret (out->secret_key_file, out->public_key, out->secret_key, why,
                                  sizeof why)
        != 0) {
        snprintf (err, errlen, "options.curve.secret_key_file: %s (%s)", why, where);
        return -1;
    }
    return 0;
}

int
relay_options_read (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
                    relay_options_t *out, char *err, size_t errlen)
{
    *out = (relay_options_t){0};
    if (host->options_load (ctx, options, out, sizeof *out, err, errlen) != 0)
        return -1;
    if (!out->bind && !out->connect) {
        snprintf (err, errlen,
                  "options: relay needs bind or connect: where to publish "
                  "(%s)",
                  options ? host->option_where (options) : "?");
        return -1;
    }
    out->endpoints = out->bind ? out->bind : out->connect;
    out->endpoints_key = out->bind ? "bind" : "connect";
    return out->curve ? s_check_curve (host, out, out->bind != NULL, err, errlen) : 0;
}

/* What binding an ipc endpoint needs that its spelling does not show (the
   table checked that): a directory where the socket can be made. Found
   without a socket: 0, or -1 with why. That a tcp port is free is found
   only by binding it, which check does not do. */
int
relay_endpoint_check (const char *endpoint, bool binding, char *why, size_t whylen)
{
    if (!binding || strncmp (endpoint, "ipc://", 6) != 0 || endpoint[6] == '@')
        return 0;
    bool exists;
    char probe[PATH_MAX + 128];
    if (fanhub_probe_file (endpoint + 6, &exists, probe, sizeof probe) != 0) {
        snprintf (why, whylen, "%s", probe);
        return -1;
    }
    return 0;
}
