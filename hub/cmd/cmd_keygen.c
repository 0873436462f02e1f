/*  cmd_keygen - `fanhub keygen NAME`: a CurveZMQ key pair in zcert format,
    for bus.curve and the relay's curve: NAME (the public key, to hand to
    peers) and NAME_secret (both keys, mode 0600). */
#include "cli.h"
#include "commands.h"

#include <czmq.h>
#include <errno.h>
#include <fanhub/sdk_curve.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const fh_cli_option_t s_options[] = {
    {0, NULL, NULL, NULL},
};

static const fh_cli_command_t s_command = {
    "keygen",
    "NAME",
    "Writes a new CurveZMQ key pair in CZMQ's zcert format: NAME holds the\n"
    "public key (give it to the peers that must let this one in: their\n"
    "allow: or allow_dir:), NAME_secret both keys, with mode 0600 (the hub\n"
    "refuses a secret key file that other users can read). Neither file\n"
    "may exist already.",
    s_options,
    "Exit status: 0 written, 1 cannot write, 2 bad usage.",
};

int
fh_cmd_keygen (int argc, char **argv)
{
    fh_cli_t cli;
    fh_cli_begin (&cli, &s_command, argc, argv);
    const char *arg;
    int id;
    while ((id = fh_cli_next (&cli, &arg)) > 0)
        ; /* only --help and --version, which the layer answers */
    if (id < 0)
        return fh_cli_status (&cli);
    if (cli.next + 1 != argc)
        return fh_cli_usage_error (&s_command, "give one NAME");
    const char *name = argv[cli.next];
    char secret_path[4096];
    snprintf (secret_path, sizeof secret_path, "%s_secret", name);
    struct stat st;
    const char *paths[] = {name, secret_path};
    for (int i = 0; i < 2; i++)
        if (lstat (paths[i], &st) == 0) {
            fprintf (stderr, "fanhub keygen: %s exists; not overwriting a key\n", paths[i]);
            return FH_EXIT_FAILURE;
        }
    zcert_t *cert = zcert_new ();
    if (!cert) {
        fprintf (stderr, "fanhub keygen: cannot make a key pair (libzmq without CURVE?)\n");
        return FH_EXIT_FAILURE;
    }
    zcert_set_meta (cert, "created-by", "fanhub keygen");
    /* zcert_save writes the secret file under a private umask; the mode is
       checked after, not trusted. */
    int rc = zcert_save (cert, name);
    zcert_destroy (&cert);
    char err[512];
    if (rc != 0) {
        fprintf (stderr, "fanhub keygen: cannot write %s: %s\n", name, strerror (errno));
        return FH_EXIT_FAILURE;
    }
    if (chmod (secret_path, 0600) != 0
        || fanhub_secret_file_check (secret_path, "secret key file", err, sizeof err) != 0) {
        fprintf (stderr, "fanhub keygen: %s\n", err);
        remove (secret_path);
        return FH_EXIT_FAILURE;
    }
    printf ("wrote %s (public key) and %s (secret key, mode 0600)\n", name, secret_path);
    return FH_EXIT_OK;
}
