/*  cli - what the subcommands share: one option layer, and loading the
    configuration.

    The option layer is git's parse-options in small: a command describes
    itself once, in an fh_cli_command_t (synopsis, text, a table of
    options), and that one table yields the parsing, the error messages and
    the --help text, so every command speaks the same way:

        fanhub CMD: unknown option '--x'
        fanhub CMD: option '--config' needs a value
        try 'fanhub CMD --help'                      (exit status 2)

    -h/--help (the usage on stdout, exit 0) and --version come with every
    command without being listed. A command reads its options with a loop:

        static const fh_cli_option_t s_options[] = {
            {'c', "config", "FILE", "the YAML configuration"},
            {OPT_PLUGIN_DIR, "plugin-dir", "DIR", "where plugins are found"},
            {0},
        };
        static const fh_cli_command_t s_command = {
            "check", "[-c FILE] [--plugin-dir DIR]", "What it does.", s_options,
            "Exit status: ...",
        };
        fh_cli_t cli;
        fh_cli_begin (&cli, &s_command, argc, argv);
        int id;
        const char *arg;
        while ((id = fh_cli_next (&cli, &arg)) > 0)
            switch (id) { case 'c': path = arg; break; ... }
        if (id < 0)
            return fh_cli_status (&cli);  (help shown: 0; usage error: 2)
        ... the operands are argv[cli.next] to argv[argc - 1] ...
*/
#ifndef FH_CLI_H_INCLUDED
#define FH_CLI_H_INCLUDED

#include "config.h"
#include "control_curve.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

/* One option. id is what fh_cli_next returns for it: the short letter
   when there is one (then -X works too), else any value from
   FH_CLI_LONG_ONLY up. arg names the value ("FILE") or is NULL for a
   flag. help may hold several lines ('\n'); the layer indents them. */
typedef struct {
    int id;
    const char *name; /* the long name, without "--" */
    const char *arg;
    const char *help;
} fh_cli_option_t;

/* What the layer makes of an option's value before the command sees it:
   read in util/value.c's grammar, checked against min and max, and stored
   at the command's target (fh_cli_t.target) plus offset. A bad value is a
   usage error worded as the configuration words one:
   "fanhub pub: --count: expected an integer of at least 0, got '-1'". */
typedef enum {
    FH_CLI_INT = 1, /* int: an integer */
    FH_CLI_U64,     /* uint64_t: an integer, min >= 0 */
    FH_CLI_SIZE,    /* size_t: bytes, "4096" or "64KiB" */
    FH_CLI_SECONDS, /* double: seconds, "2s", "250ms", "1m"; bare: s */
    FH_CLI_MILLIS,  /* int: milliseconds, "250ms", "2s"; bare: ms */
    FH_CLI_NUMBER,  /* double: a decimal number, "0.5", "1e3" */
} fh_cli_type_t;

/* The typed options of a command, beside its option table (one row an
   option id; ended by a row with id 0): fh_cli_t.values. max INFINITY:
   no maximum. An option not listed is handed back as its text. */
typedef struct {
    int id;
    fh_cli_type_t type;
    size_t offset;
    double min, max;
} fh_cli_value_t;

#define FH_CLI_LONG_ONLY 256 /* ids of options without a short letter */
/* An entry {FH_CLI_HEADING, "", NULL, "Title:"} is no option: it starts
   a group of options in the --help text, after a blank line. */
#define FH_CLI_HEADING 0

typedef struct {
    const char *name;               /* "check", as typed after "fanhub" */
    const char *synopsis;           /* what follows "usage: fanhub NAME "; lines
                             after a '\n' are further forms, each with
                             "fanhub NAME " put in front */
    const char *about;              /* paragraphs before the options */
    const fh_cli_option_t *options; /* ends with an entry whose name is NULL */
    const char *after;              /* paragraphs after the options, or NULL */
} fh_cli_command_t;

typedef struct {
    const fh_cli_command_t *command;
    int argc;
    char **argv;
    int next;                           /* after the loop: argv[next] is the first operand */
    int status;                         /* after a negative fh_cli_next: what the command returns */
    const char *curve_key, *server_key; /* FH_CLI_CURVE_OPTIONS, or NULL */
    const char *config, *endpoint;      /* FH_CLI_CONTROL_OPTIONS, or NULL */
    /* Set after fh_cli_begin: the typed options and where they go. */
    const fh_cli_value_t *values;
    void *target;
} fh_cli_t;

/* The CURVE options of the commands that talk to a hub's control socket
   (stats, emit, reload, dead-letter, collectd): put FH_CLI_CURVE_OPTIONS
   in the option table; fh_cli_next keeps their values in the fh_cli_t
   (the command sees no id of theirs), and fh_cli_control_keys, once the
   endpoint is known, makes them this process's control client keys. */
enum { FH_CLI_CURVE_KEY = FH_CLI_LONG_ONLY + 200, FH_CLI_SERVER_KEY };
#define FH_CLI_CURVE_OPTIONS                                                                       \
    {FH_CLI_CURVE_KEY, "curve-key", "FILE",                                                        \
     "for a tcp:// endpoint with control_curve: this\n"                                            \
     "client's key pair (a zcert secret file, mode\n"                                              \
     "0600; default: the -c config's client_key_file)"},                                           \
    {                                                                                              \
        FH_CLI_SERVER_KEY, "server-key", "KEY|FILE",                                               \
            "the hub's control public key: 40 characters of\n"                                     \
            "Z85 or a zcert file (default: the -c config's)"                                       \
    }

