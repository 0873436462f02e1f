/*  store_options - the store plugin's options. See store_options.h. */
#include "store_options.h"

#include <fanhub/sdk.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* A non-empty string option. */
static int
s_option_text (const fanhub_host_t *host, const fanhub_option_t *node, const char *key,
               const char *expected, const char **out, char *err, size_t errlen)
{
    fanhub_option_kind_t kind = host->option_kind (node);
    const char *text = host->option_scalar (node);
    if (kind != FANHUB_OPTION_SCALAR || !text) {
        snprintf (err, errlen, "options.%s: expected %s, got %s (%s)", key, expected,
                  fanhub_option_kind_name (kind), host->option_where (node));
        return -1;
    }
    if (!*text) {
        snprintf (err, errlen, "options.%s: must not be empty (%s)", key,
                  host->option_where (node));
        return -1;
    }
    *out = text;
    return 0;
}

static bool
s_valid_table (const char *name)
{
    size_t len = strlen (name);
    if (len == 0 || len > STORE_TABLE_MAX || (name[0] >= '0' && name[0] <= '9'))
        return false;
    return strspn (name, "abcdefghijklmnopqrstuvwxyz0123456789_") == len;
}

char *
store_read_password (const fanhub_host_t *host, const store_options_t *o, char *err, size_t errlen)
{
    const char *name = host->option_scalar (o->password_node);
    char why[512];
    char *password = fanhub_secret_read (o->password_file ? name : NULL,
                                         o->password_file ? NULL : name, why, sizeof why);
    if (!password)
        snprintf (err, errlen, "options.%s: %s (%s)", o->password_key, why,
                  host->option_where (o->password_node));
    return password;
}

const fanhub_opt_t store_option_table[] = {
    FANHUB_OPT_FIELD (store_options_t, "sqlite", FANHUB_OPT_FILE, sqlite, NULL, 0, 0,
                      "the SQLite database file (or postgres)"),
    FANHUB_OPT_FIELD (store_options_t, "postgres", FANHUB_OPT_ANY, postgres, NULL, 0, 0,
                      "a libpq conninfo string (or sqlite)"),
    FANHUB_OPT_FIELD (store_options_t, "password_file", FANHUB_OPT_ANY, password_file, NULL, 0, 0,
                      "postgres: a file (mode 0600) whose first line is the password"),
    FANHUB_OPT_FIELD (store_options_t, "password_env", FANHUB_OPT_ANY, password_env, NULL, 0, 0,
                      "postgres: the environment variable holding the password"),
    FANHUB_OPT_FIELD (store_options_t, "table", FANHUB_OPT_ANY, table_node, NULL, 0, 0,
                      "the table (default messages): 1 to 40 of a-z 0-9 _, not a digit first"),
    FANHUB_OPT_FIELD (store_options_t, "batch", FANHUB_OPT_INT, batch, "500", 1, STORE_BATCH_MAX,
                      "rows written in one transaction at most"),
    FANHUB_OPT_FIELD (store_options_t, "batch_ms", FANHUB_OPT_DURATION, batch_ms, "200", 0,
                      STORE_BATCH_MS_MAX, "how long a row may wait for its batch"),
    FANHUB_OPT_END,
};

/* Of the keys a and b, both given, the one later in the file. */
static const char *
s_later_key (const fanhub_host_t *host, const fanhub_option_t *options, const char *a,
             const char *b)
{
    const char *later = b;
    for (size_t i = 0; i < host->option_count (options); i++) {
        const char *key = NULL;
        host->option_at (options, i, &key);
        if (key && (strcmp (key, a) == 0 || strcmp (key, b) == 0))
            later = strcmp (key, a) == 0 ? a : b;
    }
    return later;
}

/* Two keys of which one may be given: the later one refused as `what`. */
static int
s_one_of (const fanhub_host_t *host, const fanhub_option_t *options, const char *a, const char *b,
          bool sentence, char *err, size_t errlen)
{
    const char *later = s_later_key (host, options, a, b);
    const char *other = later == a ? b : a;
    const char *where = host->option_where (host->option_get (options, later));
    if (sentence)
        snprintf (err, errlen,
                  "options.%s: store writes to one database; options.%s is set "
                  "already (%s)",
                  later, other, where);
    else
        snprintf (err, errlen,
                  "options.%s: give password_file or password_env, not both "
                  "(%s)",
                  later, where);
    return -1;
}

int
store_options_parse (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                     const fanhub_consumer_desc_t *desc, const fanhub_option_t *options,
                     store_options_t *o, char *err, size_t errlen)
{
    *o = (store_options_t){0};
    if (host->options_read (ctx, desc, options, o, sizeof *o, err, errlen) != 0)
        return -1;
    if (o->sqlite && o->postgres)
        return s_one_of (host, options, "sqlite", "postgres", true, err, errlen);
    if (o->password_file && o->password_env)
        return s_one_of (host, options, "password_file", "password_env", false, err, errlen);
    const char *text = NULL;
    if (o->postgres
        && s_option_text (host, o->postgres, "postgres", "a conninfo string", &text, err, errlen))
        return -1;
    o->password_node = o->password_file ? o->password_file : o->password_env;
    o->password_key = o->password_file ? "password_file" : "password_env";
    if (o->password_node
        && s_option_text (host, o->password_node, o->password_key,
                          o->password_file ? "a file name" : "an environment variable name", &text,
                          err, errlen))
        return -1;
    o->table = "messages";
    if (o->table_node
        && s_option_text (host, o->table_node, "table", "a table name", &o->table, err, errlen))
        return -1;
    if (!s_valid_table (o->table)) {
        snprintf (err, errlen,
                  "options.table: expected 1 to %d characters from a-z 0-9 _, "
                  "not starting with a digit, got \"%s\" (%s)",
                  STORE_TABLE_MAX, o->table,
                  host->option_where (host->option_get (options, "table")));
        return -1;
    }
    if (!o->sqlite && !o->postgres) {
        snprintf (err, errlen,
                  "options: store needs a database: set sqlite (a file) or "
                  "postgres (a conninfo) (%s)",
                  options ? host->option_where (options) : "?");
        return -1;
    }
    o->backend = o->sqlite ? &store_sqlite_backend : &store_pg_backend;
    o->target_key = o->sqlite ? "sqlite" : "postgres";
    o->target_node = host->option_get (options, o->target_key);
    o->target = host->option_scalar (o->target_node);
    if (o->password_node && !o->postgres) {
        snprintf (err, errlen, "options.%s: a password is for postgres only (%s)", o->password_key,
                  host->option_where (o->password_node));
        return -1;
    }
    char why[512];
    if (o->backend->check_target (o->target, why, sizeof why)) {
        snprintf (err, errlen, "options.%s: %s (%s)", o->target_key, why,
                  host->option_where (o->target_node));
        return -1;
    }
    return 0;
}
