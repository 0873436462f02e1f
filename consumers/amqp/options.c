/*  options.c - the amqp plugin's options: read, checked, and named with
    their FILE:LINE:COL when refused. The keys are documented in
    docs/plugins/amqp.md; init and check read them the same way.

    Secrets never come from the YAML alone: a password written in the
    options (a `password` key, or a password inside the url) is refused, and
    the password comes from password_file (mode 0600 or stricter) or
    password_env. No error message holds a password.
*/
#include "bridge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <amqp.h>

#define OPT_MS_MAX 3600000L
#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 5672
#define DEFAULT_TLS_PORT 5671

static const char *
s_kind_name (fanhub_option_kind_t kind)
{
    switch (kind) {
    case FANHUB_OPTION_SCALAR: return "a scalar";
    case FANHUB_OPTION_LIST: return "a list";
    case FANHUB_OPTION_MAP: return "a map";
    }
    return "nothing";
}

/* A scalar option's text; empty allowed only with allow_empty. */
static int
s_text (const fanhub_host_t *host, const fanhub_option_t *node, const char *key,
        const char *expected, bool allow_empty, const char **out, char *err, size_t errlen)
{
    const char *text = host->option_scalar (node);
    if (!text) {
        snprintf (err, errlen, "options.%s: expected %s, got %s (%s)", key, expected,
                  s_kind_name (host->option_kind (node)), host->option_where (node));
        return -1;
    }
    if (!*text && !allow_empty) {
        snprintf (err, errlen, "options.%s: must not be empty (%s)", key,
                  host->option_where (node));
        return -1;
    }
    *out = text;
    return 0;
}

/* An integer option from lo to hi, decimal digits only. */
static int
s_int (const fanhub_host_t *host, const fanhub_option_t *node, const char *key, long lo,
       long hi, long *out, char *err, size_t errlen)
{
    const char *text = host->option_scalar (node);
    bool ok = text && *text && strlen (text) <= 9
              && strspn (text, "0123456789") == strlen (text);
    long v = ok ? strtol (text, NULL, 10) : 0;
    if (ok && v >= lo && v <= hi) {
        *out = v;
        return 0;
    }
    if (text)
        snprintf (err, errlen, "options.%s: expected an integer from %ld to %ld, got \"%s\" (%s)",
                  key, lo, hi, text, host->option_where (node));
    else
        snprintf (err, errlen, "options.%s: expected an integer from %ld to %ld, got %s (%s)",
                  key, lo, hi, s_kind_name (host->option_kind (node)),
                  host->option_where (node));
    return -1;
}

static int
s_bool (const fanhub_host_t *host, const fanhub_option_t *node, const char *key, bool *out,
        char *err, size_t errlen)
{
    const char *text = host->option_scalar (node);
    if (text && (strcmp (text, "true") == 0 || strcmp (text, "false") == 0)) {
        *out = text[0] == 't';
        return 0;
    }
    snprintf (err, errlen, "options.%s: expected true or false, got %s%s%s (%s)", key,
              text ? "\"" : "", text ? text : s_kind_name (host->option_kind (node)),
              text ? "\"" : "", host->option_where (node));
    return -1;
}

static int
s_copy (char **dst, const char *src, char *err, size_t errlen)
{
    free (*dst);
    *dst = strdup (src);
    if (!*dst) {
        snprintf (err, errlen, "amqp: out of memory");
        return -1;
    }
    return 0;
}

/* A file the plugin will read: it must be a readable regular file; a
   secret one (a password, a private key) must not be open to the group or
   others. */
static int
s_check_file (const fanhub_host_t *host, const fanhub_option_t *node, const char *key,
              const char *path, bool secret, char *err, size_t errlen)
{
    struct stat st;
    FILE *file = fopen (path, "r");
    if (!file || fstat (fileno (file), &st) != 0) {
        snprintf (err, errlen, "options.%s: %s: %s (%s)", key, path, strerror (errno),
                  host->option_where (node));
        if (file)
            fclose (file);
        return -1;
    }
    fclose (file);
    if (!S_ISREG (st.st_mode) || (secret && (st.st_mode & 077))) {
        snprintf (err, errlen, "options.%s: %s: %s; refusing it%s (%s)", key, path,
                  !S_ISREG (st.st_mode) ? "not a regular file"
                                        : "other users may read or change it",
                  S_ISREG (st.st_mode) ? " (chmod 600 it)" : "", host->option_where (node));
        return -1;
    }
    return 0;
}

