/*  main - the fanhub binary: dispatches to a subcommand, git style. */
#include "cli.h"
#include "commands.h"
#include "config.h"
#include "plugin.h"

#include <stdint.h>
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
    {"restart", fh_cmd_restart, "give one consumer of a running hub a fresh instance"},
    {"pause", fh_cmd_pause, "stop delivery to one consumer of a running hub"},
    {"resume", fh_cmd_resume, "resume delivery to a paused consumer"},
    {"dead-letter", fh_cmd_dead_letter, "list, show or replay a consumer's dead letters"},
    {"plugins", fh_cmd_plugins, "list the plugins in the plugin directory"},
    {"replay", fh_cmd_replay, "feed messages from a file to one plugin (plugin test harness)"},
    {"pub", fh_cmd_pub, "publish messages to the bus (like fedmsg-logger)"},
    {"tail", fh_cmd_tail, "print messages from the bus (like fedmsg-tail)"},
    {"keygen", fh_cmd_keygen, "write a CurveZMQ key pair (for bus.curve and the relay)"},
};

#define S_COMMAND_COUNT (sizeof s_commands / sizeof s_commands[0])

/* Edits (insert, delete, replace, swap two neighbours) from a to b: the
   optimal string alignment distance. Names longer than 63 bytes are far
   from every command. */
static size_t
s_distance (const char *a, const char *b)
{
    size_t la = strlen (a), lb = strlen (b);
    if (la > 63 || lb > 63)
        return SIZE_MAX;
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        for (size_t j = 0; j <= lb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = i + j;
                continue;
            }
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]
                && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* Says that name is not a command, with the commands it is closest to
   (one or two edits away, one for names of up to three characters; or
   the start of a command's name), as git does. */
static void
s_unknown (const char *name)
{
    size_t len = strlen (name), limit = len > 3 ? 2 : 1, best = SIZE_MAX;
    size_t distance[S_COMMAND_COUNT];
    for (size_t i = 0; i < S_COMMAND_COUNT; i++) {
        distance[i] = s_distance (name, s_commands[i].name);
        if (len >= 2 && strncmp (s_commands[i].name, name, len) == 0 && distance[i] > limit)
            distance[i] = limit; /* a prefix: "dead" for dead-letter */
        if (distance[i] < best)
            best = distance[i];
    }
    fprintf (stderr, "fanhub: '%s' is not a command", name);
    if (best <= limit) {
        const char *sep = "; did you mean ";
        for (size_t i = 0; i < S_COMMAND_COUNT; i++)
            if (distance[i] == best) {
                fprintf (stderr, "%s'%s'", sep, s_commands[i].name);
                sep = " or ";
            }
        fprintf (stderr, "?");
    }
    fprintf (stderr, " (see 'fanhub --help')\n");
}

static void
s_usage (FILE *out)
{
    fprintf (out, "usage: fanhub COMMAND [OPTIONS]\n"
                  "\n"
                  "fanhub subscribes to a ZeroMQ message bus and hands each message to\n"
                  "every consumer (a plugin, on its own thread) whose topics match.\n"
                  "\n"
                  "commands:\n");
    for (size_t i = 0; i < S_COMMAND_COUNT; i++)
        fprintf (out, "  %-12s %s\n", s_commands[i].name, s_commands[i].summary);
    fprintf (out, "\n"
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
    /* Every command that reads a configuration may meet a consumer's
       fedora_messaging: file, read by the runner beside the plugins
       (run and check set it again from --plugin-dir). */
    fh_config_set_plugin_dir (fh_plugin_dir (NULL));
    for (size_t i = 0; i < S_COMMAND_COUNT; i++)
        if (strcmp (name, s_commands[i].name) == 0)
            return s_commands[i].run (argc - 1, argv + 1);
    s_unknown (name);
    return FH_EXIT_USAGE;
}
