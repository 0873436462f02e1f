/*  cli - what the subcommands share. See cli.h. */
#include "cli.h"
#include "commands.h"
#include "control_curve.h"
#include "value.h"

#include <assert.h>
#include <czmq.h>
#include <fanhub/sdk_curve.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define FH_CLI_MAX_OPTIONS 40
#define FH_CLI_HELP (-2) /* ids the layer answers itself */
#define FH_CLI_VERSION (-3)
#define FH_CLI_HELP_COLUMN 24 /* where the help text of an option starts */

/* The command's --help text. */
static void s_usage (const fh_cli_command_t *command, FILE *out);

/* FH_CLI_CONTROL_OPTIONS: fh_cli_next knows them by these texts. */
const char fh_cli_control_config_help[] = "find the hub's control endpoint in this config\n"
                                          "(default: the built-in default configuration); one\n"
                                          "that does not load still gives its control: key";
const char fh_cli_control_endpoint_help[] = "the control endpoint itself (ipc://PATH or\n"
                                            "tcp://127.0.0.1:PORT)";

static const fh_cli_option_t s_help = {'h', "help", NULL, "this text"};
static const fh_cli_option_t s_version
    = {FH_CLI_VERSION, "version", NULL, "the version of fanhub and of its plugin ABI"};

void
fh_cli_begin (fh_cli_t *cli, const fh_cli_command_t *command, int argc, char **argv)
{
    *cli = (fh_cli_t){.command = command, .argc = argc, .argv = argv, .next = 1};
    optind = 0; /* 0, not 1: a full reset of getopt's state between commands */
}

void
fh_cli_begin_typed (fh_cli_t *cli, const fh_cli_command_t *command, int argc, char **argv,
                    const fh_cli_value_t *values, void *target)
{
    fh_cli_begin (cli, command, argc, argv);
    cli->values = values;
    cli->target = target;
}

static const fh_cli_option_t *
s_by_id (const fh_cli_command_t *command, int id)
{
    for (const fh_cli_option_t *o = command->options; o && o->name; o++)
        if (o->id == id)
            return o;
    return NULL;
}

/* The name of the option getopt refused, as typed: "--name" (without any
   "=value") or "-x". optopt is 0 for an unknown long option, the letter
   of an unknown short one, and the id of a known option otherwise (a
   value missing, or given to a flag). */
static void
s_refused (const fh_cli_t *cli, char *out, size_t size)
{
    const char *token = optind > 0 && optind <= cli->argc ? cli->argv[optind - 1] : "";
    const fh_cli_option_t *known = optopt ? s_by_id (cli->command, optopt) : NULL;
    if (optopt == FH_CLI_HELP || optopt == FH_CLI_VERSION)
        known = optopt == FH_CLI_HELP ? &s_help : &s_version;
    if (!optopt || (known && strncmp (token, "--", 2) == 0)) {
        snprintf (out, size, "%.*s", (int) strcspn (token, "="), token);
        return;
    }
    /* A short option; in a cluster such as "-qZ" the token is no help. */
    snprintf (out, size, "-%c", optopt);
}

/* "from 0 to 10" or, without a maximum, "of at least 0". */
static void
s_range (const fh_cli_value_t *o, const char *unit, char *out, size_t size)
{
    if (isinf (o->max))
        snprintf (out, size, "of at least %.15g%s", o->min, unit);
    else
        snprintf (out, size, "from %.15g to %.15g%s", o->min, o->max, unit);
}