/* The password of password_file (its first line) or password_env, into
   out->password when read is set. */
static int
s_password (const fanhub_host_t *host, const fanhub_option_t *node, const char *key,
            bool read, bridge_options_t *out, char *err, size_t errlen)
{
    const char *name = host->option_scalar (node);
    char line[1024] = "";
    if (strcmp (key, "password_env") == 0) {
        const char *value = getenv (name);
        if (!value || !*value) {
            snprintf (err, errlen, "options.password_env: the environment variable %s is "
                      "not set, or empty (%s)", name, host->option_where (node));
            return -1;
        }
        return read ? s_copy (&out->password, value, err, errlen) : 0;
    }
    if (s_check_file (host, node, key, name, true, err, errlen))
        return -1;
    FILE *file = fopen (name, "r");
    bool got = file && fgets (line, sizeof line, file) != NULL;
    if (file)
        fclose (file);
    line[got ? strcspn (line, "\r\n") : 0] = '\0';
    if (!line[0]) {
        snprintf (err, errlen, "options.password_file: %s: empty first line (%s)", name,
                  host->option_where (node));
        return -1;
    }
    int rc = read ? s_copy (&out->password, line, err, errlen) : 0;
    memset (line, 0, sizeof line);
    return rc;
}

/* options.url: amqp://[USER@]HOST[:PORT][/VHOST] or amqps://...; a
   password in it is refused. */
static int
s_url (const fanhub_host_t *host, const fanhub_option_t *node, bridge_options_t *out,
       char *err, size_t errlen)
{
    const char *url = host->option_scalar (node);
    const char *where = host->option_where (node);
    const char *rest = strstr (url, "://");
    if (rest) {
        rest += 3;
        size_t auth = strcspn (rest, "/");
        const char *at = memchr (rest, '@', auth);
        if (at && memchr (rest, ':', (size_t) (at - rest))) {
            /* Not repeated: the url holds the password. */
            snprintf (err, errlen, "options.url: holds a password; a password is never taken "
                      "from the YAML: give the url without it and set password_file or "
                      "password_env (%s)", where);
            return -1;
        }
    }
    char *copy = strdup (url);
    if (!copy) {
        snprintf (err, errlen, "amqp: out of memory");
        return -1;
    }
    struct amqp_connection_info info;
    amqp_default_connection_info (&info);
    int rc = amqp_parse_url (copy, &info);
    if (rc == AMQP_STATUS_OK && !*info.host)
        rc = AMQP_STATUS_BAD_URL;
    if (rc != AMQP_STATUS_OK) {
        snprintf (err, errlen, "options.url: expected amqp://[USER@]HOST[:PORT][/VHOST] or "
                  "amqps://..., got \"%s\" (%s)", url, where);
        free (copy);
        return -1;
    }
    out->tls = info.ssl;
    out->port = info.port;
    rc = s_copy (&out->host, info.host, err, errlen) || s_copy (&out->vhost, info.vhost, err, errlen)
         || s_copy (&out->user, info.user, err, errlen);
    free (copy);
    return rc;
}

