/*  relay_options - the relay plugin's options: the table, the checks it
    cannot make (bind or connect, the curve keys together) and the
    endpoint list. Shared by init and check (relay.c).
*/
#ifndef RELAY_OPTIONS_H_INCLUDED
#define RELAY_OPTIONS_H_INCLUDED

#include <fanhub/consumer.h>
#include <fanhub/sdk_curve.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RELAY_MS_MAX 3600000

/* What init reads from the options, before anything is made. */
typedef struct {
    const fanhub_option_t *bind, *connect; /* as given */
    const fanhub_option_t *endpoints;      /* the bind or connect node */
    const char *endpoints_key;
    const fanhub_option_t *prefix; /* topic_prefix, or NULL */
    const char *from, *to;         /* its keys */
    int64_t sndhwm;
    int64_t linger_ms;
    bool require_subscriber;
    int64_t subscriber_wait_ms;
    const fanhub_option_t *curve; /* or NULL */
    const char *secret_key_file, *server_public_key, *allow_dir;
    const fanhub_option_t *allow;
    char public_key[FANHUB_CURVE_KEY_TEXT], secret_key[FANHUB_CURVE_KEY_TEXT];
} relay_options_t;

extern const fanhub_opt_t relay_option_table[];

/* Reads and checks the options against the plugin's table: 0, or -1 with
   err. */
int relay_options_read (const fanhub_host_t *host, fanhub_ctx_t *ctx,
                        const fanhub_option_t *options, relay_options_t *out, char *err,
                        size_t errlen);

/* The node of endpoint i of a bind/connect value (a scalar is a list of
   one); fanhub_option_items counts them. */
const fanhub_option_t *relay_endpoint_at (const fanhub_host_t *host, const fanhub_option_t *node,
                                          size_t i);

/* What binding an ipc endpoint would refuse that its spelling does not
   show, found without a socket: 0, or -1 with why. */
int relay_endpoint_check (const char *endpoint, bool binding, char *why, size_t whylen);

#endif
