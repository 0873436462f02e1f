/*  cmd_restart - `fanhub restart CONSUMER`: a rolling restart of one
    consumer of a running hub, through the handover a reload uses. */
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
     "give up after S seconds without an answer (default 65; the new\n"
     "instance's init holds the answer)"},
    FH_CLI_CURVE_OPTIONS,
    {0, NULL, NULL, NULL},
};

/* --timeout: seconds, into the double fh_cmd_restart reads. */
static const fh_cli_value_t s_values[] = {
    {'t', FH_CLI_SECONDS, 0, 0.001, 86400},
    {0},
};

static const fh_cli_command_t s_command = {
    "restart",
    "[--timeout S] [-c FILE | -e ENDPOINT] CONSUMER",
    "Gives one consumer of a running hub a new instance made from the\n"
    "running configuration, exactly as a reload that changed it would: the\n"
    "new instance's plugin is loaded and its init runs (a worker consumer\n"
    "starts new worker processes, which load the code anew); the old\n"
    "instance takes no new message, consumes what it holds and leaves; then\n"
    "the new one takes over its queue and spool. Nothing is lost; what the\n"
    "old one's workers held when it left may be delivered again\n"
    "(docs/guarantees.md). The new instance starts unpaused.",
    s_options,
    "Exit status: 0 restarted, 1 refused (no such consumer, another restart\n"
    "under way, its plugin refused) or no answer within --timeout, 2 bad\n"
    "usage, 3 restarted but the new instance is down or halted (printed with\n"
    "its reason on stderr), 4 refused because its plugin's init did not\n"
    "return within shutdown_timeout (the old instance goes on).",
};

int
fh_cmd_restart (int argc, char **argv)
{
    double timeout_s = 65;
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, &timeout_s);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0)
        ; /* --timeout is stored by the layer; -c, -e and the keys kept in cli */
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next >= argc)
        return fh_cli_usage_error (&s_command, "which consumer? (the CONSUMER argument)");
    if (cli.next + 1 < argc)
        return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next + 1]);
    const char *name = argv[cli.next];
    fh_config_t *config = NULL;
    int status = FH_EXIT_USAGE;
    const char *endpoint = fh_cli_control_open (&cli, true, &config, &status);
    if (!endpoint)
        return status;
    zsys_handler_set (NULL);
    fanhub_bytes_t frames[2] = {{"RESTART", 7}, {name, strlen (name)}};
    char err[2048];
    char *answer
        = fh_control_call_frames (endpoint, frames, 2, (int) (timeout_s * 1000), err, sizeof err);
    status = FH_EXIT_FAILURE;
    if (!answer)
        fprintf (stderr, "fanhub restart: %s (the restart may still be running)\n", err);
    else if (strncmp (answer, "OK ", 3) == 0) {
        printf ("%s\n", answer + 3);
        status = FH_EXIT_OK;
    }
    else if (strncmp (answer, "DOWN ", 5) == 0) {
        char *reason = strstr (answer, "; not up: ");
        if (reason)
            *reason = '\0';
        printf ("%s\n", answer + 5);
        fprintf (stderr, "fanhub restart: %s\n", reason ? reason + 10 : "not up");
        status = FH_EXIT_RELOAD_DOWN;
    }
    else {
        fprintf (stderr, "fanhub restart: %s\n",
                 strncmp (answer, "ERROR ", 6) == 0 ? answer + 6 : answer);
        if (strncmp (answer, "ERROR ", 6) == 0
            && strstr (answer, " refused: " FH_INIT_ABANDONED_WORD))
            status = FH_EXIT_RELOAD_INIT_HUNG;
    }
    free (answer);
    fh_config_destroy (&config);
    return status;
}
