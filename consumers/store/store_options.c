/*  store_options - the store plugin's options. See store_options.h. */
#include "store_options.h"

#include <fanhub/sdk.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
s_valid_table (const char *name)
{
    size_t len = strlen (name);
    if (len == 0 || len > STORE_TABLE_MAX || (name[0] >= '0' && name[0] <= '9'))
        return false;
    return strspn (name, "abcdefghijklmnopqrstuvwxyz0123456789_") == len;
}

const fanhub_opt_t store_option_table[] = {
    FANHUB_OPT_FIELD (store_options_t, "sqlite", FANHUB_OPT_FILE, sqlite, NULL, 0, 0,
                      "the SQLite database file (or postgres)"),
    {"postgres", FANHUB_OPT_STRING, offsetof (store_options_t, postgres), NULL, 1,
     STORE_CONNINFO_MAX, NULL, FANHUB_OPT_ALTERNATIVE, "a libpq conninfo string (or sqlite)"},
    FANHUB_OPT_FIELD (store_options_t, "password", FANHUB_OPT_SECRET, password, NULL, 0, 0,
                      "postgres: the password, from a file (mode 0600) or the environment"),
    FANHUB_OPT_FIELD (store_options_t, "table", FANHUB_OPT_STRING, table, "messages", 1,
                      STORE_TABLE_MAX,
                      "the table (default messages): 1 to 40 of a-z 0-9 _, not a digit first"),
    FANHUB_OPT_FIELD (store_options_t, "batch", FANHUB_OPT_INT, batch, "500", 1, STORE_BATCH_MAX,
                      "rows written in one transaction at most"),
    FANHUB_OPT_FIELD (store_options_t, "batch_ms", FANHUB_OPT_DURATION, batch_ms, "200", 0,
                      STORE_BATCH_MS_MAX, "how long a row may wait for its batch"),
    FANHUB_OPT_END,
};

/* What the table cannot say: one database is given, the table's name,
   the password only with postgres, the database's name. */
static int
s_check (const fanhub_host_t *host, const fanhub_option_t *options, store_options_t *o, char *err,
         size_t errlen)
{
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
    o->target = o->sqlite ? o->sqlite : o->postgres;
    if (o->password && !o->postgres) {
        const fanhub_option_t *node = host->option_get (options, "password_file");
        const char *key = node ? "password_file" : "password_env";
        snprintf (err, errlen, "options.%s: a password is for postgres only (%s)", key,
                  host->option_where (node ? node : host->option_get (options, key)));
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

int
store_options_parse (const fanhub_host_t *host, fanhub_ctx_t *ctx, const fanhub_option_t *options,
                     store_options_t *o, char *err, size_t errlen)
{
    *o = (store_options_t){0};
    if (host->options_load (ctx, options, o, sizeof *o, err, errlen) != 0)
        return -1;
    if (s_check (host, options, o, err, errlen) != 0) {
        store_options_free (o);
        return -1;
    }
    return 0;
}

void
store_options_free (store_options_t *o)
{
    if (o->password) {
        memset (o->password, 0, strlen (o->password));
        free (o->password);
        o->password = NULL;
    }
}
