/*  fedmsg_settings - bus.validate_signatures, read from its option tree
    into a verifier (fedmsg_sign.h). Every key is documented in
    config/fanhub.yaml and docs/fedora.md:

        validate_signatures:
          ca: FILE               PEM certificate(s) of the signers' CA (required)
          crl: FILE              PEM CRL of that CA (optional)
          routing_policy:        topic -> certificate names allowed to send it
            TOPIC: [NAME, ...]
          routing_nitpicky: BOOL a topic the policy does not list is refused
          on_failure: drop|deliver  what a message that fails becomes
                                 (counted either way; default drop)
*/
#ifndef FH_FEDMSG_SETTINGS_H_INCLUDED
#define FH_FEDMSG_SETTINGS_H_INCLUDED

#include "fedmsg_sign.h"
#include "options.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads node and loads its files. NULL with why (one line, naming the
   key: "ca: FILE: ...") in why and the FILE:LINE:COL of the node at
   fault in *where. *deliver: on_failure is deliver. */
fh_sig_verifier_t *fh_sig_settings_load (const fanhub_option_t *node, bool *deliver,
                                         const char **where, char *why, size_t whylen);

#endif