/* where NULL: the option's own "--name". */
bool
fh_cli_store (fh_cli_t *cli, int id, const char *where, const char *text)
{
    const fh_cli_value_t *o = cli->values;
    while (o && o->id && o->id != id)
        o++;
    if (!o || !o->id)
        return true;
    assert (cli->target);
    void *at = (char *) cli->target + o->offset;
    long long v = 0;
    double d = 0;
    bool below_ms = false, ok = false;
    const char *what = "", *unit = "";
    switch (o->type) {
    case FH_CLI_INT:
    case FH_CLI_U64:
        ok = fh_value_integer (text, o->min < 0, &v);
        d = (double) v;
        what = "an integer";
        break;
    case FH_CLI_SIZE:
        ok = fh_value_size (text, &v);
        d = (double) v;
        what = FH_VALUE_SIZE_HINT;
        unit = " bytes";
        break;
    case FH_CLI_SECONDS:
    case FH_CLI_MILLIS:
        /* Whole milliseconds: a finer value would be cut without a word. */
        ok = fh_value_duration_ms (text, o->type == FH_CLI_SECONDS ? 1000 : 1, &v, &below_ms)
             && !below_ms;
        d = o->type == FH_CLI_SECONDS ? (double) v / 1e3 : (double) v;
        what = o->type == FH_CLI_SECONDS ? "seconds" : "milliseconds";
        unit = " (or " FH_VALUE_DURATION_HINT ")";
        break;
    case FH_CLI_NUMBER:
        ok = fh_value_number (text, &d);
        what = "a number";
        break;
    default: break;
    }
    if (!ok || d < o->min || d > o->max) {
        char range[96], name[64];
        s_range (o, unit, range, sizeof range);
        if (!where) {
            snprintf (name, sizeof name, "--%s", s_by_id (cli->command, id)->name);
            where = name;
        }
        cli->status = fh_cli_usage_error (cli->command, "%s: expected %s %s, got '%s'", where, what,
                                          range, text);
        return false;
    }
    switch (o->type) {
    case FH_CLI_INT:
    case FH_CLI_MILLIS: *(int *) at = (int) v; break;
    case FH_CLI_U64: *(uint64_t *) at = (uint64_t) v; break;
    case FH_CLI_SIZE: *(size_t *) at = (size_t) v; break;
    default: *(double *) at = d; break;
    }
    return true;
}

int
fh_cli_next (fh_cli_t *cli, const char **arg)
{
    const fh_cli_command_t *command = cli->command;
    struct option longopts[FH_CLI_MAX_OPTIONS + 3];
    char shortopts[2 * FH_CLI_MAX_OPTIONS + 8] = ":h"; /* ':': errors are ours */
    size_t n = 0, s = strlen (shortopts);
    for (const fh_cli_option_t *o = command->options; o && o->name; o++) {
        if (o->id == FH_CLI_HEADING)
            continue;
        assert (n < FH_CLI_MAX_OPTIONS);
        assert (o->id > 0 && o->id != 'h' && o->id != '?' && o->id != ':');
        longopts[n++]
            = (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->id};
        if (o->id < FH_CLI_LONG_ONLY) {
            shortopts[s++] = (char) o->id;
            if (o->arg)
                shortopts[s++] = ':';
        }
    }
    shortopts[s] = '\0';
    longopts[n++] = (struct option){"help", no_argument, NULL, FH_CLI_HELP};
    longopts[n++] = (struct option){"version", no_argument, NULL, FH_CLI_VERSION};
    longopts[n] = (struct option){NULL, 0, NULL, 0};

    *arg = NULL;
    opterr = 0;
    int c = getopt_long (cli->argc, cli->argv, shortopts, longopts, NULL);
    cli->next = optind;
    char typed[128];
    switch (c) {
    case -1: return 0;
    case 'h':
    case FH_CLI_HELP:
        s_usage (command, stdout);
        cli->status = FH_EXIT_OK;
        return -1;
    case FH_CLI_VERSION:
        fh_cli_version ();
        cli->status = FH_EXIT_OK;
        return -1;
    case ':':
        s_refused (cli, typed, sizeof typed);
        cli->status = fh_cli_usage_error (command, "option '%s' needs a value", typed);
        return -1;
    case '?':
        s_refused (cli, typed, sizeof typed);
        /* A known long flag given "=value" comes here with its id. */
        if (optopt && strncmp (typed, "--", 2) == 0)
            cli->status = fh_cli_usage_error (command, "option '%s' takes no value", typed);
        else
            cli->status = fh_cli_usage_error (command, "unknown option '%s'", typed);
        return -1;
    case FH_CLI_CURVE_KEY: cli->curve_key = optarg; return fh_cli_next (cli, arg);
    case FH_CLI_SERVER_KEY: cli->server_key = optarg; return fh_cli_next (cli, arg);
    case 'c':
    case 'e':
        if (s_by_id (command, c)->help == fh_cli_control_config_help) {
            cli->config = optarg;
            return fh_cli_next (cli, arg);
        }
        if (s_by_id (command, c)->help == fh_cli_control_endpoint_help) {
            cli->endpoint = optarg;
            return fh_cli_next (cli, arg);
        }
        *arg = optarg;
        return c;
    default:
        *arg = optarg;
        /* A typed option's value is stored now (cli->values). */
        return optarg && !fh_cli_store (cli, c, NULL, optarg) ? -1 : c;
    }
}

