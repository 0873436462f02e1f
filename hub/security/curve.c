/*  curve - CurveZMQ key files. See curve.h; the work is the plugin SDK's
    (fanhub/sdk_curve.h), so the hub and the relay plugin read keys alike. */
#include "curve.h"

#include <czmq.h>
#include <fanhub/sdk_curve.h>

bool
fh_curve_key_valid (const char *text)
{
    return fanhub_curve_key_valid (text);
}

int
fh_secret_file_check (const char *path, const char *what, char *err, size_t errlen)
{
    return fanhub_secret_file_check (path, what, err, errlen);
}

int
fh_curve_load_secret (const char *path, char public_txt[FH_CURVE_KEY_TEXT],
                      char secret_txt[FH_CURVE_KEY_TEXT], char *err, size_t errlen)
{
    return fanhub_curve_load_secret (path, public_txt, secret_txt, err, errlen);
}
