/*  cli - what the subcommands share: loading the configuration. */
#ifndef FH_CLI_H_INCLUDED
#define FH_CLI_H_INCLUDED

#include "config.h"

/* Loads path, or the embedded default when path is NULL. */
fh_config_t *fh_cli_load_config (const char *path, char *err, size_t errlen);

#endif
