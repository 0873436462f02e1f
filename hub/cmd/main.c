/*  main - the fanhub binary: dispatches to a subcommand, git style. */
#include "cli.h"
#include "commands.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*run) (int argc, char **argv);
    const char *summary;
} s_command_t;

static const s_command_t s_commands[] = {
    {"run", fh_cmd_run, "run the hub: subscribe to the bus, feed the consumers"},
    {"check", fh_cmd_check, "validate a configuration and load its plugins"},
    {"stats", fh_cmd_stats, "show a running hub's backlog, counters and latency"},
    {"collectd", fh_cmd_collectd, "feed a running hub's figures to collectd's Exec plugin"},
    {"emit", fh_cmd_emit, "inject a message into a running hub; --wait until handled"},
    {"reload", fh_cmd_reload, "ask a running hub to re-read its configuration"},
    {"dead-letter", fh_cmd_dead_letter, "list, show or replay a consumer's dead letters"},
    {"plugins", fh_cmd_plugins, "list the plugins in the plugin directory"},
    {"replay", fh_cmd_replay, "feed messages from a file to one plugin (plugin test harness)"},
    {"pub", fh_cmd_pub, "publish messages to the bus (like fedmsg-logger)"},
    {"tail", fh_cmd_tail, "print messages from the bus (like fedmsg-tail)"},
    {"keygen", fh_cmd_keygen, "write a CurveZMQ key pair (for bus.curve and the relay)"},
};

static void
s_usage (FILE *out)
{
    fprintf (out,
             "usage: fanhub COMMAND [OPTIONS]\n"
             "\n"
             "fanhub subscribes to a ZeroMQ message bus and hands each message to\n"
             "every consumer (a plugin, on its own thread) whose topics match.\n"
             "\n"
             "commands:\n");
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        fprintf (out, "  %-12s %s\n", s_commands[i].name, s_commands[i].summary);
    fprintf (out,
             "\n"
             "'fanhub COMMAND --help' (or 'fanhub help COMMAND') tells more of each.\n"
             "Without -c, 'run' and 'check' use the built-in default configuration\n"
             "(config/fanhub.yaml).\n"
             "Exit status: 0 success, 1 runtime failure, 2 bad usage or configuration.\n");
}

int
main (int argc, char **argv)
{
    if (argc < 2) {
        s_usage (stderr);
        return FH_EXIT_USAGE;
    }
    const char *name = argv[1];
    /* `fanhub help CMD` is `fanhub CMD --help`. */
    char help_flag[] = "--help";
    char *help_argv[] = {NULL, NULL, help_flag, NULL};
    if (strcmp (name, "help") == 0 && argc == 3) {
        help_argv[1] = argv[2];
        argc = 3;
        argv = help_argv;
        name = argv[1];
    }
    else if (strcmp (name, "help") == 0 && argc > 3) {
        fprintf (stderr, "fanhub help: expected one command; see 'fanhub --help'\n");
        return FH_EXIT_USAGE;
    }
    else if (strcmp (name, "--help") == 0 || strcmp (name, "-h") == 0
             || strcmp (name, "help") == 0) {
        s_usage (stdout);
        return FH_EXIT_OK;
    }
    if (strcmp (name, "--version") == 0 || strcmp (name, "version") == 0) {
        fh_cli_version ();
        return FH_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (strcmp (name, s_commands[i].name) == 0)
            return s_commands[i].run (argc - 1, argv + 1);
    fprintf (stderr, "fanhub: '%s' is not a command; see 'fanhub --help'\n", name);
    return FH_EXIT_USAGE;
}
