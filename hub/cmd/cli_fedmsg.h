/*  cli_fedmsg - the fedmsg envelope options that `pub` and `emit` share:
    --fedmsg wraps each body as fedmsg did, --sign-key and --sign-cert
    sign it, --username names the sender (security/fedmsg.h).

    A command puts FH_CLI_FEDMSG_OPTIONS in its option table and hands
    every option id to fh_cli_fedmsg_option first; fh_cli_fedmsg_start
    checks the combination and loads the key.
*/
#ifndef FH_CLI_FEDMSG_H_INCLUDED
#define FH_CLI_FEDMSG_H_INCLUDED

#include "cli.h"
#include "fedmsg_sender.h"

#include <stdbool.h>
#include <stdint.h>

enum { FH_CLI_FEDMSG = FH_CLI_LONG_ONLY + 300, FH_CLI_SIGN_KEY, FH_CLI_SIGN_CERT, FH_CLI_USERNAME };
#define FH_CLI_FEDMSG_OPTIONS                                                                      \
    {FH_CLI_FEDMSG, "fedmsg", NULL,                                                                \
     "wrap each body in fedmsg's envelope (topic, msg,\n"                                          \
     "msg_id, timestamp, i, username), encoded as\n"                                               \
     "fedmsg did; a body that is not JSON becomes\n"                                               \
     "{\"log\": TEXT}, as fedmsg-logger sent lines"},                                              \
        {FH_CLI_SIGN_KEY, "sign-key", "FILE",                                                      \
         "with --fedmsg: sign with this PEM private key\n"                                         \
         "(fedmsg's x509: RSA, SHA-1); needs --sign-cert"},                                        \
        {FH_CLI_SIGN_CERT, "sign-cert", "FILE", "with --sign-key: the key's PEM certificate"},     \
    {                                                                                              \
        FH_CLI_USERNAME, "username", "NAME",                                                       \
            "with --fedmsg: the envelope's username (default:\n"                                   \
            "$LOGNAME, $USER, then the account's name)"                                            \
    }

typedef struct {
    bool on;
    const char *key_file, *cert_file, *username;
    fh_fedmsg_sender_t *sender; /* with --fedmsg, after fh_cli_fedmsg_start */
    const void *data;           /* the last envelope, size bytes */
    size_t size;
} fh_cli_fedmsg_t;

/* True when id was one of FH_CLI_FEDMSG_OPTIONS (then arg is kept). */
bool fh_cli_fedmsg_option (fh_cli_fedmsg_t *self, int id, const char *arg);
/* -1 when the command goes on, else the exit status (a usage error, or a
   key that does not load), said on stderr. */
int fh_cli_fedmsg_start (fh_cli_fedmsg_t *self, const fh_cli_command_t *command);
/* Wraps one body into data and size (the next i, the time now). 0, or -1
   with why in err. */
int fh_cli_fedmsg_wrap (fh_cli_fedmsg_t *self, const char *topic, size_t topic_size,
                        const void *body, size_t body_size, char *err, size_t errlen);
void fh_cli_fedmsg_end (fh_cli_fedmsg_t *self);

#endif
