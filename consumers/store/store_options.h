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

/* The options, as init and check read them. */
typedef struct {
    /* As the host reads them from the table. */
    const char *sqlite;
    const fanhub_option_t *postgres, *password_file, *password_env, *table_node;
    int64_t batch;
    int64_t batch_ms;
    /* Made of them. */
    const store_backend_t *backend;
    const char *target;
    const fanhub_option_t *target_node;
    const char *target_key;
    const fanhub_option_t *password_node; /* password_file or password_env */
    const char *password_key;
    const char *table;
} store_options_t;

extern const fanhub_opt_t store_option_table[];

/* Reads and checks the options against desc's table, the database's name
   included (before anything is opened). 0, or -1 with err. */
int store_options_parse (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                         const fanhub_consumer_desc_t *desc, const fanhub_option_t *options,
                         store_options_t *o, char *err, size_t errlen);

/* The password of password_file or password_env (fanhub_secret_read):
   malloc'd, or NULL with err set; err never holds the password. */
char *store_read_password (const fanhub_host_t *host, const store_options_t *o, char *err,
                           size_t errlen);

#endif
