/*  cmd_stats - `fanhub stats`: ask a running hub for its figures.

    Sends STATS to the hub's control socket and prints the snapshot as JSON
    (as the hub sent it), collectd PUTVAL lines, Prometheus text, or a
    table; --watch repeats once a second. --input formats a saved JSON
    snapshot instead of asking a hub.

    --watch on a terminal redraws in place, as top does: it switches to
    the terminal's alternate screen (so nothing scrolls into its history),
    writes each table from the top left, clearing what is left of each
    line and below the table, and switches back when interrupted. Piped,
    it appends the tables, a blank line between two. The table's RATE is
    then taken between the last two snapshots.

    The table gives each consumer's state and, under its line, its last
    error, cut to the terminal's width (stdout's; $COLUMNS when stdout is
    not a terminal; not cut without either). --consumer NAME shows one
    consumer in full instead (stats_table.h), or its JSON object alone
    with --format json.
*/
#include "cli.h"
#include "value.h"
#include "commands.h"
#include "control.h"
#include "stats_format.h"
#include "stats_table.h"

#include <czmq.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

typedef enum {
    FORMAT_JSON,
    FORMAT_COLLECTD,
    FORMAT_PROMETHEUS,
    FORMAT_TABLE,
    FORMAT_CONSUMER /* --consumer: one in full */
} s_format_t;

enum { S_OPT_HOST = FH_CLI_LONG_ONLY, S_OPT_INPUT, S_OPT_CONSUMER };

static const fh_cli_option_t s_options[] = {
    FH_CLI_CONTROL_OPTIONS,
    {'f', "format", "FORMAT",
     "json (default), collectd (PUTVAL lines),\n"
     "prometheus (text exposition), table"},
    {'w', "watch", NULL,
     "print a table once a second until interrupted\n"
     "(with --format, that format once a second)"},
    {S_OPT_HOST, "host", "NAME", "collectd host name (default: this host's name)"},
    {S_OPT_INPUT, "input", "FILE",
     "format a saved JSON snapshot ('-' = stdin)\n"
     "instead of asking a hub"},
    {S_OPT_CONSUMER, "consumer", "NAME",
     "one consumer in full: state, last error, every\n"
     "counter, latencies, workers (with -f json: its\n"
     "JSON object)"},
    {'t', "timeout", "MS", "how long to wait for the hub (default 2000)"},
    FH_CLI_CURVE_OPTIONS,
    {0, NULL, NULL, NULL},
};

/* --timeout: milliseconds (bare, as it always was), into an int. */
static const fh_cli_value_t s_values[] = {
    {'t', FH_CLI_MILLIS, 0, 1, 3600000},
    {0},
};

static const fh_cli_command_t s_command = {
    "stats",
    "[-c FILE | -e ENDPOINT] [-f FORMAT] [--watch] [--consumer NAME]\n"
    "--input SNAPSHOT.json [-f FORMAT] [--consumer NAME]",
    "Asks a running hub for its figures through its control socket: per\n"
    "consumer backlog, counters and latency percentiles, and hub-wide\n"
    "counters. The table shows each consumer's state (up, down, halted,\n"
    "stuck) and its last error, cut to the terminal's width.\n"
    "Field names and definitions: docs/metrics.md.",
    s_options,
    "Exit status: 0 ok, 1 the hub did not answer or answered an error,\n"
    "2 bad usage or configuration.",
};

static char *
s_read_input (const char *path, char *err, size_t errlen)
{
    FILE *file = strcmp (path, "-") == 0 ? stdin : fopen (path, "rb");
    if (!file) {
        snprintf (err, errlen, "%s: %s", path, strerror (errno));
        return NULL;
    }
    size_t size = 0, room = 65536;
    char *text = malloc (room);
    size_t n;
    while (text && (n = fread (text + size, 1, room - size - 1, file)) > 0) {
        size += n;
        if (size + 1 == room) {
            char *bigger = realloc (text, room *= 2);
            if (!bigger)
                free (text);
            text = bigger;
        }
    }
    if (file != stdin)
        fclose (file);
    if (!text) {
        snprintf (err, errlen, "%s: out of memory", path);
        return NULL;
    }
    text[size] = '\0';
    return text;
}

/* The snapshot's text as JSON: the hub's answer, or a file a user hands
   over (checked: fh_metrics_json_check). NULL with err set. */
static json_t *
s_parse (const char *snapshot, bool check, char *err, size_t errlen)
{
    json_error_t error;
    json_t *json = json_loads (snapshot, 0, &error);
    char why[256];
    if (!json)
        snprintf (err, errlen, "not a stats snapshot: %s (line %d, column %d)", error.text,
                  error.line, error.column);
    else if (check && fh_metrics_json_check (json, why, sizeof why) != 0)
        snprintf (err, errlen, "not a stats snapshot: %s", why);
    else if (!json_is_object (json))
        snprintf (err, errlen, "not a stats snapshot: not a JSON object");
    else
        return json;
    json_decref (json);
    return NULL;
}

