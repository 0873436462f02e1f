/*  cmd_check - `fanhub check`: validate a configuration, load its plugins.

    Loads the file, then every consumer's plugin, which checks the
    consumer's options (check.h): what would stop `fanhub run` from
    starting is found here first, without touching the world: no socket,
    no file or directory created, no lock taken.
*/
#include "check.h"
#include "cli.h"
#include "commands.h"
#include "plugin.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static void
s_note (void *arg, const char *line)
{
    (void) arg;
    fprintf (stderr, "fanhub check: note: %s\n", line);
}

enum { S_OPT_PLUGIN_DIR = FH_CLI_LONG_ONLY, S_OPT_CONNECT, S_OPT_TIMEOUT };

static const fh_cli_option_t s_options[] = {
    {'c', "config", "FILE", "the YAML configuration to check"},
    {S_OPT_PLUGIN_DIR, "plugin-dir", "DIR",
     "where plugins named without a '/' are found\n"
     "(default: $FANHUB_PLUGIN_DIR, else the\n"
     "installed plugin directory)"},
    {S_OPT_CONNECT, "connect", NULL,
     "also try every bus endpoint: connect (with the\n"
     "configured CURVE keys) and say what each came to\n"
     "(connected, name not resolved, refused, handshake\n"
     "failed, no answer); bind endpoints are bound and\n"
     "unbound at once"},
    {S_OPT_TIMEOUT, "timeout", "SECONDS", "how long --connect waits for an endpoint (default 5)"},
    {0, NULL, NULL, NULL},
};

/* --timeout: seconds, into the double fh_cmd_check reads. */
static const fh_cli_value_t s_values[] = {
    {S_OPT_TIMEOUT, FH_CLI_SECONDS, 0, 0.001, 3600},
    {0},
};

static const fh_cli_command_t s_command = {
    "check",
    "[-c FILE] [--plugin-dir DIR] [--connect [--timeout SECONDS]]",
    "Validates a configuration file, loads every consumer's plugin and has\n"
    "it check the consumer's options, and looks at the state directory:\n"
    "what would stop 'fanhub run' is reported, without side effects (no\n"
    "socket bound, no file or directory created, no lock taken). Notes\n"
    "(a directory run would create, a spool a running hub holds) go to\n"
    "stderr. Without -c, checks the built-in default configuration.\n"
    "With --connect (opt-in, it touches the network) it then tries each\n"
    "bus endpoint as 'fanhub run' would.",
    s_options,
    "Exit status: 0 valid, 2 invalid (the error names FILE:LINE:COL),\n"
    "1 valid but an endpoint did not connect (--connect).",
};

int
fh_cmd_check (int argc, char **argv)
{
    const char *path = NULL, *plugin_dir = NULL;
    bool connect = false;
    double timeout_s = 5;
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, &timeout_s);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        switch (opt) {
        case 'c': path = arg; break;
        case S_OPT_PLUGIN_DIR: plugin_dir = arg; break;
        case S_OPT_CONNECT: connect = true; break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next < argc) {
        return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next]);
    }
    char err[2048];
    fh_config_set_plugin_dir (fh_plugin_dir (plugin_dir));
    fh_config_t *config = fh_cli_load_config (path, err, sizeof err);
    if (!config) {
        fprintf (stderr, "fanhub check: %s\n", err);
        return FH_EXIT_USAGE;
    }
    for (size_t i = 0; i < config->warnings.count; i++)
        fprintf (stderr, "fanhub check: warning: %s\n", config->warnings.items[i]);
    const char *dir = fh_plugin_dir (plugin_dir);
    char (*paths)[PATH_MAX]
        = calloc (config->consumer_count ? config->consumer_count : 1, sizeof *paths);
    if (!paths) {
        fprintf (stderr, "fanhub check: out of memory\n");
        fh_config_destroy (&config);
        return FH_EXIT_FAILURE;
    }
    for (size_t i = 0; i < config->consumer_count; i++) {
        const fh_consumer_config_t *consumer = &config->consumers[i];
        if (fh_check_consumer (consumer, dir, s_note, NULL, paths[i], sizeof paths[i], err,
                               sizeof err)
                != 0
            || fh_check_state (config, consumer, s_note, NULL, err, sizeof err) != 0) {
            fprintf (stderr, "fanhub check: %s\n", err);
            free (paths);
            fh_config_destroy (&config);
            return FH_EXIT_USAGE;
        }
    }
    printf ("%s: OK, %zu consumer%s\n", config->source, config->consumer_count,
            config->consumer_count == 1 ? "" : "s");
    for (size_t i = 0; i < config->consumer_count; i++)
        printf ("  %s: %s\n", config->consumers[i].name, paths[i]);
    free (paths);
    int status = connect ? fh_check_connect (config, (int64_t) (timeout_s * 1000)) : FH_EXIT_OK;
    fh_config_destroy (&config);
    return status;
}
