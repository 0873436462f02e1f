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
    FH_CLI_CONTROL_OPTIONS,
    {'t', "timeout", "S",
     "give up after S seconds without an answer (default 65; the hub gives\n"
     "up on a plugin's init after shutdown_timeout, at least 1 s)"},
    FH_CLI_CURVE_OPTIONS,
    {0, NULL, NULL, NULL},
};

/* --timeout: seconds, into the double s_parse is given. */
static const fh_cli_value_t s_values[] = {
    {'t', FH_CLI_SECONDS, 0, 0.001, 86400},
    {0},
};

static const fh_cli_command_t s_command = {
    "reload",
    "[--timeout S] [-c FILE | -e ENDPOINT]",
    "Asks a running hub to re-read its configuration file, as SIGHUP does,\n"
    "and prints the outcome. Consumers whose settings are unchanged keep\n"
    "running (their topics may change); removed ones finish their queue;\n"
    "changed ones are replaced once the old instance has consumed what it\n"
    "holds. An invalid file is refused and the hub keeps its configuration.\n"
    "Bus endpoints, control and state_dir need a restart. The answer waits\n"
    "for the init of each consumer added or changed (a worker plugin's waits\n"
    "for each worker's first start), for at most shutdown_timeout (at least\n"
    "1 s) each: an init that takes longer is abandoned and the reload\n"
    "refused. One that is down or halted is printed with its reason on\n"
    "stderr.",
    s_options,
    "Exit status: 0 reloaded, every consumer added or changed up; 1 refused\n"
    "or no answer within --timeout; 2 bad usage; 3 reloaded, but a consumer\n"
    "added or changed is down or halted; 4 refused because the init of a\n"
    "consumer added or changed did not return within shutdown_timeout (it is\n"
    "abandoned; the running consumers go on).",
};

/* Parses the command line: the endpoint, or NULL with *status to return. */
static const char *
s_parse (int argc, char **argv, double *timeout_s, fh_config_t **config, int *status)
{
    *config = NULL;
    *status = FH_EXIT_USAGE;
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, timeout_s);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0)
        ; /* --timeout is stored by the layer; -c, -e and the keys kept in cli */
    if (opt < 0)
        *status = fh_cli_status (&cli);
    else if (cli.next < argc)
        fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next]);
    else
        return fh_cli_control_open (&cli, true, config, status);
    return NULL;
}

/* A reload applied with consumers not up: "reloaded ...; not up:
   consumer 'x' is down: why; consumer 'y' ...". The first part on
   stdout, one line per consumer on stderr. */
static int
s_down (char *answer)
{
    char *list = strstr (answer, "; not up: ");
    if (list) {
        *list = '\0';
        list += strlen ("; not up: ");
    }
    printf ("%s\n", answer);
    fflush (stdout);
    while (list && *list) {
        char *next = strstr (list, "; consumer '");
        if (next)
            *next = '\0';
        fprintf (stderr, "fanhub reload: %s\n", list);
        list = next ? next + 2 : NULL;
    }
    return FH_EXIT_RELOAD_DOWN;
}

int
fh_cmd_reload (int argc, char **argv)
{
    fh_config_t *config;
    int status;
    double timeout_s = 65;
    const char *endpoint = s_parse (argc, argv, &timeout_s, &config, &status);
    if (!endpoint)
        return status;
    char err[2048];
    zsys_handler_set (NULL);
    char *answer = fh_control_call (endpoint, "RELOAD", (int) (timeout_s * 1000), err, sizeof err);
    status = FH_EXIT_FAILURE;
    if (!answer)
        fprintf (stderr,
                 "fanhub reload: %s (the reload may still be running: a plugin's init "
                 "that has not returned holds its answer)\n",
                 err);
    else if (strncmp (answer, "OK ", 3) == 0) {
        printf ("%s\n", answer + 3);
        status = FH_EXIT_OK;
    }
    else if (strncmp (answer, "DOWN ", 5) == 0)
        status = s_down (answer + 5);
    else {
        fprintf (stderr, "fanhub reload: %s\n",
                 strncmp (answer, "ERROR ", 6) == 0 ? answer + 6 : answer);
        if (strncmp (answer, "ERROR ", 6) == 0
            && strstr (answer, " refused: " FH_INIT_ABANDONED_WORD))
            status = FH_EXIT_RELOAD_INIT_HUNG;
    }
    free (answer);
    fh_config_destroy (&config);
    return status;
}