/* Formats one snapshot, its text and (but for JSON) what it parses to;
   returns the text to print (malloc'd) or NULL. A table's rates are
   taken since *previous when there is one; the snapshot then replaces
   it (previous may be NULL: none kept). */
/* The columns of the terminal on stdout, else $COLUMNS, else 0 (none). */
static size_t
s_width (void)
{
    struct winsize size;
    if (isatty (STDOUT_FILENO) && ioctl (STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
        return size.ws_col;
    long long value = 0;
    return fh_value_integer (getenv ("COLUMNS"), false, &value) && value > 0 && value < 100000
               ? (size_t) value
               : 0;
}

/* --consumer NAME: its JSON object, or its view; NULL with err. */
static char *
s_format_consumer (const json_t *json, const char *name, bool as_json, char *err, size_t errlen)
{
    char *text = NULL;
    bool found = false;
    if (as_json) {
        size_t i;
        json_t *consumer;
        json_array_foreach (json_object_get (json, "consumers"), i, consumer)
        {
            if (!found && json_is_string (json_object_get (consumer, "name"))
                && strcmp (json_string_value (json_object_get (consumer, "name")), name) == 0) {
                found = true;
                text = json_dumps (consumer, JSON_COMPACT | JSON_PRESERVE_ORDER);
                char *line = text ? realloc (text, strlen (text) + 2) : NULL;
                if (line)
                    strcat (line, "\n");
                else
                    free (text);
                text = line;
            }
        }
    }
    else
        text = fh_stats_format_consumer (json, name, &found);
    if (!found) {
        free (text);
        text = NULL;
        snprintf (err, errlen, "the hub has no consumer '%s' (`fanhub stats -f table` lists them)",
                  name);
    }
    else if (!text)
        snprintf (err, errlen, "out of memory");
    return text;
}

static char *
s_format (const char *snapshot, const json_t *json, s_format_t format, const char *host,
          const char *consumer, json_t **previous, char *err, size_t errlen)
{
    char *text = NULL;
    if (consumer)
        return s_format_consumer (json, consumer, format == FORMAT_JSON, err, errlen);
    if (format == FORMAT_JSON) {
        size_t len = strlen (snapshot);
        text = malloc (len + 2);
        if (text) {
            memcpy (text, snapshot, len);
            memcpy (text + len, "\n", 2);
        }
    }
    else if (format == FORMAT_PROMETHEUS)
        text = fh_stats_format_prometheus (json);
    else if (format == FORMAT_TABLE && previous) {
        text = fh_stats_format_table_since (json, *previous, s_width ());
        json_decref (*previous);
        *previous = json_incref ((json_t *) json);
    }
    else if (format == FORMAT_TABLE)
        text = fh_stats_format_table_since (json, NULL, s_width ());
    else {
        double interval
            = json_number_value (json_object_get (json_object_get (json, "hub"), "interval"));
        text = fh_stats_format_collectd (json, host, interval > 0 ? interval : 10, 0);
    }
    if (!text)
        snprintf (err, errlen, "out of memory");
    return text;
}

/* --input FILE: one snapshot read from a file, printed in format. */
static int
s_print_input (const char *input, s_format_t format, const char *host, const char *consumer)
{
    char err[2048];
    char *snapshot = s_read_input (input, err, sizeof err);
    /* Checked in every format: JSON's would be printed as it came. */
    json_t *json = snapshot ? s_parse (snapshot, true, err, sizeof err) : NULL;
    char *text = json ? s_format (snapshot, json, format, host, consumer, NULL, err, sizeof err)
                      : NULL;
    json_decref (json);
    free (snapshot);
    if (!text) {
        fprintf (stderr, "fanhub stats: %s\n", err);
        return FH_EXIT_FAILURE;
    }
    fputs (text, stdout);
    free (text);
    return FH_EXIT_OK;
}

/* On a terminal: text from the top left of the screen, each line's
   rest and everything below the text cleared, so the screen holds this
   text only, whatever was there before. */
static void
s_redraw (const char *text)
{
    fputs ("\033[H", stdout); /* home */
    for (const char *line = text; *line;) {
        const char *end = strchr (line, '\n');
        size_t len = end ? (size_t) (end - line) : strlen (line);
        fwrite (line, 1, len, stdout);
        fputs ("\033[K", stdout); /* clear to the end of the line */
        line += len + (end ? 1 : 0);
        if (*line) /* none after the last line: a full screen must not scroll */
            fputs ("\n", stdout);
    }
    fputs ("\033[J", stdout); /* clear below */
}

/* Asks the hub at endpoint for a snapshot and prints it; with watch,
   once a second until SIGINT or SIGTERM. Returns the exit status. */
static int
s_poll (const char *endpoint, s_format_t format, const char *host, const char *consumer,
        int timeout_ms, bool watch)
{
    char err[2048];
    /* CZMQ would put its own handlers in place at the first socket. */
    zsys_handler_set (NULL);
    fh_cli_stop_on_signals (NULL, 0);
    int status = FH_EXIT_OK;
    bool screen = watch && isatty (STDOUT_FILENO);
    json_t *previous = NULL;
    if (screen)
        fputs ("\033[?1049h\033[?25l", stdout); /* alternate screen, cursor hidden */
    do {
        char *answer = fh_control_call (endpoint, "STATS", timeout_ms, err, sizeof err);
        char *text = NULL;
        if (answer && strncmp (answer, "ERROR", 5) == 0)
            snprintf (err, sizeof err, "%s: the hub answered: %s", endpoint, answer);
        else if (answer) {
            /* The hub's answer goes out as it came in JSON. */
            bool raw = format == FORMAT_JSON && !consumer;
            json_t *json = raw ? NULL : s_parse (answer, false, err, sizeof err);
            if (raw || json)
                text = s_format (answer, json, format, host, consumer, watch ? &previous : NULL,
                                 err, sizeof err);
            json_decref (json);
        }
        free (answer);
        if (!text && screen) {
            /* On the screen, where stderr would scroll it away. */
            char line[2100];
            snprintf (line, sizeof line, "fanhub stats: %s\n", err);
            s_redraw (line);
            fflush (stdout);
            status = FH_EXIT_FAILURE;
        }
        else if (!text) {
            fprintf (stderr, "fanhub stats: %s\n", err);
            status = FH_EXIT_FAILURE;
            if (!watch)
                break;
        }
        else {
            if (screen)
                s_redraw (text);
            else
                fputs (text, stdout);
            if (watch && !screen)
                fputs ("\n", stdout);
            fflush (stdout);
            free (text);
            status = FH_EXIT_OK;
        }
        if (watch && !fh_cli_stopped ()) {
            struct timespec second = {1, 0};
            nanosleep (&second, NULL);
        }
    } while (watch && !fh_cli_stopped ());
    if (screen) {
        fputs ("\033[?25h\033[?1049l", stdout); /* cursor back, main screen */
        fflush (stdout);
    }
    json_decref (previous);
    return watch && fh_cli_stopped () ? FH_EXIT_OK : status;
}

/* --format NAME; false when there is no such format. */
static bool
s_format_named (const char *name, s_format_t *format)
{
    static const char *const names[] = {
        [FORMAT_JSON] = "json",
        [FORMAT_COLLECTD] = "collectd",
        [FORMAT_PROMETHEUS] = "prometheus",
        [FORMAT_TABLE] = "table",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i] && strcmp (name, names[i]) == 0) {
            *format = (s_format_t) i;
            return true;
        }
    return false;
}

int
fh_cmd_stats (int argc, char **argv)
{
    const char *input = NULL, *host = NULL, *consumer = NULL;
    s_format_t format = FORMAT_JSON;
    bool format_given = false, watch = false;
    int timeout_ms = 2000;
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, &timeout_ms);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        switch (opt) {
        case 'w': watch = true; break;
        case S_OPT_HOST: host = arg; break;
        case S_OPT_INPUT: input = arg; break;
        case S_OPT_CONSUMER: consumer = arg; break;
        case 'f':
            format_given = true;
            if (!s_format_named (arg, &format))
                return fh_cli_usage_error (&s_command,
                                           "unknown format '%s' (json, collectd, "
                                           "prometheus, table)",
                                           arg);
            break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next < argc) {
        return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next]);
    }
    if ((cli.config && cli.endpoint) || (input && (cli.config || cli.endpoint || watch))) {
        return fh_cli_usage_error (&s_command,
                                   "give one of -c, -e or --input (and --watch only with a hub)");
    }
    if (consumer && format_given && format != FORMAT_JSON)
        return fh_cli_usage_error (&s_command,
                                   "--consumer shows one consumer in full, or as "
                                   "JSON with -f json; not with -f %s",
                                   format == FORMAT_TABLE      ? "table"
                                   : format == FORMAT_COLLECTD ? "collectd"
                                                               : "prometheus");
    if (consumer && !format_given)
        format = FORMAT_CONSUMER;
    if (watch && !format_given && !consumer)
        format = FORMAT_TABLE;
    char hostname[256];
    host = fh_cli_host_name (host, hostname, sizeof hostname);

    if (input)
        return s_print_input (input, format, host, consumer);
    fh_config_t *config;
    int keys;
    const char *endpoint = fh_cli_control_open (&cli, true, &config, &keys);
    if (!endpoint)
        return keys;
    int status = s_poll (endpoint, format, host, consumer, timeout_ms, watch);
    fh_config_destroy (&config);
    return status;
}
