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
    const char *path = NULL, *endpoint = NULL;
    fh_cli_t cli;
    fh_cli_begin (&cli, &s_command, argc, argv);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        switch (opt) {
        case 'c': path = arg; break;
        case 'e': endpoint = arg; break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next < argc || (path && endpoint)) {
        return fh_cli_usage_error (&s_command, "give -c FILE or -e ENDPOINT");
    }
    char err[2048];
    fh_config_t *config = NULL;
    if (!endpoint) {
        config = fh_cli_load_config (path, err, sizeof err);
        if (!config) {
            fprintf (stderr, "fanhub reload: %s\n", err);
            return FH_EXIT_USAGE;
        }
        endpoint = config->control;
    }
    int keys = fh_cli_control_keys (&cli, config, endpoint);
    if (keys != FH_EXIT_OK) {
        fh_config_destroy (&config);
        return keys;
    }
    zsys_handler_set (NULL);
    char *answer = fh_control_call (endpoint, "RELOAD", 65000, err, sizeof err);
    int status = FH_EXIT_FAILURE;
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
