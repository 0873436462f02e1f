/*  fedmsg_settings - bus.validate_signatures. See fedmsg_settings.h. */
#include "fedmsg_settings.h"
#include "value.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A scalar that is a path, or NULL after saying why. */
static const char *
s_path (const fanhub_option_t *node, const char *key, const char **where, char *why, size_t whylen)
{
    const char *text = fh_option_scalar (node);
    if (!text || !*text) {
        *where = fh_option_where (node);
        snprintf (why, whylen, "%s: expected a file name", key);
        return NULL;
    }
    return text;
}

/* routing_policy: {TOPIC: [NAME, ...]} into entries pointing at the tree
   (the verifier copies them). -1 after saying why. */
static int
s_policy (const fanhub_option_t *node, fh_sig_policy_t **policy_p, size_t *count_p,
          const char ***names_p, const char **where, char *why, size_t whylen)
{
    *policy_p = NULL;
    *names_p = NULL;
    *count_p = 0;
    if (!node)
        return 0;
    *where = fh_option_where (node);
    if (fh_option_kind (node) != FANHUB_OPTION_MAP) {
        snprintf (why, whylen, "routing_policy: expected a map of topic: [names]");
        return -1;
    }
    size_t count = fh_option_count (node);
    fh_sig_policy_t *policy = calloc (count ? count : 1, sizeof *policy);
    const char **names = calloc (1, sizeof *names); /* grows below */
    int rc = policy && names ? 0 : -1;
    if (rc < 0)
        snprintf (why, whylen, "routing_policy: out of memory");
    size_t name_total = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const char *topic;
        const fanhub_option_t *list = fh_option_at (node, i, &topic);
        size_t n = fh_option_count (list);
        if (fh_option_kind (list) != FANHUB_OPTION_LIST) {
            *where = fh_option_where (list);
            snprintf (why, whylen, "routing_policy.%s: expected a list of certificate names",
                      topic);
            rc = -1;
            break;
        }
        const char **grown = realloc (names, (name_total + n + 1) * sizeof *names);
        if (!grown) {
            snprintf (why, whylen, "routing_policy: out of memory");
            rc = -1;
            break;
        }
        names = grown;
        for (size_t j = 0; j < n && rc == 0; j++) {
            const fanhub_option_t *item = fh_option_at (list, j, NULL);
            if (!(names[name_total + j] = fh_option_scalar (item))) {
                *where = fh_option_where (item);
                snprintf (why, whylen, "routing_policy.%s: expected names, got a %s", topic,
                          fh_option_kind (item) == FANHUB_OPTION_MAP ? "map" : "list");
                rc = -1;
            }
        }
        /* Offsets now; pointers once the array stops moving. */
        policy[i] = (fh_sig_policy_t){topic, (const char *const *) (uintptr_t) name_total, n};
        name_total += n;
    }
    for (size_t i = 0; rc == 0 && i < count; i++)
        policy[i].names = names + (uintptr_t) policy[i].names;
    if (rc < 0) {
        free (policy);
        free (names);
        return -1;
    }
    *policy_p = policy;
    *names_p = names;
    *count_p = count;
    return 0;
}

static int
s_bool (const fanhub_option_t *node, const char *key, bool *value, const char **where, char *why,
        size_t whylen)
{
    const char *text = fh_option_scalar (node);
    if (!node)
        return 0;
    if (text && fh_value_bool (text, value))
        return 0;
    *where = fh_option_where (node);
    snprintf (why, whylen, "%s: expected true or false", key);
    return -1;
}

/* max_field_bytes and on_crl_expired, into the verifier's limits. -1
   after saying why. */
