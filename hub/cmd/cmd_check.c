/*  cmd_check - `fanhub check`: validate a configuration, load its plugins.

    Loads the file, then loads every consumer's plugin and runs its init
    and fini with the consumer's options, without touching the bus: what
    would stop `fanhub run` from starting is found here first.
*/
#include "cli.h"
#include "commands.h"
#include "hub.h"
#include "plugin.h"

#include <getopt.h>
#include <stdio.h>

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: fanhub check [-c FILE] [--plugin-dir DIR]\n"
             "\n"
             "Validates a configuration file and loads every consumer's plugin\n"
             "(init, then fini, with the consumer's options) without touching the\n"
             "bus. Without -c, checks the built-in default configuration.\n"
             "\n"
             "  -c, --config FILE     the YAML configuration to check\n"
             "      --plugin-dir DIR  where plugins named without a '/' are found\n"
             "                        (default: $FANHUB_PLUGIN_DIR, else the\n"
             "                        installed plugin directory)\n"
             "  -h, --help            this text\n"
             "\n"
             "Exit status: 0 valid, 2 invalid (the error names FILE:LINE:COL).\n");
}

int
fh_cmd_check (int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"plugin-dir", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL, *plugin_dir = NULL;
    int opt;
    optind = 1;
    while ((opt = getopt_long (argc, argv, "c:h", options, NULL)) != -1) {
        switch (opt) {
        case 'c': path = optarg; break;
        case 'P': plugin_dir = optarg; break;
        case 'h': s_usage (stdout); return FH_EXIT_OK;
        default:
            fprintf (stderr, "try 'fanhub check --help'\n");
            return FH_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "fanhub check: unexpected argument '%s'; try 'fanhub check --help'\n",
                 argv[optind]);
        return FH_EXIT_USAGE;
    }
    char err[2048];
    fh_config_t *config = fh_cli_load_config (path, err, sizeof err);
    if (!config) {
        fprintf (stderr, "fanhub check: %s\n", err);
        return FH_EXIT_USAGE;
    }
    fh_hub_t *hub = fh_hub_new (config, fh_plugin_dir (plugin_dir), err, sizeof err);
    if (!hub) {
        fprintf (stderr, "fanhub check: %s\n", err);
        fh_config_destroy (&config);
        return FH_EXIT_USAGE;
    }
    printf ("%s: OK, %zu consumer%s\n", config->source, config->consumer_count,
            config->consumer_count == 1 ? "" : "s");
    for (size_t i = 0; i < fh_hub_consumer_count (hub); i++) {
        fh_consumer_t *consumer = fh_hub_consumer (hub, i);
        printf ("  %s: %s\n", fh_consumer_name (consumer), fh_consumer_plugin_path (consumer));
    }
    fh_hub_destroy (&hub);
    fh_config_destroy (&config);
    return FH_EXIT_OK;
}