/* options.tls: {ca_file, cert_file, key_file, verify_peer, verify_hostname}. */
static int
s_tls (const fanhub_host_t *host, const fanhub_option_t *node, bridge_options_t *out,
       char *err, size_t errlen)
{
    if (host->option_kind (node) != FANHUB_OPTION_MAP) {
        snprintf (err, errlen, "options.tls: expected a map {ca_file, cert_file, key_file, "
                  "verify_peer, verify_hostname}, got %s (%s)",
                  s_kind_name (host->option_kind (node)), host->option_where (node));
        return -1;
    }
    out->tls = true;
    bool hostname_set = false;
    for (size_t i = 0; i < host->option_count (node); i++) {
        const char *key = NULL;
        const fanhub_option_t *item = host->option_at (node, i, &key);
        char name[64];
        snprintf (name, sizeof name, "tls.%s", key ? key : "?");
        const char *text = NULL;
        char **file = !key                              ? NULL
                      : strcmp (key, "ca_file") == 0   ? &out->ca_file
                      : strcmp (key, "cert_file") == 0 ? &out->cert_file
                      : strcmp (key, "key_file") == 0  ? &out->key_file
                                                       : NULL;
        if (file) {
            if (s_text (host, item, name, "a file name", false, &text, err, errlen)
                || s_check_file (host, item, name, text, file == &out->key_file, err, errlen)
                || s_copy (file, text, err, errlen))
                return -1;
        }
        else if (key && strcmp (key, "verify_peer") == 0) {
            if (s_bool (host, item, name, &out->verify_peer, err, errlen))
                return -1;
        }
        else if (key && strcmp (key, "verify_hostname") == 0) {
            if (s_bool (host, item, name, &out->verify_hostname, err, errlen))
                return -1;
            hostname_set = true;
        }
        else {
            snprintf (err, errlen, "options.%s: unknown key; tls takes ca_file, cert_file, "
                      "key_file, verify_peer and verify_hostname (%s)", name,
                      host->option_where (item));
            return -1;
        }
    }
    if (!hostname_set)
        out->verify_hostname = out->verify_peer;
    if (!out->cert_file != !out->key_file) {
        snprintf (err, errlen, "options.tls: give cert_file and key_file together (%s)",
                  host->option_where (node));
        return -1;
    }
    return 0;
}

/* options.topic_prefix: {from: PREFIX, to: PREFIX}, as the relay's. */
static int
s_prefix (const fanhub_host_t *host, const fanhub_option_t *node, bridge_options_t *out,
          char *err, size_t errlen)
{
    const fanhub_option_t *from = host->option_get (node, "from");
    const fanhub_option_t *to = host->option_get (node, "to");
    if (host->option_kind (node) != FANHUB_OPTION_MAP || host->option_count (node) != 2
        || !from || !to) {
        snprintf (err, errlen, "options.topic_prefix: expected a map {from: PREFIX, to: "
                  "PREFIX} with both keys (\"\" is allowed) (%s)", host->option_where (node));
        return -1;
    }
    const char *f, *t;
    if (s_text (host, from, "topic_prefix.from", "a topic prefix", true, &f, err, errlen)
        || s_text (host, to, "topic_prefix.to", "a topic prefix", true, &t, err, errlen)
        || s_copy (&out->from, f, err, errlen) || s_copy (&out->to, t, err, errlen))
        return -1;
    out->rewrite = true;
    out->from_len = strlen (f);
    out->to_len = strlen (t);
    return 0;
}

/* One key of the options map; -1 with err when it is refused. */
static int
s_key (const fanhub_host_t *host, const char *key, const fanhub_option_t *node,
       bool read_secrets, bridge_options_t *out, char *err, size_t errlen)
{
    const char *text = NULL;
    long v = 0;
    if (strcmp (key, "url") == 0)
        return s_text (host, node, key, "an amqp:// url", false, &text, err, errlen)
               || s_url (host, node, out, err, errlen);
    if (strcmp (key, "host") == 0 || strcmp (key, "vhost") == 0 || strcmp (key, "user") == 0
        || strcmp (key, "exchange") == 0) {
        bool is_exchange = key[0] == 'e';
        if (s_text (host, node, key, "a string", is_exchange, &text, err, errlen))
            return -1;
        if (strlen (text) > BRIDGE_SHORTSTR_MAX) {
            snprintf (err, errlen, "options.%s: at most %d bytes (%s)", key,
                      BRIDGE_SHORTSTR_MAX, host->option_where (node));
            return -1;
        }
        return s_copy (key[0] == 'h'   ? &out->host
                       : key[0] == 'v' ? &out->vhost
                       : key[0] == 'u' ? &out->user
                                       : &out->exchange,
                       text, err, errlen);
    }
    if (strcmp (key, "port") == 0) {
        if (s_int (host, node, key, 1, 65535, &v, err, errlen))
            return -1;
        out->port = (int) v;
        return 0;
    }
    if (strcmp (key, "password") == 0) {
        snprintf (err, errlen, "options.password: a password is never taken from the YAML; "
                  "set password_file (a file of mode 0600) or password_env (%s)",
                  host->option_where (node));
        return -1;
    }
    if (strcmp (key, "password_file") == 0 || strcmp (key, "password_env") == 0) {
        if (out->password_given) {
            snprintf (err, errlen, "options.%s: give password_file or password_env, not both "
                      "(%s)", key, host->option_where (node));
            return -1;
        }
        out->password_given = true;
        return s_text (host, node, key, key[9] == 'f' ? "a file name" : "a variable name",
                       false, &text, err, errlen)
               || s_password (host, node, key, read_secrets, out, err, errlen);
    }
    if (strcmp (key, "tls") == 0)
        return s_tls (host, node, out, err, errlen);
    if (strcmp (key, "topic_prefix") == 0)
        return s_prefix (host, node, out, err, errlen);
    static const struct {
        const char *key;
        long lo, hi;
    } ints[] = {{"confirm_timeout_ms", 100, OPT_MS_MAX},
                {"connect_timeout_ms", 100, OPT_MS_MAX},
                {"reconnect_max_ms", 100, OPT_MS_MAX},
                {"heartbeat_s", 0, 3600}};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        if (strcmp (key, ints[i].key) != 0)
            continue;
        if (s_int (host, node, key, ints[i].lo, ints[i].hi, &v, err, errlen))
            return -1;
        if (i == 3)
            out->heartbeat_s = (int) v;
        else
            *(i == 0   ? &out->confirm_timeout_ns
              : i == 1 ? &out->connect_timeout_ns
                       : &out->reconnect_max_ns)
                = (int64_t) v * 1000000;
        return 0;
    }
    snprintf (err, errlen, "options.%s: unknown option; amqp takes url, host, port, vhost, "
              "user, password_file, password_env, tls, exchange, topic_prefix, "
              "confirm_timeout_ms, connect_timeout_ms, reconnect_max_ms and heartbeat_s (%s)",
              key, host->option_where (node));
    return -1;
}

