/*  relay_options - the relay plugin's options. See relay_options.h. */
#include "relay_options.h"

#include <fanhub/sdk.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const fanhub_opt_t relay_option_table[] = {
    FANHUB_OPT_FIELD (relay_options_t, "bind", FANHUB_OPT_ANY, bind, NULL, 0, 0,
                      "endpoint(s) to bind the PUB socket to (or connect)"),
    FANHUB_OPT_FIELD (relay_options_t, "connect", FANHUB_OPT_ANY, connect, NULL, 0, 0,
                      "endpoint(s) to connect the PUB socket to (or bind)"),
    FANHUB_OPT_FIELD (relay_options_t, "topic_prefix", FANHUB_OPT_ANY, prefix, NULL, 0, 0,
                      "{from: PREFIX, to: PREFIX}: rewrite the start of topics"),
    FANHUB_OPT_FIELD (relay_options_t, "sndhwm", FANHUB_OPT_INT, sndhwm, "0", 0, INT_MAX,
                      "messages queued per subscriber before ZeroMQ drops (0: no limit)"),
    FANHUB_OPT_FIELD (relay_options_t, "linger_ms", FANHUB_OPT_INT, linger_ms, "1000", -1,
                      RELAY_MS_MAX,
                      "how long fini waits for queued messages to go out (-1: forever)"),
    FANHUB_OPT_FIELD (relay_options_t, "require_subscriber", FANHUB_OPT_BOOL, require_subscriber,
                      "false", 0, 0, "answer RETRY while no subscriber wants the topic"),
    FANHUB_OPT_FIELD (relay_options_t, "subscriber_wait_ms", FANHUB_OPT_DURATION,
                      subscriber_wait_ms, "0", 0, RELAY_MS_MAX,
                      "with require_subscriber: how long to wait for one"),
    FANHUB_OPT_FIELD (relay_options_t, "curve", FANHUB_OPT_ANY, curve, NULL, 0, 0,
                      "CurveZMQ: {secret_key_file, server_public_key | allow, allow_dir}"),
    FANHUB_OPT_END,
};

/* Endpoint i of a bind/connect node (a scalar is a list of one). */
const fanhub_option_t *
relay_endpoint_at (const fanhub_host_t *host, const fanhub_option_t *node, size_t i)
{
    if (host->option_kind (node) == FANHUB_OPTION_SCALAR)
        return i == 0 ? node : NULL;
    return host->option_at (node, i, NULL);
}

size_t
relay_endpoint_count (const fanhub_host_t *host, const fanhub_option_t *node)
{
    if (host->option_kind (node) == FANHUB_OPTION_SCALAR)
        return 1;
    return host->option_count (node);
}

static int
s_check_endpoints (const fanhub_host_t *host, const fanhub_option_t *node, const char *key,
                   char *err, size_t errlen)
{
    fanhub_option_kind_t kind = host->option_kind (node);
    if (kind == FANHUB_OPTION_MAP) {
        snprintf (err, errlen,
                  "options.%s: expected an endpoint or a list of endpoints, "
                  "got a map (%s)",
                  key, host->option_where (node));
        return -1;
    }
    size_t count = relay_endpoint_count (host, node);
    if (count == 0) {
        snprintf (err, errlen,
                  "options.%s: expected at least one endpoint, got an empty "
                  "list (%s)",
                  key, host->option_where (node));
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const fanhub_option_t *item = relay_endpoint_at (host, node, i);
        const char *text = host->option_scalar (item);
        if (!text || !*text) {
            snprintf (err, errlen,
                      "options.%s: expected an endpoint such as "
                      "tcp://127.0.0.1:9941, got %s (%s)",
                      key,
                      text ? "an empty string" : fanhub_option_kind_name (host->option_kind (item)),
                      host->option_where (item));
            return -1;
        }
    }
    return 0;
}