int
fh_cli_status (const fh_cli_t *cli)
{
    return cli->status;
}

/* Writes text with every line indented by `indent` spaces, the first line
   excepted, and a newline at the end. */
static void
s_indented (FILE *out, const char *text, int indent)
{
    for (const char *line = text; *line;) {
        size_t len = strcspn (line, "\n");
        if (line != text)
            fprintf (out, "%*s", indent, "");
        fprintf (out, "%.*s\n", (int) len, line);
        line += len + (line[len] == '\n');
    }
}

static void
s_option_line (FILE *out, const fh_cli_option_t *o, int column)
{
    char left[160];
    int len;
    if (o->id > 0 && o->id < FH_CLI_LONG_ONLY)
        len = snprintf (left, sizeof left, "  -%c, --%s%s%s", o->id, o->name, o->arg ? " " : "",
                        o->arg ? o->arg : "");
    else
        len = snprintf (left, sizeof left, "      --%s%s%s", o->name, o->arg ? " " : "",
                        o->arg ? o->arg : "");
    fputs (left, out);
    if (len + 2 > column)
        fprintf (out, "\n%*s", column, "");
    else
        fprintf (out, "%*s", column - len, "");
    s_indented (out, o->help, column);
}

static void
s_usage (const fh_cli_command_t *command, FILE *out)
{
    /* The help column: past the longest option, and at least the usual. */
    int column = FH_CLI_HELP_COLUMN;
    for (const fh_cli_option_t *o = command->options; o && o->name; o++) {
        if (o->id == FH_CLI_HEADING)
            continue;
        int len = 8 + (int) strlen (o->name) + (o->arg ? 1 + (int) strlen (o->arg) : 0);
        if (len + 2 > column && len + 2 <= 32)
            column = len + 2;
    }
    const char *form = command->synopsis;
    for (bool first = true; first || *form; first = false) {
        size_t len = strcspn (form, "\n");
        fprintf (out, "%s fanhub %s%s%.*s\n", first ? "usage:" : "      ", command->name,
                 len ? " " : "", (int) len, form);
        form += len + (form[len] == '\n');
    }
    fprintf (out, "\n%s\n\n", command->about);
    for (const fh_cli_option_t *o = command->options; o && o->name; o++) {
        if (o->id != FH_CLI_HEADING)
            s_option_line (out, o, column);
        else
            fprintf (out, "%s%s\n", o == command->options ? "" : "\n", o->help);
    }
    s_option_line (out, &s_help, column);
    s_option_line (out, &s_version, column);
    if (command->after)
        fprintf (out, "\n%s\n", command->after);
}

int
fh_cli_usage_error (const fh_cli_command_t *command, const char *fmt, ...)
{
    va_list args;
    va_start (args, fmt);
    fprintf (stderr, "fanhub %s: ", command->name);
    vfprintf (stderr, fmt, args);
    fprintf (stderr, "\ntry 'fanhub %s --help'\n", command->name);
    va_end (args);
    return FH_EXIT_USAGE;
}

void
fh_cli_version (void)
{
    printf ("fanhub %s (plugin ABI %d.%d)\n", FANHUB_VERSION, FANHUB_ABI_MAJOR, FANHUB_ABI_MINOR);
}

fh_config_t *
fh_cli_load_config (const char *path, char *err, size_t errlen)
{
    if (path)
        return fh_config_load_file (path, err, errlen);
    return fh_config_load_string (fh_config_default_yaml, fh_config_default_yaml_len, "<default>",
                                  err, errlen);
}

