/*  cmd_emit - `fanhub emit`: inject one message through a running hub.

    The message goes through the hub's control socket to its enqueuer, is
    routed as if it came from the bus (and is also published on
    bus.publish, when set), and with --wait the command returns once every
    consumer it went to has finished with it, printing each one's outcome
    (Upstart's `initctl emit`, which returns once every job has reacted).
    Deploy scripts use it to wait until the consumers have caught up.
*/
#include "cli.h"
#include "cli_fedmsg.h"
#include "commands.h"
#include "control.h"

#include <czmq.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_NO_MATCH 3
#define EXIT_TIMEOUT 124

static const fh_cli_option_t s_options[] = {
    {'w', "wait", NULL,
     "return once every consumer has finished with the\n"
     "message, printing each one's outcome"},
    {'t', "timeout", "S", "with --wait, give up after S seconds (default 30)"},
    FH_CLI_CONTROL_OPTIONS,
    FH_CLI_CURVE_OPTIONS,
    FH_CLI_FEDMSG_OPTIONS,
    {0, NULL, NULL, NULL},
};

/* --timeout: seconds, into the double fh_cmd_emit reads. */
static const fh_cli_value_t s_values[] = {
    {'t', FH_CLI_SECONDS, 0, 0, 86400},
    {0},
};

static const fh_cli_command_t s_command = {
    "emit",
    "[--wait] [--timeout S] [-c FILE | -e ENDPOINT] TOPIC [BODY | -]\n"
    "--fedmsg [--sign-key FILE --sign-cert FILE] [OPTION...] TOPIC [BODY | -]",
    "Injects one message into a running hub, as if it had come from the bus:\n"
    "every consumer whose topics match gets it (and it is also published on\n"
    "bus.publish, when the configuration sets it). BODY defaults to empty;\n"
    "'-' reads it from standard input.",
    s_options,
    "Exit status: 0 every consumer completed it (without --wait: it was\n"
    "routed), 1 a consumer did not complete it (failed, dropped, spilled to\n"
    "disk, or replaced by a newer message of its key), 2 bad usage\n"
    "or configuration, 3 no consumer matched its topic, 124 --timeout passed\n"
    "first. 1 also when the hub cannot be reached or refuses the message.",
};

static int s_emit (fh_cli_t *cli, fh_cli_fedmsg_t *fedmsg, bool wait, double timeout_s);

static char *
s_read_stdin (size_t *size)
{
    size_t room = 65536, used = 0, n;
    char *data = malloc (room);
    while (data && (n = fread (data + used, 1, room - used, stdin)) > 0) {
        used += n;
        if (used == room) {
            char *grown = realloc (data, room *= 2);
            if (!grown)
                free (data);
            data = grown;
        }
    }
    *size = used;
    return data;
}

/* Prints the hub's answer to EMIT, one line a consumer, and returns
   the exit status it means. */
static int
s_report (const char *answer, const char *topic, bool wait, double timeout_s)
{
    int status = FH_EXIT_FAILURE;
    if (strncmp (answer, "ERROR", 5) == 0)
        fprintf (stderr, "fanhub emit: the hub refused the message: %s\n", answer + 6);
    else {
        json_t *json = json_loads (answer, 0, NULL);
        json_t *outcomes = json_object_get (json, "outcomes");
        int matched = (int) json_integer_value (json_object_get (json, "matched"));
        bool timed_out = json_is_true (json_object_get (json, "timed_out"));
        if (!json || !json_is_object (outcomes))
            fprintf (stderr, "fanhub emit: unexpected answer from the hub: %s\n", answer);
        else if (matched == 0) {
            printf ("no consumer matched topic %s\n", topic);
            status = EXIT_NO_MATCH;
        }
        else {
            const char *name;
            json_t *outcome;
            bool all_completed = true;
            json_object_foreach (outcomes, name, outcome)
            {
                const char *text = json_string_value (outcome);
                printf ("%s: %s\n", name, text ? text : "?");
                if (!text || strcmp (text, "completed") != 0)
                    all_completed = false;
            }
            if (timed_out) {
                fprintf (stderr, "fanhub emit: not handled within %g s\n", timeout_s);
                status = EXIT_TIMEOUT;
            }
            else if (!wait) {
                /* Routed: dropped is known now, completion is not awaited. */
                status = FH_EXIT_OK;
                json_object_foreach (outcomes, name,
                                     outcome) if (strcmp (json_string_value (outcome), "dropped")
                                                  == 0) status
                    = FH_EXIT_FAILURE;
            }
            else
                status = all_completed ? FH_EXIT_OK : FH_EXIT_FAILURE;
        }
        json_decref (json);
    }
    return status;
}

