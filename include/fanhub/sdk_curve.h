/*  fanhub/sdk_curve.h - CurveZMQ key files for plugins that speak ZeroMQ.

    Part of the plugin SDK like fanhub/sdk.h, but for plugins that link
    CZMQ (it includes <czmq.h>; link libczmq): header-only, static
    inline. The hub reads its own keys with the same functions, so a key
    file that `fanhub check` accepts for bus.curve is accepted by a plugin.

    Key files are CZMQ's zcert format (what `fanhub keygen` and zcert_save
    write): NAME holds the public key, NAME_secret both. A secret key file
    must be a regular file that neither its group nor other users can read
    or write (fanhub_secret_file_check): a readable secret is refused, not
    used. Keys are Z85 text, 40 characters.
*/
#ifndef FANHUB_SDK_CURVE_H_INCLUDED
#define FANHUB_SDK_CURVE_H_INCLUDED

#include <czmq.h>
#include <fanhub/sdk.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FANHUB_CURVE_KEY_TEXT 41 /* 40 Z85 characters and a NUL */

/* True when text is a CurveZMQ key: 40 characters of Z85. */
static inline bool
fanhub_curve_key_valid (const char *text)
{
    uint8_t key[32];
    return text && strlen (text) == 40 && zmq_z85_decode (key, text) != NULL;
}

/* The key pair of the zcert secret file at path. Read as a zconfig text,
   not with zcert_load: that one reads PATH_secret instead when it exists, a file
   whose mode nobody checked. 0, or -1 with one line in err (which never
   holds a key). */
static inline int
fanhub_curve_load_secret (const char *path, char public_txt[FANHUB_CURVE_KEY_TEXT],
                          char secret_txt[FANHUB_CURVE_KEY_TEXT], char *err, size_t errlen)
{
    if (fanhub_secret_file_check (path, "secret key file", err, errlen) != 0)
        return -1;
    /* zconfig_load leaks its file when the text does not parse (CZMQ
       4.2): the text is read first and parsed from memory. */
    zchunk_t *text = zchunk_slurp (path, 0);
    zconfig_t *root = text ? zconfig_chunk_load (text) : NULL;
    zchunk_destroy (&text);
    const char *public_key = root ? zconfig_get (root, "curve/public-key", NULL) : NULL;
    const char *secret_key = root ? zconfig_get (root, "curve/secret-key", NULL) : NULL;
    int rc = -1;
    if (!root)
        fanhub_error_line (err, errlen,
                           "secret key file %s: not a zcert file (fanhub keygen writes "
                           "them)",
                           path);
    else if (!secret_key)
        fanhub_error_line (err, errlen,
                           "secret key file %s: holds no curve/secret-key (the public "
                           "half? give the NAME_secret file)",
                           path);
    else if (!fanhub_curve_key_valid (public_key) || !fanhub_curve_key_valid (secret_key))
        fanhub_error_line (err, errlen,
                           "secret key file %s: the keys are not 40-character Z85 text", path);
    else {
        snprintf (public_txt, FANHUB_CURVE_KEY_TEXT, "%s", public_key);
        snprintf (secret_txt, FANHUB_CURVE_KEY_TEXT, "%s", secret_key);
        rc = 0;
    }
    zconfig_destroy (&root);
    return rc;
}

#ifdef __cplusplus
}
#endif

#endif
