/*  amqp_options.h - the AMQP connection and topology settings that
    `bus.amqp` (hub/amqp/source_amqp_settings.c) and the amqp plugin
    (options.c) share: one option table, read by the host's reader, so a
    shared key means, defaults and is refused the same in both.

    SDK-only (the plugin includes it). Each side embeds amqp_shared_t in
    its own values struct and puts AMQP_SHARED_OPTIONS (its type, the
    member) at the head of its table, then its own keys.
*/
#ifndef AMQP_OPTIONS_H_INCLUDED
#define AMQP_OPTIONS_H_INCLUDED

#include <fanhub/consumer.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* AMQP's short strings (names) hold at most this many bytes. */
#define AMQP_SHORTSTR_MAX 255

typedef struct {
    const char *url;
    const char *vhost;
    const char *user;
    char *password;             /* password_file or password_env, read */
    const char *password_given; /* `password:` itself: refused by the reader's caller */
    const fanhub_option_t *tls;
    const char *ca_file, *cert_file, *key_file;
    bool verify_peer, verify_hostname;
    const char *exchange;
    int envelope; /* 0 none, 1 fedora-messaging */
    bool declare;
    const char *queue;
    int64_t shards;
    const fanhub_option_t *bindings;
    const char *hash_exchange, *hash_header, *dead_letter_exchange;
    int queue_type; /* 0 classic, 1 quorum */
} amqp_shared_t;

static const char *const amqp_envelopes[] = {"none", "fedora-messaging", NULL};
static const char *const amqp_queue_types[] = {"classic", "quorum", NULL};

/* A url holding a password (scheme://USER:PASSWORD@...): refused by both,
   the password is never taken from the YAML. */
static inline bool
amqp_url_has_password (const char *url)
{
    const char *rest = strstr (url, "://");
    if (!rest)
        return false;
    rest += 3;
    size_t auth = strcspn (rest, "/");
    const char *at = memchr (rest, '@', auth);
    return at && memchr (rest, ':', (size_t) (at - rest));
}

#define AMQP_SHARED_FIELD(type, m, name, opt_type, field, def, min, max, help)                     \
    FANHUB_OPT_FIELD (type, name, opt_type, m.field, def, min, max, help)

/* The shared entries, in four groups so that the plugin keeps its own
   keys among them, in the order `fanhub plugins --options` has always
   printed; AMQP_SHARED_OPTIONS is all four. verify_hostname has no
   default (each side says what an absent one means). */
#define AMQP_SHARED_OPTIONS(type, m)                                                               \
    AMQP_SHARED_URL (type, m), AMQP_SHARED_LOGIN (type, m), AMQP_SHARED_ENVELOPE (type, m),        \
        AMQP_SHARED_TOPOLOGY (type, m)

#define AMQP_SHARED_URL(type, m)                                                                   \
    AMQP_SHARED_FIELD (type, m, "url", FANHUB_OPT_STRING, url, NULL, 0, 0,                         \
                       "amqp://[USER@]HOST[:PORT][/VHOST] or amqps://...")

