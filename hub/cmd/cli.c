/*  cli - what the subcommands share. See cli.h. */
#include "cli.h"

fh_config_t *
fh_cli_load_config (const char *path, char *err, size_t errlen)
{
    if (path)
        return fh_config_load_file (path, err, errlen);
    return fh_config_load_string (fh_config_default_yaml, fh_config_default_yaml_len,
                                  "<default>", err, errlen);
}