static int
s_limits (const fanhub_option_t *node, size_t *max_field, bool *accept, const char **where,
          char *why, size_t whylen)
{
    const fanhub_option_t *size = fh_option_get (node, "max_field_bytes");
    const fanhub_option_t *crl = fh_option_get (node, "on_crl_expired");
    const char *text = size ? fh_option_scalar (size) : NULL;
    long long bytes = FH_SIG_FIELD_MAX_DEFAULT;
    if (size && (!text || !fh_value_size (text, &bytes) || bytes < 1024 || bytes > (64 << 20))) {
        *where = fh_option_where (size);
        snprintf (why, whylen, "max_field_bytes: expected %s, from 1KiB to 64MiB",
                  FH_VALUE_SIZE_HINT);
        return -1;
    }
    text = crl ? fh_option_scalar (crl) : "reject";
    if (!text || (strcmp (text, "reject") != 0 && strcmp (text, "accept") != 0)) {
        *where = fh_option_where (crl);
        snprintf (why, whylen, "on_crl_expired: expected reject or accept");
        return -1;
    }
    *max_field = (size_t) bytes;
    *accept = strcmp (text, "accept") == 0;
    return 0;
}

fh_sig_verifier_t *
fh_sig_settings_load (const fanhub_option_t *node, bool *deliver, const char **where, char *why,
                      size_t whylen)
{
    static const char *const known[] = {"ca",
                                        "crl",
                                        "routing_policy",
                                        "routing_nitpicky",
                                        "on_failure",
                                        "max_field_bytes",
                                        "on_crl_expired",
                                        NULL};
    *where = fh_option_where (node);
    for (size_t i = 0; i < fh_option_count (node); i++) {
        const char *key;
        const fanhub_option_t *item = fh_option_at (node, i, &key);
        size_t k = 0;
        while (known[k] && strcmp (known[k], key) != 0)
            k++;
        if (!known[k]) {
            *where = fh_option_where (item);
            snprintf (why, whylen,
                      "%s: unknown key (known: ca, crl, routing_policy, "
                      "routing_nitpicky, on_failure, max_field_bytes, on_crl_expired)",
                      key);
            return NULL;
        }
    }
    const fanhub_option_t *ca_node = fh_option_get (node, "ca");
    const fanhub_option_t *crl_node = fh_option_get (node, "crl");
    const fanhub_option_t *mode = fh_option_get (node, "on_failure");
    const char *mode_text = mode ? fh_option_scalar (mode) : "drop";
    if (!ca_node) {
        snprintf (why, whylen, "ca: missing: the PEM certificate of the signers' CA");
        return NULL;
    }
    if (!mode_text || (strcmp (mode_text, "drop") != 0 && strcmp (mode_text, "deliver") != 0)) {
        *where = fh_option_where (mode);
        snprintf (why, whylen, "on_failure: expected drop or deliver");
        return NULL;
    }
    *deliver = strcmp (mode_text, "deliver") == 0;
    bool nitpicky = false, crl_accept = false;
    size_t max_field = FH_SIG_FIELD_MAX_DEFAULT;
    if (s_limits (node, &max_field, &crl_accept, where, why, whylen) < 0)
        return NULL;
    const char *ca = s_path (ca_node, "ca", where, why, whylen);
    const char *crl = crl_node ? s_path (crl_node, "crl", where, why, whylen) : NULL;
    fh_sig_policy_t *policy = NULL;
    const char **names = NULL;
    size_t count = 0;
    if (!ca || (crl_node && !crl)
        || s_bool (fh_option_get (node, "routing_nitpicky"), "routing_nitpicky", &nitpicky, where,
                   why, whylen)
               < 0
        || s_policy (fh_option_get (node, "routing_policy"), &policy, &count, &names, where, why,
                     whylen)
               < 0)
        return NULL;
    char err[512];
    fh_sig_verifier_t *verifier
        = fh_sig_verifier_new (ca, crl, policy, count, nitpicky, err, sizeof err);
    free (names);
    free (policy);
    if (verifier)
        fh_sig_verifier_set_limits (verifier, max_field, crl_accept);
    else {
        *where = fh_option_where (crl && strstr (err, crl) == err ? crl_node : ca_node);
        snprintf (why, whylen, "%s: %s", crl && strstr (err, crl) == err ? "crl" : "ca", err);
    }
    return verifier;
}
