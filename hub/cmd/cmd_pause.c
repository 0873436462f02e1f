/*  cmd_pause - `fanhub pause CONSUMER` and `fanhub resume CONSUMER`: one
    consumer of a running hub stops taking messages from its queue, and
    goes on. The pair shares its options and its one request. */
#include "cli.h"
#include "commands.h"
#include "control.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const fh_cli_option_t s_options[] = {
    FH_CLI_CONTROL_OPTIONS,
    FH_CLI_CURVE_OPTIONS,
    {0, NULL, NULL, NULL},
};

static const fh_cli_command_t s_pause = {
    "pause",
    "[-c FILE | -e ENDPOINT] CONSUMER",
    "Stops delivery to one consumer of a running hub: its thread(s) take no\n"
    "more messages from its queue or spool (consumes already started\n"
    "finish). The queue keeps filling under its overflow policy (a spill\n"
    "consumer spills); stats show the state 'paused' (3), and the shipped\n"
    "alerts FanhubBacklogGrowing and FanhubConsumerNoProgress stay silent\n"
    "for it. `fanhub resume` ends it; so do a reload that changes the\n"
    "consumer and `fanhub restart` (the new instance starts unpaused), and a\n"
    "stop (the hub drains its queues as always). A pause does not outlive\n"
    "the hub's process.",
    s_options,
    "Exit status: 0 paused, 1 no such consumer or no answer, 2 bad usage.",
};

static const fh_cli_command_t s_resume = {
    "resume",
    "[-c FILE | -e ENDPOINT] CONSUMER",
    "Resumes delivery to a consumer `fanhub pause` stopped: it works off\n"
    "its backlog.",
    s_options,
    "Exit status: 0 resumed (also when it was not paused), 1 no such\n"
    "consumer or no answer, 2 bad usage.",
};

static int
s_run (const fh_cli_command_t *command, const char *word, int argc, char **argv)
{
    fh_cli_t cli;
    fh_cli_begin (&cli, command, argc, argv);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0)
        ;
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next >= argc)
        return fh_cli_usage_error (command, "which consumer? (the CONSUMER argument)");
    if (cli.next + 1 < argc)
        return fh_cli_usage_error (command, "unexpected argument '%s'", argv[cli.next + 1]);
    const char *name = argv[cli.next];
    fh_config_t *config = NULL;
    int status = FH_EXIT_USAGE;
    const char *endpoint = fh_cli_control_open (&cli, true, &config, &status);
    if (!endpoint)
        return status;
    zsys_handler_set (NULL);
    fanhub_bytes_t frames[2] = {{word, strlen (word)}, {name, strlen (name)}};
    char err[2048];
    char *answer = fh_control_call_frames (endpoint, frames, 2, 10000, err, sizeof err);
    status = FH_EXIT_FAILURE;
    if (!answer)
        fprintf (stderr, "fanhub %s: %s\n", command->name, err);
    else if (strncmp (answer, "OK ", 3) == 0) {
        printf ("%s\n", answer + 3);
        status = FH_EXIT_OK;
    }
    else
        fprintf (stderr, "fanhub %s: %s\n", command->name,
                 strncmp (answer, "ERROR ", 6) == 0 ? answer + 6 : answer);
    free (answer);
    fh_config_destroy (&config);
    return status;
}

int
fh_cmd_pause (int argc, char **argv)
{
    return s_run (&s_pause, "PAUSE", argc, argv);
}

int
fh_cmd_resume (int argc, char **argv)
{
    return s_run (&s_resume, "RESUME", argc, argv);
}
