/*  curve - CurveZMQ key files: reading a secret key, checking a public one.

    Key files are CZMQ's zcert format (what `fanhub keygen` and zcert_save
    write): NAME holds the public key, NAME_secret both keys. A secret key
    file must be a regular file that neither its group nor other users can
    read or write (as ssh asks of its keys): a readable secret is refused,
    not used. Keys are Z85 text, 40 characters.
*/
#ifndef FH_CURVE_H_INCLUDED
#define FH_CURVE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#define FH_CURVE_KEY_TEXT 41 /* 40 Z85 characters and a NUL */

/* Loads the key pair of a zcert secret file. 0, or -1 with one line in
   err (which never contains a key). */
int fh_curve_load_secret (const char *path, char public_txt[FH_CURVE_KEY_TEXT],
                          char secret_txt[FH_CURVE_KEY_TEXT], char *err, size_t errlen);

/* True when text is a 40-character Z85 key. */
bool fh_curve_key_valid (const char *text);

/* Checks that path is a regular file only its owner may read: 0, or -1
   with one line in err. For any file that holds a secret. */
int fh_secret_file_check (const char *path, const char *what, char *err, size_t errlen);

#endif
