/*  cli_fedmsg - the fedmsg envelope options of pub and emit. See
    cli_fedmsg.h; the envelopes are made by security/fedmsg_sender.c. */
#include "cli_fedmsg.h"

#include "commands.h"

#include <stdio.h>
#include <stdlib.h>

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
    if (!self->on)
        return -1;
    char err[512];
    self->sender = fh_fedmsg_sender_new (self->key_file, self->cert_file, self->username, false,
                                         err, sizeof err);
    if (!self->sender) {
        fprintf (stderr, "fanhub %s: %s\n", command->name, err);
        return FH_EXIT_USAGE;
    }
    return -1;
}

int
fh_cli_fedmsg_wrap (fh_cli_fedmsg_t *self, const char *topic, size_t topic_size, const void *body,
                    size_t body_size, char *err, size_t errlen)
{
    return fh_fedmsg_sender_wrap (self->sender, topic, topic_size, body, body_size, &self->data,
                                  &self->size, NULL, err, errlen);
}

void
fh_cli_fedmsg_end (fh_cli_fedmsg_t *self)
{
    fh_fedmsg_sender_destroy (&self->sender);
    self->data = NULL;
    self->size = 0;
}
