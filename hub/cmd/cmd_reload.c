/*  cmd_reload - `fanhub reload`: ask a running hub to re-read its
    configuration, as SIGHUP does, and say how it went. */
#include "cli.h"
#include "commands.h"
#include "control.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const fh_cli_option_t s_options[] = {
    {'c', "config", "FILE",
     "find the hub's control endpoint in this config"},
    {'e', "endpoint", "EP",
     "the control endpoint itself"},
    FH_CLI_CURVE_OPTIONS,
    {0, NULL, NULL, NULL},
};

static const fh_cli_command_t s_command = {
    "reload",
    "[-c FILE | -e ENDPOINT]",
    "Asks a running hub to re-read its configuration file, as SIGHUP does,\n"
    "and prints the outcome. Consumers whose settings are unchanged keep\n"
    "running (their topics may change); removed ones finish their queue;\n"
    "changed ones are replaced once the old instance has consumed what it\n"
    "holds. An invalid file is refused and the hub keeps its configuration.\n"
    "Bus endpoints, control and state_dir need a restart.",
    s_options,
    "Exit status: 0 reloaded, 1 refused or no answer, 2 bad usage.",
};

int
fh_cmd_reload (int argc, char **argv)
{
    fh_config_t *config;
    int status;
    const char *endpoint = fh_cli_control_only (&s_command, argc, argv, &config, &status);
    if (!endpoint)
        return status;
    char err[2048];
    zsys_handler_set (NULL);
    char *answer = fh_control_call (endpoint, "RELOAD", 65000, err, sizeof err);
    status = FH_EXIT_FAILURE;
    if (!answer)
        fprintf (stderr, "fanhub reload: %s\n", err);
    else if (strncmp (answer, "OK ", 3) == 0) {
        printf ("%s\n", answer + 3);
        status = FH_EXIT_OK;
    }
    else
        fprintf (stderr, "fanhub reload: %s\n",
                 strncmp (answer, "ERROR ", 6) == 0 ? answer + 6 : answer);
    free (answer);
    fh_config_destroy (&config);
    return status;
}