int
fh_cli_bus_peer (const char *path, char *out, size_t size, bool *bind, char *err, size_t errlen)
{
    fh_config_t *config = fh_cli_load_config (path, err, errlen);
    if (!config)
        return -1;
    int rc = 0;
    *bind = config->connect.count > 0;
    if (*bind)
        snprintf (out, size, "%s", config->connect.items[0]);
    else if (config->bind.count > 0) {
        /* A peer on this machine reaches a wildcard bind on loopback. */
        static const char *const wild[][2] = {{"tcp://*:", "tcp://127.0.0.1:"},
                                              {"tcp://0.0.0.0:", "tcp://127.0.0.1:"},
                                              {"tcp://[::]:", "tcp://[::1]:"}};
        const char *endpoint = config->bind.items[0];
        snprintf (out, size, "%s", endpoint);
        for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++)
            if (strncmp (endpoint, wild[i][0], strlen (wild[i][0])) == 0)
                snprintf (out, size, "%s%s", wild[i][1], endpoint + strlen (wild[i][0]));
    }
    else {
        snprintf (err, errlen, "%s: the hub has no bus.connect or bus.bind endpoint to meet", path);
        rc = -1;
    }
    fh_config_destroy (&config);
    return rc;
}

static const char *
s_control_endpoint (const fh_cli_command_t *command, const char *path, const char *endpoint,
                    bool broken_file_ok, fh_config_t **config)
{
    *config = NULL;
    if (path && endpoint) {
        fh_cli_usage_error (command, "give -c or -e, not both");
        return NULL;
    }
    if (endpoint) {
        const char *why = fh_config_control_check (endpoint);
        if (!why)
            return endpoint;
        fh_cli_usage_error (command, "-e %s: %s", endpoint, why);
        return NULL;
    }
    char err[2048];
    bool control_only = false;
    /* A file being edited must not cut the hub off from its operator and
       its monitoring: reload then tells the hub, which refuses the file
       and opens its log files again (logrotate's reload). */
    if (path && broken_file_ok)
        *config = fh_config_load_for_control (path, &control_only, err, sizeof err);
    else
        *config = fh_cli_load_config (path, err, sizeof err);
    if (!*config || control_only)
        fprintf (stderr, "fanhub %s: %s\n", command->name, err);
    if (control_only)
        fprintf (stderr,
                 "fanhub %s: asking the hub at %s, the file's control endpoint, all the "
                 "same (nothing else is read from the file)\n",
                 command->name, (*config)->control);
    /* A port '*' is the hub's to choose: the file cannot say which. */
    const char *why = *config ? fh_config_control_check ((*config)->control) : NULL;
    if (why) {
        fprintf (stderr, "fanhub %s: %s: control %s: %s\n", command->name, (*config)->source,
                 (*config)->control, why);
        fh_config_destroy (config);
        return NULL;
    }
    return *config ? (*config)->control : NULL;
}

/* --server-key: the key itself, or a zcert file that holds it (the
   public file, or the secret one). */
static int
s_server_key (const char *arg, char key[FANHUB_CURVE_KEY_TEXT], char *err, size_t errlen)
{
    if (fanhub_curve_key_valid (arg)) {
        snprintf (key, FANHUB_CURVE_KEY_TEXT, "%s", arg);
        return 0;
    }
    zconfig_t *root = zsys_file_exists (arg) ? zconfig_load (arg) : NULL;
    const char *text = root ? zconfig_get (root, "curve/public-key", NULL) : NULL;
    int rc = fanhub_curve_key_valid (text) ? 0 : -1;
    if (rc == 0)
        snprintf (key, FANHUB_CURVE_KEY_TEXT, "%s", text);
    else
        snprintf (err, errlen,
                  "--server-key %s: neither 40 characters of Z85 nor a zcert "
                  "file with a curve public-key",
                  arg);
    zconfig_destroy (&root);
    return rc;
}

int
fh_cli_curve_keys (const fh_cli_t *cli, fh_control_keys_t *keys, bool *on, char *err, size_t errlen)
{
    memset (keys, 0, sizeof *keys);
    *on = cli->curve_key || cli->server_key;
    if (!*on)
        return 0;
    if (!cli->curve_key || !cli->server_key) {
        snprintf (err, errlen,
                  "%s without %s: a CURVE client needs both (its own key pair "
                  "and the server's public key)",
                  cli->curve_key ? "--curve-key" : "--server-key",
                  cli->curve_key ? "--server-key" : "--curve-key");
        return -1;
    }
    if (fanhub_curve_load_secret (cli->curve_key, keys->public_key, keys->secret_key, err, errlen)
            != 0
        || s_server_key (cli->server_key, keys->server_key, err, errlen) != 0) {
        memset (keys->secret_key, 0, sizeof keys->secret_key);
        return -1;
    }
    return 0;
}

