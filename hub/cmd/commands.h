/*  commands - the subcommands of the fanhub binary, one cmd_NAME.c each.

    Each takes the arguments after the subcommand name (argv[0] is the
    subcommand) and returns the process exit status: 0 success, 1 runtime
    failure, 2 bad usage or bad configuration. Each handles --help.
*/
#ifndef FH_COMMANDS_H_INCLUDED
#define FH_COMMANDS_H_INCLUDED

#include "config.h"
#include "fanhub/consumer.h"

#include <stdint.h>

#define FH_EXIT_OK 0
#define FH_EXIT_FAILURE 1
#define FH_EXIT_USAGE 2
#define FH_EXIT_STOPPED 3 /* run: a stop signal came before the hub ran */
/* `reload`: applied, but a consumer it added or changed is not up. */
#define FH_EXIT_RELOAD_DOWN 3
/* `reload`, `restart`: refused, a plugin's init did not return within
   shutdown_timeout (config/reload_init.h); the old instances go on. */
#define FH_EXIT_RELOAD_INIT_HUNG 4
/* The answer's start that says so: "ERROR " FH_INIT_ABANDONED_WORD ... */
#define FH_INIT_ABANDONED_WORD "init abandoned: "

int fh_cmd_run (int argc, char **argv);
int fh_cmd_check (int argc, char **argv);
int fh_cmd_pub (int argc, char **argv);
int fh_cmd_tail (int argc, char **argv);
int fh_cmd_stats (int argc, char **argv);
int fh_cmd_collectd (int argc, char **argv);
int fh_cmd_dead_letter (int argc, char **argv);
int fh_cmd_emit (int argc, char **argv);
int fh_cmd_reload (int argc, char **argv);
int fh_cmd_restart (int argc, char **argv);
int fh_cmd_pause (int argc, char **argv);
int fh_cmd_resume (int argc, char **argv);
int fh_cmd_plugins (int argc, char **argv);
int fh_cmd_replay (int argc, char **argv);
int fh_cmd_keygen (int argc, char **argv);

/* cmd_check_connect.c: `check --connect`: tries every bus endpoint for
   timeout_ms at most and prints what each came to. FH_EXIT_OK when all
   connected (or bound), else FH_EXIT_FAILURE. */
int fh_check_connect (const fh_config_t *config, int64_t timeout_ms);

#endif