static int
s_check_prefix (const fanhub_host_t *host, const fanhub_option_t *node, char *err, size_t errlen)
{
    if (host->option_kind (node) != FANHUB_OPTION_MAP) {
        snprintf (err, errlen,
                  "options.topic_prefix: expected a map {from: PREFIX, to: "
                  "PREFIX}, got %s (%s)",
                  fanhub_option_kind_name (host->option_kind (node)), host->option_where (node));
        return -1;
    }
    size_t count = host->option_count (node);
    for (size_t i = 0; i < count; i++) {
        const char *key = NULL;
        const fanhub_option_t *item = host->option_at (node, i, &key);
        if (!key || (strcmp (key, "from") != 0 && strcmp (key, "to") != 0)) {
            snprintf (err, errlen,
                      "options.topic_prefix.%s: unknown key; topic_prefix "
                      "takes from and to (%s)",
                      key ? key : "?", host->option_where (item));
            return -1;
        }
        if (!host->option_scalar (item)) {
            snprintf (err, errlen,
                      "options.topic_prefix.%s: expected a topic prefix "
                      "(a string, \"\" allowed), got %s (%s)",
                      key, fanhub_option_kind_name (host->option_kind (item)),
                      host->option_where (item));
            return -1;
        }
    }
    static const char *const keys[] = {"from", "to"};
    for (size_t k = 0; k < 2; k++)
        if (!host->option_get (node, keys[k])) {
            snprintf (err, errlen,
                      "options.topic_prefix: %s is missing; give both from "
                      "and to (\"\" is allowed) (%s)",
                      keys[k], host->option_where (node));
            return -1;
        }
    return 0;
}

/* options.curve: a map of secret_key_file (read here, and refused when
   others can read it), server_public_key (connect), allow and allow_dir
   (bind). */
static int
s_check_curve (const fanhub_host_t *host, relay_options_t *out, bool binding, char *err,
               size_t errlen)
{
    const fanhub_option_t *curve = out->curve;
    const char *where = host->option_where (curve);
    if (host->option_kind (curve) != FANHUB_OPTION_MAP) {
        snprintf (err, errlen,
                  "options.curve: expected a map (secret_key_file, "
                  "server_public_key or allow/allow_dir), got %s (%s)",
                  fanhub_option_kind_name (host->option_kind (curve)), where);
        return -1;
    }
    bool have_allow = false;
    const char *server_key = NULL, *secret_file = NULL;
    for (size_t i = 0; i < host->option_count (curve); i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (curve, i, &key);
        const char *text = host->option_scalar (node);
        if (key && strcmp (key, "secret_key_file") == 0 && text && *text)
            secret_file = text;
        else if (key && strcmp (key, "server_public_key") == 0 && fanhub_curve_key_valid (text))
            server_key = text;
        else if (key && strcmp (key, "allow_dir") == 0 && text && *text)
            have_allow = true;
        else if (key && strcmp (key, "allow") == 0) {
            size_t n = host->option_kind (node) == FANHUB_OPTION_LIST ? host->option_count (node)
                                                                      : 0;
            for (size_t k = 0; k < n; k++)
                if (!fanhub_curve_key_valid (
                        host->option_scalar (host->option_at (node, k, NULL)))) {
                    snprintf (err, errlen,
                              "options.curve.allow[%zu]: expected a CurveZMQ "
                              "public key (40 characters of Z85) (%s)",
                              k, host->option_where (node));
                    return -1;
                }
            if (n == 0) {
                snprintf (err, errlen, "options.curve.allow: expected a list of keys (%s)",
                          host->option_where (node));
                return -1;
            }
            have_allow = true;
        }
        else {
            snprintf (err, errlen,
                      "options.curve.%s: unknown key or bad value; curve takes "
                      "secret_key_file (a path), server_public_key (a 40-character Z85 "
                      "key), allow (a list of keys) and allow_dir (a path) (%s)",
                      key ? key : "?", host->option_where (node));
            return -1;
        }
    }
    if (!secret_file) {
        snprintf (err, errlen,
                  "options.curve.secret_key_file: missing; fanhub keygen "
                  "writes a key pair (%s)",
                  where);
        return -1;
    }
    if (!binding && !server_key) {
        snprintf (err, errlen,
                  "options.curve.server_public_key: missing: with connect, "
                  "the receiving hub's public key (%s)",
                  where);
        return -1;
    }
    if (binding && !have_allow) {
        snprintf (err, errlen,
                  "options.curve.allow: missing: with bind, the keys of the "
                  "subscribers to let in (allow: or allow_dir:) (%s)",
                  where);
        return -1;
    }
    char why[512];
    if (fanhub_curve_load_secret (secret_file, out->public_key, out->secret_key, why, sizeof why)
        != 0) {
        snprintf (err, errlen, "options.curve.secret_key_file: %s (%s)", why, where);
        return -1;
    }
    return 0;
}

