/*  curve - CurveZMQ key files. See curve.h. */
#include "curve.h"

#include <czmq.h>
#include <fanhub/sdk.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

bool
fh_curve_key_valid (const char *text)
{
    uint8_t key[32];
    return text && strlen (text) == 40 && zmq_z85_decode (key, text) != NULL;
}

/* The SDK's check, so the relay plugin refuses a readable secret alike. */
int
fh_secret_file_check (const char *path, const char *what, char *err, size_t errlen)
{
    return fanhub_secret_file_check (path, what, err, errlen);
}

int
fh_curve_load_secret (const char *path, char public_txt[FH_CURVE_KEY_TEXT],
                      char secret_txt[FH_CURVE_KEY_TEXT], char *err, size_t errlen)
{
    if (fh_secret_file_check (path, "secret key file", err, errlen) != 0)
        return -1;
    /* zcert_load tries PATH_secret first: the file named is read as is
       when it is the secret one, and refused when it holds no secret. */
    zconfig_t *root = zconfig_load (path);
    const char *public_key = root ? zconfig_get (root, "curve/public-key", NULL) : NULL;
    const char *secret_key = root ? zconfig_get (root, "curve/secret-key", NULL) : NULL;
    int rc = -1;
    if (!root)
        snprintf (err, errlen, "secret key file %s: not a zcert file (fanhub keygen writes "
                  "them)", path);
    else if (!secret_key)
        snprintf (err, errlen, "secret key file %s: holds no curve/secret-key (the public "
                  "half? give the NAME_secret file)", path);
    else if (!fh_curve_key_valid (public_key) || !fh_curve_key_valid (secret_key))
        snprintf (err, errlen, "secret key file %s: the keys are not 40-character Z85 text",
                  path);
    else {
        snprintf (public_txt, FH_CURVE_KEY_TEXT, "%s", public_key);
        snprintf (secret_txt, FH_CURVE_KEY_TEXT, "%s", secret_key);
        rc = 0;
    }
    zconfig_destroy (&root);
    return rc;
}
