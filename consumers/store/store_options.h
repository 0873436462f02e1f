/*  store_options - the store plugin's options: its option table, the
    checks the table cannot make (one database, one password source, the
    table's name) and the password. Shared by init and check (store.c).
*/
#ifndef STORE_OPTIONS_H_INCLUDED
#define STORE_OPTIONS_H_INCLUDED

#include <fanhub/consumer.h>

#include "store_db.h"

#include <stdint.h>

#define STORE_BATCH_MAX 100000
#define STORE_BATCH_MS_MAX 3600000
#define STORE_TABLE_MAX 40
#define STORE_CONNINFO_MAX 4096

/* The options, as init and check read them. */
typedef struct {
    /* As the host reads them from the table. */
    const char *sqlite, *postgres; /* one of them */
    char *password;                /* password_file or password_env: ours */
    const char *table;
    int64_t batch;
    int64_t batch_ms;
    /* Made of them. */
    const store_backend_t *backend;
    const char *target; /* sqlite or postgres */
    const fanhub_option_t *target_node;
    const char *target_key;
} store_options_t;

extern const fanhub_opt_t store_option_table[];

/* Reads and checks the options against the plugin's table, the
   database's name included (before anything is opened), and the password
   (store_options_free forgets it). 0, or -1 with err (and nothing to
   free). */
int store_options_parse (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                         const fanhub_option_t *options, store_options_t *o, char *err,
                         size_t errlen);

/* Wipes and frees the password. */
void store_options_free (store_options_t *o);

#endif
