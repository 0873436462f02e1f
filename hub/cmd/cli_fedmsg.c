/*  cli_fedmsg - the fedmsg envelope options of pub and emit. See
    cli_fedmsg.h. */
#include "cli_fedmsg.h"

#include "commands.h"
#include "fedmsg_sign.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

bool
fh_cli_fedmsg_option (fh_cli_fedmsg_t *self, int id, const char *arg)
{
    switch (id) {
    case FH_CLI_FEDMSG: self->on = true; return true;
    case FH_CLI_SIGN_KEY: self->key_file = arg; return true;
    case FH_CLI_SIGN_CERT: self->cert_file = arg; return true;
    case FH_CLI_USERNAME: self->username = arg; return true;
    default: return false;
    }
}

int
fh_cli_fedmsg_start (fh_cli_fedmsg_t *self, const fh_cli_command_t *command)
{
    if (!self->on && (self->key_file || self->cert_file || self->username))
        return fh_cli_usage_error (command, "%s",
                                   "--sign-key, --sign-cert and --username go with --fedmsg");
    if (!self->key_file != !self->cert_file)
        return fh_cli_usage_error (command, "%s", "give --sign-key and --sign-cert together");
    if (!self->username)
        self->username = fh_fedmsg_username ();
    if (self->key_file) {
        char err[512];
        self->signer = fh_fedmsg_signer_new (self->key_file, self->cert_file, err, sizeof err);
        if (!self->signer) {
            fprintf (stderr, "fanhub %s: %s\n", command->name, err);
            return FH_EXIT_USAGE;
        }
    }
    return -1;
}

int
fh_cli_fedmsg_wrap (fh_cli_fedmsg_t *self, const char *topic, size_t topic_size, const void *body,
                    size_t body_size, char *err, size_t errlen)
{
    self->buf.size = 0;
    self->buf.failed = false;
    return fh_fedmsg_wrap (topic, topic_size, body, body_size, ++self->i, (int64_t) time (NULL),
                           self->username, self->signer, &self->buf, err, errlen);
}

void
fh_cli_fedmsg_end (fh_cli_fedmsg_t *self)
{
    fh_fedmsg_signer_destroy (&self->signer);
    free (self->buf.data);
    self->buf = (fh_buf_t){0};
}