void fh_cli_begin (fh_cli_t *cli, const fh_cli_command_t *command, int argc, char **argv);
/* The same, with the command's typed options: their table and the struct
   (or variable) their offsets are in. */
void fh_cli_begin_typed (fh_cli_t *cli, const fh_cli_command_t *command, int argc, char **argv,
                         const fh_cli_value_t *values, void *target);
/* The next option's id, with its value in *arg (NULL for a flag; a
   typed option's is stored already, and *arg is its text); 0 at the
   end of the options; -1 when the command is to return fh_cli_status:
   after --help or --version (printed, status 0) or a usage error (said on
   stderr, status 2). Options may follow operands; "--" ends them. */
int fh_cli_next (fh_cli_t *cli, const char **arg);
int fh_cli_status (const fh_cli_t *cli);
/* A typed option's value that came from elsewhere (an environment
   variable, as collectd's COLLECTD_INTERVAL stands for --interval): text
   read as fh_cli_next reads option id's, stored at cli->target; false
   after the usage error, worded with where in place of "--name"
   ("fanhub collectd: COLLECTD_INTERVAL: expected seconds from ..."),
   with cli->status set. where NULL: the option's own "--name". */
bool fh_cli_store (fh_cli_t *cli, int id, const char *where, const char *text);

/* "fanhub NAME: WHAT", then "try 'fanhub NAME --help'", on stderr;
   returns 2, the exit status of bad usage. */
int fh_cli_usage_error (const fh_cli_command_t *command, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
/* "fanhub 0.1.0 (plugin ABI 1.1)" on stdout. */
void fh_cli_version (void);

/* Sets this process's control client keys (control_curve.h) from
   --curve-key and --server-key, else from config's control_curve (config
   may be NULL: -e). Nothing when neither gives any. FH_EXIT_OK, or
   FH_EXIT_USAGE with the reason said on stderr (half a pair, a key file
   refused, keys for an ipc:// endpoint). */
int fh_cli_control_keys (const fh_cli_t *cli, const fh_config_t *config, const char *endpoint);

/* --curve-key and --server-key alone, as the keys of a CURVE client of
   the bus (fanhub tail): 0 with *on false when neither was given, 0 with
   *on true and keys set when both were, else -1 with the reason in err. */
int fh_cli_curve_keys (const fh_cli_t *cli, fh_control_keys_t *keys, bool *on, char *err,
                       size_t errlen);

/* Where a publisher meets the hub configured at path (`pub -c FILE`):
   the hub's first bus.connect endpoint, for the publisher to bind
   (*bind true), else its first bus.bind endpoint, to connect to, with a
   wildcard host made loopback (tcp://\*:P and tcp://0.0.0.0:P as
   tcp://127.0.0.1:P, tcp://[::]:P as tcp://[::1]:P). Into out; 0, or -1
   with the reason in err (the file does not load, or names bus.amqp
   only). */
int fh_cli_bus_peer (const char *path, char *out, size_t size, bool *bind, char *err,
                     size_t errlen);

/* Loads path, or the embedded default when path is NULL. */
fh_config_t *fh_cli_load_config (const char *path, char *err, size_t errlen);

/* SIGINT and SIGTERM only set the flag fh_cli_stopped reads, without
   SA_RESTART so that a blocking call (zmq_poll, getline, a sleep) returns
   and the command's loop sees it; flags adds to sa_flags (SA_RESETHAND:
   a second signal ends the process at once). The dispositions before go
   to saved (NULL: not kept) for fh_cli_signals_restore. */
typedef struct {
    struct sigaction interrupt, terminate;
} fh_cli_signals_t;
void fh_cli_stop_on_signals (fh_cli_signals_t *saved, int flags);
void fh_cli_signals_restore (const fh_cli_signals_t *saved);
bool fh_cli_stopped (void);

/* The -c/-e pair of the commands that talk to a hub's control socket:
   put FH_CLI_CONTROL_OPTIONS in the option table; fh_cli_next keeps
   their values in the fh_cli_t (the command sees no id of theirs) for
   fh_cli_control_open. */
extern const char fh_cli_control_config_help[], fh_cli_control_endpoint_help[];
#define FH_CLI_CONTROL_OPTIONS                                                                     \
    {'c', "config", "FILE", fh_cli_control_config_help},                                           \
    {                                                                                              \
        'e', "endpoint", "EP", fh_cli_control_endpoint_help                                        \
    }

/* The control endpoint of the hub a command talks to (`-c FILE | -e
   ENDPOINT`, as fh_cli_next kept them), with this process's control client keys set from it
   (fh_cli_control_keys): endpoint as given, else the control: of the
   configuration at path (the built-in one when path is NULL). *config
   gets what was loaded (NULL with -e), to destroy once the endpoint is no
   longer used. NULL after saying why on stderr (-c with -e, a
   configuration that does not load, keys refused), with *status the
   exit status to return. With broken_file_ok, a file that does not load
   still gives its control endpoint (fh_config_load_for_control), said
   on stderr: for the commands that only read, and reload, which the hub
   then refuses; not emit, which does not send a message on a guess. */
const char *fh_cli_control_open (const fh_cli_t *cli, bool broken_file_ok, fh_config_t **config,
                                 int *status);

/* The host name of collectd values: given when not NULL or empty, else
   this host's name (in buf), else "localhost". */
const char *fh_cli_host_name (const char *given, char *buf, size_t size);

#endif