int
fh_cli_control_keys (const fh_cli_t *cli, const fh_config_t *config, const char *endpoint)
{
    bool configured = config && config->control_curve.secret_key_file;
    fh_control_keys_t keys;
    memset (&keys, 0, sizeof keys);
    char err[1024] = "";
    bool client = false, server = false;
    if (cli->curve_key) {
        char public_key[FANHUB_CURVE_KEY_TEXT];
        if (fanhub_curve_load_secret (cli->curve_key, public_key, keys.secret_key, err, sizeof err)
            == 0) {
            snprintf (keys.public_key, sizeof keys.public_key, "%s", public_key);
            client = true;
        }
    }
    else if (configured && config->control_curve.client_key_file) {
        snprintf (keys.public_key, sizeof keys.public_key, "%s",
                  config->control_curve.client_public_key);
        snprintf (keys.secret_key, sizeof keys.secret_key, "%s",
                  config->control_curve.client_secret_key);
        client = true;
    }
    if (!err[0] && cli->server_key)
        server = s_server_key (cli->server_key, keys.server_key, err, sizeof err) == 0;
    else if (!err[0] && configured) {
        snprintf (keys.server_key, sizeof keys.server_key, "%s", config->control_curve.public_key);
        server = true;
    }
    if (!err[0] && (client || server) && strncmp (endpoint, "tcp://", 6) != 0)
        snprintf (err, sizeof err, "CURVE keys are for a tcp:// control endpoint, not %s",
                  endpoint);
    else if (!err[0] && server && !client && !cli->server_key)
        snprintf (err, sizeof err,
                  "%s has control_curve: give --curve-key FILE (a key pair "
                  "the hub allows), or set control_curve.client_key_file",
                  config->source);
    else if (!err[0] && client != server)
        snprintf (err, sizeof err,
                  "%s without %s: a CURVE client needs both (its own key "
                  "pair and the hub's control public key)",
                  client ? "--curve-key" : "--server-key", client ? "--server-key" : "--curve-key");
    if (!err[0] && client)
        fh_control_client_use_keys (&keys);
    memset (keys.secret_key, 0, sizeof keys.secret_key);
    if (err[0]) {
        fprintf (stderr, "fanhub %s: %s\n", cli->command->name, err);
        return FH_EXIT_USAGE;
    }
    return FH_EXIT_OK;
}

const char *
fh_cli_control_open (const fh_cli_t *cli, bool broken_file_ok, fh_config_t **config, int *status)
{
    *status = FH_EXIT_USAGE;
    const char *endpoint
        = s_control_endpoint (cli->command, cli->config, cli->endpoint, broken_file_ok, config);
    if (!endpoint)
        return NULL;
    *status = fh_cli_control_keys (cli, *config, endpoint);
    if (*status == FH_EXIT_OK)
        return endpoint;
    fh_config_destroy (config);
    return NULL;
}

const char *
fh_cli_host_name (const char *given, char *buf, size_t size)
{
    if (given && *given)
        return given;
    if (gethostname (buf, size) != 0)
        snprintf (buf, size, "localhost");
    buf[size - 1] = '\0';
    return buf;
}

static volatile sig_atomic_t s_stopped;

static void
s_on_stop_signal (int signum)
{
    (void) signum;
    s_stopped = 1;
}

void
fh_cli_stop_on_signals (fh_cli_signals_t *saved, int flags)
{
    struct sigaction action = {.sa_handler = s_on_stop_signal, .sa_flags = flags};
    sigemptyset (&action.sa_mask);
    s_stopped = 0;
    sigaction (SIGINT, &action, saved ? &saved->interrupt : NULL);
    sigaction (SIGTERM, &action, saved ? &saved->terminate : NULL);
}

void
fh_cli_signals_restore (const fh_cli_signals_t *saved)
{
    sigaction (SIGINT, &saved->interrupt, NULL);
    sigaction (SIGTERM, &saved->terminate, NULL);
}

bool
fh_cli_stopped (void)
{
    return s_stopped;
}