int
relay_options_read (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                    const fanhub_consumer_desc_t *desc, const fanhub_option_t *options,
                    relay_options_t *out, char *err, size_t errlen)
{
    *out = (relay_options_t){0};
    if (host->options_read (ctx, desc, options, out, sizeof *out, err, errlen) != 0)
        return -1;
    const fanhub_option_t *bind = out->bind, *connect = out->connect;
    if ((bind && s_check_endpoints (host, bind, "bind", err, errlen))
        || (connect && s_check_endpoints (host, connect, "connect", err, errlen))
        || (out->prefix && s_check_prefix (host, out->prefix, err, errlen)))
        return -1;
    if (bind && connect) {
        snprintf (err, errlen, "options.connect: give bind or connect, not both (%s)",
                  host->option_where (connect));
        return -1;
    }
    if (!bind && !connect) {
        snprintf (err, errlen,
                  "options: relay needs bind or connect: where to publish "
                  "(%s)",
                  options ? host->option_where (options) : "?");
        return -1;
    }
    out->endpoints = bind ? bind : connect;
    out->endpoints_key = bind ? "bind" : "connect";
    return out->curve ? s_check_curve (host, out, bind != NULL, err, errlen) : 0;
}

/* What zmq_bind or zmq_connect would refuse of an endpoint's spelling,
   found without a socket: 0, or -1 with why. A tcp port must be a number
   from 1 to 65535 (or * to bind any); an ipc path that run would bind
   needs a writable directory. That the port is free is found only by
   binding it, which check does not do. */
int
relay_endpoint_check (const char *endpoint, bool binding, char *why, size_t whylen)
{
    const char *sep = strstr (endpoint, "://");
    if (!sep || sep == endpoint || !sep[3]) {
        snprintf (why, whylen, "%s: expected TRANSPORT://ADDRESS, such as tcp://127.0.0.1:9941",
                  strerror (EINVAL));
        return -1;
    }
    size_t tlen = (size_t) (sep - endpoint);
    const char *address = sep + 3;
    static const char *const transports[]
        = {"tcp", "ipc", "inproc", "pgm", "epgm", "tipc", "vmci", "ws", "wss", "udp"};
    bool known = false;
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (strlen (transports[i]) == tlen && strncmp (endpoint, transports[i], tlen) == 0)
            known = true;
    if (!known) {
        snprintf (why, whylen, "%s: '%.*s'", strerror (EPROTONOSUPPORT), (int) tlen, endpoint);
        return -1;
    }
    if (tlen == 3 && strncmp (endpoint, "tcp", 3) == 0) {
        const char *colon = strrchr (address, ':');
        if (!colon || colon == address) {
            snprintf (why, whylen, "%s: expected HOST:PORT after tcp://", strerror (EINVAL));
            return -1;
        }
        const char *port = colon + 1;
        if (binding && strcmp (port, "*") == 0)
            return 0;
        size_t digits = strspn (port, "0123456789");
        long number = digits && digits <= 5 && !port[digits] ? strtol (port, NULL, 10) : 0;
        if (number < 1 || number > 65535) {
            snprintf (why, whylen, "%s: port '%s': expected 1 to 65535%s", strerror (EINVAL), port,
                      binding ? " or *" : "");
            return -1;
        }
    }
    if (binding && tlen == 3 && strncmp (endpoint, "ipc", 3) == 0 && address[0] != '@') {
        bool exists;
        char probe[PATH_MAX + 128];
        if (fanhub_probe_file (address, &exists, probe, sizeof probe) != 0) {
            snprintf (why, whylen, "%s", probe);
            return -1;
        }
    }
    return 0;
}