#define AMQP_SHARED_LOGIN(type, m)                                                                 \
    AMQP_SHARED_FIELD (type, m, "vhost", FANHUB_OPT_STRING, vhost, "/", 1, AMQP_SHORTSTR_MAX,      \
                       "the virtual host"),                                                        \
        AMQP_SHARED_FIELD (type, m, "user", FANHUB_OPT_STRING, user, "guest", 1,                   \
                           AMQP_SHORTSTR_MAX, "the user name"),                                    \
        AMQP_SHARED_FIELD (type, m, "password", FANHUB_OPT_SECRET, password, NULL, 0, 0,           \
                           "the password, from a file (mode 0600) or the environment"),            \
        AMQP_SHARED_FIELD (type, m, "password", FANHUB_OPT_STRING, password_given, NULL, 0, 0,     \
                           "refused: use password_file or password_env, never the YAML"),          \
        AMQP_SHARED_FIELD (type, m, "tls", FANHUB_OPT_MAP, tls, NULL, 0, 0,                        \
                           "{ca_file, cert_file, key_file, verify_peer, verify_hostname}: TLS"),   \
        AMQP_SHARED_FIELD (type, m, "tls.ca_file", FANHUB_OPT_FILE, ca_file, NULL, 0, 0,           \
                           "the CA certificates that signed the broker's"),                        \
        AMQP_SHARED_FIELD (type, m, "tls.cert_file", FANHUB_OPT_FILE, cert_file, NULL, 0, 0,       \
                           "a client certificate (with key_file)"),                                \
        AMQP_SHARED_FIELD (type, m, "tls.key_file", FANHUB_OPT_FILE, key_file, NULL, 0, 0,         \
                           "the client certificate's key (mode 0600)"),                            \
        AMQP_SHARED_FIELD (type, m, "tls.verify_peer", FANHUB_OPT_BOOL, verify_peer, "true", 0, 0, \
                           "check the broker's certificate"),                                      \
        AMQP_SHARED_FIELD (type, m, "tls.verify_hostname", FANHUB_OPT_BOOL, verify_hostname, NULL, \
                           0, 0, "check the broker's name in it"),                                 \
        AMQP_SHARED_FIELD (type, m, "exchange", FANHUB_OPT_STRING, exchange, "amq.topic", 0,       \
                           AMQP_SHORTSTR_MAX, "the exchange (\"\": the default exchange)")

#define AMQP_SHARED_ENVELOPE(type, m)                                                              \
    {                                                                                              \
        "envelope", FANHUB_OPT_ENUM, offsetof (type, m.envelope), "none", 0, 0, amqp_envelopes, 0, \
            "fedora-messaging: fedora-messaging's shape (docs/fedora.md)"                          \
    }

#define AMQP_SHARED_TOPOLOGY(type, m)                                                              \
    AMQP_SHARED_FIELD (type, m, "declare", FANHUB_OPT_BOOL, declare, "false", 0, 0,                \
                       "declare the queues and bindings at each connect"),                         \
        AMQP_SHARED_FIELD (type, m, "queue", FANHUB_OPT_STRING, queue, NULL, 1, AMQP_SHORTSTR_MAX, \
                           "the queue, or the shard queues' prefix"),                              \
        AMQP_SHARED_FIELD (type, m, "shards", FANHUB_OPT_INT, shards, "0", 0, 1024,                \
                           "0 (one queue) or N shard queues QUEUE.0 ..."),                         \
        AMQP_SHARED_FIELD (type, m, "bindings", FANHUB_OPT_STRINGS, bindings, NULL, 0, 0,          \
                           "binding keys from exchange (default [\"#\"])"),                        \
        AMQP_SHARED_FIELD (type, m, "hash_exchange", FANHUB_OPT_STRING, hash_exchange, NULL, 1,    \
                           AMQP_SHORTSTR_MAX, "with shards: the x-consistent-hash exchange"),      \
        AMQP_SHARED_FIELD (type, m, "hash_header", FANHUB_OPT_STRING, hash_header, NULL, 1,        \
                           AMQP_SHORTSTR_MAX, "with shards: hash this header"),                    \
        {"queue_type",                                                                             \
         FANHUB_OPT_ENUM,                                                                          \
         offsetof (type, m.queue_type),                                                            \
         "classic",                                                                                \
         0,                                                                                        \
         0,                                                                                        \
         amqp_queue_types,                                                                         \
         0,                                                                                        \
         "classic or quorum"},                                                                     \
        AMQP_SHARED_FIELD (type, m, "dead_letter_exchange", FANHUB_OPT_STRING,                     \
                           dead_letter_exchange, NULL, 1, AMQP_SHORTSTR_MAX,                       \
                           "x-dead-letter-exchange")

#endif