int
fh_cmd_emit (int argc, char **argv)
{
    bool wait = false;
    double timeout_s = 30;
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, &timeout_s);
    int opt;
    const char *arg;
    fh_cli_fedmsg_t fedmsg = {0};
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        if (fh_cli_fedmsg_option (&fedmsg, opt, arg))
            continue;
        switch (opt) {
        case 'w': wait = true; break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next >= argc || argc - cli.next > 2) {
        return fh_cli_usage_error (&s_command, "expected TOPIC [BODY | -]");
    }
    if (cli.config && cli.endpoint)
        return fh_cli_usage_error (&s_command, "give -c or -e, not both");
    int status = fh_cli_fedmsg_start (&fedmsg, &s_command);
    if (status >= 0)
        return status;
    status = s_emit (&cli, &fedmsg, wait, timeout_s);
    fh_cli_fedmsg_end (&fedmsg);
    return status;
}

/* Sends the EMIT and reports the answer; returns the exit status. */
static int
s_emit (fh_cli_t *cli, fh_cli_fedmsg_t *fedmsg, bool wait, double timeout_s)
{
    int argc = cli->argc;
    char **argv = cli->argv;
    const char *topic = argv[cli->next];
    const char *body_arg = cli->next + 1 < argc ? argv[cli->next + 1] : "";
    size_t body_size = strlen (body_arg);
    char *body_data = NULL;
    if (strcmp (body_arg, "-") == 0) {
        body_data = s_read_stdin (&body_size);
        if (!body_data) {
            fprintf (stderr, "fanhub emit: cannot read the body: %s\n", strerror (errno));
            return FH_EXIT_FAILURE;
        }
    }
    char err[2048];
    if (fedmsg->on) {
        int rc = fh_cli_fedmsg_wrap (fedmsg, topic, strlen (topic),
                                     body_data ? body_data : body_arg, body_size, err, sizeof err);
        free (body_data);
        body_data = NULL;
        if (rc < 0) {
            fprintf (stderr, "fanhub emit: --fedmsg: %s\n", err);
            return FH_EXIT_FAILURE;
        }
        body_arg = fedmsg->data;
        body_size = fedmsg->size;
    }
    fh_config_t *config;
    int keys;
    const char *endpoint = fh_cli_control_open (cli, false, &config, &keys);
    if (!endpoint) {
        free (body_data);
        return keys;
    }
    zsys_handler_set (NULL);
    char timeout_ms[32];
    snprintf (timeout_ms, sizeof timeout_ms, "%lld", (long long) (timeout_s * 1000));
    fanhub_bytes_t frames[] = {
        {"EMIT", 4},
        {wait ? "wait" : "nowait", wait ? 4 : 6},
        {timeout_ms, strlen (timeout_ms)},
        {topic, strlen (topic)},
        {body_data ? body_data : body_arg, body_size},
    };
    /* The hub answers by the deadline; give the socket a little more. */
    int socket_timeout = (int) (timeout_s * 1000) + 5000;
    char *answer = fh_control_call_frames (endpoint, frames, 5, socket_timeout, err, sizeof err);
    free (body_data);
    int status = answer ? s_report (answer, topic, wait, timeout_s) : FH_EXIT_FAILURE;
    if (!answer)
        fprintf (stderr, "fanhub emit: %s\n", err);
    free (answer);
    fh_config_destroy (&config);
    return status;
}