void
bridge_options_free (bridge_options_t *o)
{
    if (o->password) {
        memset (o->password, 0, strlen (o->password));
        free (o->password);
    }
    char *strings[] = {o->host, o->vhost, o->user, o->ca_file, o->cert_file,
                       o->key_file, o->exchange, o->from, o->to};
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
        free (strings[i]);
    memset (o, 0, sizeof *o);
}

int
bridge_options_read (const fanhub_host_t *host, const fanhub_option_t *options,
                     bool read_secrets, bridge_options_t *out, char *err, size_t errlen)
{
    memset (out, 0, sizeof *out);
    out->port = -1;
    out->verify_peer = true;
    out->verify_hostname = true;
    out->confirm_timeout_ns = 30000 * INT64_C (1000000);
    out->connect_timeout_ns = 10000 * INT64_C (1000000);
    out->reconnect_max_ns = 10000 * INT64_C (1000000);
    out->heartbeat_s = 30;
    snprintf (out->where, sizeof out->where, "%s", host->option_where (options));
    const fanhub_option_t *url = host->option_get (options, "url");
    for (size_t i = 0; i < host->option_count (options); i++) {
        const char *key = NULL;
        const fanhub_option_t *node = host->option_at (options, i, &key);
        if (!key)
            key = "?";
        if (url && node != url
            && (strcmp (key, "host") == 0 || strcmp (key, "port") == 0
                || strcmp (key, "vhost") == 0 || strcmp (key, "user") == 0)) {
            snprintf (err, errlen, "options.%s: give url or host, port, vhost and user, not "
                      "both (%s)", key, host->option_where (node));
            goto fail;
        }
        if (s_key (host, key, node, read_secrets, out, err, errlen))
            goto fail;
    }
    if (out->tls && out->verify_peer && !out->ca_file) {
        snprintf (err, errlen, "options.tls: TLS with verify_peer (the default) needs "
                  "tls.ca_file, the CA certificates that signed the broker's (%s)", out->where);
        goto fail;
    }
    if (out->port < 0)
        out->port = out->tls ? DEFAULT_TLS_PORT : DEFAULT_PORT;
    if ((!out->host && s_copy (&out->host, DEFAULT_HOST, err, errlen))
        || (!out->vhost && s_copy (&out->vhost, "/", err, errlen))
        || (!out->user && s_copy (&out->user, "guest", err, errlen))
        || (!out->exchange && s_copy (&out->exchange, "amq.topic", err, errlen))
        || (read_secrets && !out->password && s_copy (&out->password, "guest", err, errlen)))
        goto fail;
    return 0;
fail:
    bridge_options_free (out);
    return -1;
}
