/*  cmd_tail - `fanhub tail`: watch the bus, one line per message.

    The fedmsg-tail of this project. It subscribes with the literal prefix
    of each pattern, which is all ZeroMQ can filter on, and then applies
    the patterns themselves with the hub's own matcher (fh_pattern_match),
    so `tail PATTERN` shows exactly what a consumer with that pattern
    would get.

    Output is line-oriented whatever the bus carries: a body that would
    break the line or the terminal is escaped, one that is not text is
    shown as base64 (the rules are in the --help text). Output is flushed
    per message on a terminal; into a pipe or a file it is buffered, but
    never held back for more than about 100 ms.
*/
#include "cli.h"
#include "commands.h"

#include "clock.h"
#include "config.h"
#include "fedmsg.h"
#include "trigger.h"

#include <errno.h>
#include <fanhub/sdk.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define S_DEFAULT_ENDPOINT "tcp://127.0.0.1:9940"
/* Buffered output is flushed when its oldest line is this old. */
#define S_FLUSH_NS (100 * 1000000LL)
/* Upper bound of one poll, so a signal that lands just before zmq_poll
   is noticed soon. */
#define S_POLL_MAX_MS 250

typedef struct {
    const char **connect;
    size_t connect_count;
    const char **bind;
    size_t bind_count;
    char **patterns;
    size_t pattern_count;
    uint64_t count; /* 0 = no limit */
    int rcvhwm;
    bool json;
    bool terse;  /* time, topic, msg_id */
    bool plain;  /* one line a message even on a terminal */
    bool pretty; /* a terminal without --json, --terse or --plain */
    const char **exclude;
    size_t exclude_count;
    bool curve; /* keys: a CURVE client of the publishers */
    fh_control_keys_t keys;
    fh_config_t *config; /* --config: owns the endpoints taken from it */
} s_opts_t;

enum {
    S_OPT_JSON = FH_CLI_LONG_ONLY,
    S_OPT_RCVHWM,
    S_OPT_TERSE,
    S_OPT_PLAIN,
    S_OPT_EXCLUDE,
    S_OPT_CONNECT
};

static const fh_cli_option_t s_options[] = {
    {'c', "config", "FILE",
     "watch the bus of the hub configured in FILE:\n"
     "connect to its bus.connect endpoints"},
    {S_OPT_CONNECT, "connect", "EP",
     "connect to EP (repeatable); the default is\n"
     "--connect " S_DEFAULT_ENDPOINT ", where\n"
     "`fanhub pub` binds by default"},
    {'b', "bind", "EP", "bind EP and let publishers connect (repeatable)"},
    {'n', "count", "N", "exit after N messages (0 = no limit, the default)"},
    {S_OPT_JSON, "json", NULL, "print JSON objects instead (see below)"},
    {S_OPT_TERSE, "terse", NULL,
     "one short line a message: the time it came (UTC),\n"
     "its topic and its msg_id ('-' when it has none)"},
    {S_OPT_PLAIN, "plain", NULL,
     "one line a message on a terminal too (there the\n"
     "default is the topic, then a JSON body indented)"},
    {S_OPT_EXCLUDE, "exclude", "PATTERN",
     "leave out messages whose topic matches PATTERN\n"
     "(repeatable; patterns as below)"},
    {S_OPT_RCVHWM, "rcvhwm", "N",
     "receive high-water mark; 0 = no limit, never drop\n"
     "(the default)"},
    {FH_CLI_CURVE_KEY, "curve-key", "FILE",
     "connect as a CURVE client with this key pair (a\n"
     "zcert secret file, mode 0600), e.g. to a hub's\n"
     "bus.publish or a relay with curve"},
    {FH_CLI_SERVER_KEY, "server-key", "KEY|FILE",
     "the publisher's public key (40 characters of Z85\n"
     "or a zcert file); with --curve-key"},
    {0, NULL, NULL, NULL},
};

/* The numbers, stored by the option layer (cli.h). */
static const fh_cli_value_t s_values[] = {
    {'n', FH_CLI_U64, offsetof (s_opts_t, count), 0, INFINITY},
    {S_OPT_RCVHWM, FH_CLI_INT, offsetof (s_opts_t, rcvhwm), 0, INT32_MAX},
    {0, 0, 0, 0, 0},
};

static const fh_cli_command_t s_command = {
    "tail",
    "[-c FILE | --connect EP... | -b EP...] [OPTIONS] [PATTERN...]",
    "Watch the bus: print each message whose topic matches one of the\n"
    "patterns (every message when none is given), one line per message.",
    s_options,
    "Patterns, as in the hub's configuration:\n"
    "  org.fedoraproject.    a prefix of the topic (\"\" is every topic)\n"
    "  *.buildsys.*          '*' matches any run of characters, dots too\n"
    "  =org.x.y              exactly this topic\n"
    "\n"
    "On a terminal, without --json, --terse or --plain, each message is its\n"
    "topic on a line, then its body: a JSON body indented with sorted keys,\n"
    "any other as below. Otherwise each line is TOPIC, a space and BODY. A body (or topic) that is "
    "valid\n"
    "UTF-8 is printed as it is, except that control characters are\n"
    "escaped so a message stays on one line and cannot drive the\n"
    "terminal: \\n, \\r, and \\xHH for the others (tab is kept). A body\n"
    "that is not valid UTF-8 is printed as 'base64:' and its base64.\n"
    "Escaping is for reading only; --json is exact. A message without a\n"
    "body frame prints its topic alone; frames after the body are not\n"
    "shown.\n"
    "\n"
    "With --json each line is one JSON object:\n"
    "  {\"topic\":\"...\",\"body\":BODY}  the body, copied byte for byte, when\n"
    "                            it is one JSON document on one line (the\n"
    "                            fedmsg case: `jq .body.msg` works)\n"
    "  {\"topic\":\"...\",\"body_text\":\"...\"}    other UTF-8 text, as a string\n"
    "  {\"topic\":\"...\",\"body_base64\":\"...\"}  anything else\n"
    "A topic that is not UTF-8 comes as \"topic_base64\".\n"
    "\n"
    "With -c FILE, tail connects where the hub of FILE connects (its\n"
    "bus.connect publishers); a hub's bus.bind endpoints are where its\n"
    "publishers connect to it, which tail cannot see (it says so).\n"
    "\n"
    "Output is flushed per message on a terminal, else at least every\n"
    "100 ms. SIGINT and SIGTERM end it with exit status 0. Exit status\n"
    "1: runtime failure; 2: bad usage.\n"
    "\n"
    "Examples:\n"
    "  fanhub tail\n"
    "  fanhub tail --connect tcp://hub.example.org:9940 'org.fedoraproject.*.buildsys.*'\n"
    "  fanhub tail -c /etc/fanhub/fanhub.yaml\n"
    "  fanhub tail --json -n 10 =org.fanhub.demo.message | jq .body\n"
    "  fanhub tail --terse --exclude '*.heartbeat' org.fedoraproject.",
};

/* --config FILE: the hub's bus.connect endpoints, whose publishers tail
   connects to as the hub does. Returns -1 when the work is to go on,
   else the exit status. */
static int
s_from_config (s_opts_t *opts, const char *path)
{
    if (opts->connect_count + opts->bind_count > 0)
        return fh_cli_usage_error (&s_command, "give -c FILE or --connect/--bind, not both");
    char err[2048];
    opts->config = fh_cli_load_config (path, err, sizeof err);
    if (!opts->config) {
        fprintf (stderr, "fanhub tail: %s\n", err);
        return FH_EXIT_USAGE;
    }
    const fh_strlist_t *connect = &opts->config->connect, *bind = &opts->config->bind;
    for (size_t i = 0; i < bind->count; i++)
        fprintf (stderr,
                 "fanhub tail: %s: the hub binds %s: its publishers connect to the "
                 "hub, where tail cannot see them%s\n",
                 path, bind->items[i], connect->count ? "" : "; give --connect or --bind");
    if (connect->count == 0)
        return FH_EXIT_USAGE;
    const char **grown = realloc (opts->connect, connect->count * sizeof *grown);
    if (!grown) {
        fprintf (stderr, "fanhub tail: out of memory\n");
        return FH_EXIT_FAILURE;
    }
    opts->connect = grown;
    for (size_t i = 0; i < connect->count; i++)
        opts->connect[opts->connect_count++] = connect->items[i];
    /* bus.curve: the hub's own client keys, unless --curve-key gave some. */
    const fh_config_t *config = opts->config;
    if (!opts->curve && config->curve.secret_key_file && config->curve.server_public_key) {
        snprintf (opts->keys.public_key, sizeof opts->keys.public_key, "%s",
                  config->curve.public_key);
        snprintf (opts->keys.secret_key, sizeof opts->keys.secret_key, "%s",
                  config->curve.secret_key);
        snprintf (opts->keys.server_key, sizeof opts->keys.server_key, "%s",
                  config->curve.server_public_key);
        opts->curve = true;
    }
    return -1;
}

/* Parses the command line into opts (whose lists the caller frees).
   Returns -1 when the work is to go on, else the exit status. */
static int
s_parse (int argc, char **argv, s_opts_t *opts)
{
    opts->connect = calloc ((size_t) argc + 1, sizeof *opts->connect);
    opts->bind = calloc ((size_t) argc + 1, sizeof *opts->bind);
    opts->exclude = calloc ((size_t) argc + 1, sizeof *opts->exclude);
    if (!opts->connect || !opts->bind || !opts->exclude) {
        fprintf (stderr, "fanhub tail: out of memory\n");
        return FH_EXIT_FAILURE;
    }
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, opts);
    int c;
    const char *arg;
    const char *config_path = NULL;
    while ((c = fh_cli_next (&cli, &arg)) > 0) {
        switch (c) {
        case 'c': config_path = arg; break;
        case S_OPT_CONNECT:
        case 'b': {
            bool for_bind = c == 'b';
            const char *why = fh_endpoint_check (arg, for_bind);
            if (why)
                return fh_cli_usage_error (&s_command, "%s '%s': %s",
                                           for_bind ? "--bind" : "--connect", arg, why);
            if (for_bind)
                opts->bind[opts->bind_count++] = arg;
            else
                opts->connect[opts->connect_count++] = arg;
            break;
        }
        case S_OPT_JSON: opts->json = true; break;
        case S_OPT_TERSE: opts->terse = true; break;
        case S_OPT_PLAIN: opts->plain = true; break;
        case S_OPT_EXCLUDE: opts->exclude[opts->exclude_count++] = arg; break;
        }
    }
    if (c < 0)
        return fh_cli_status (&cli);
    if (opts->json + opts->terse + opts->plain > 1)
        return fh_cli_usage_error (&s_command, "%s", "give one of --json, --terse and --plain");
    opts->pretty = !opts->json && !opts->terse && !opts->plain && isatty (STDOUT_FILENO);
    char why[1024];
    if (fh_cli_curve_keys (&cli, &opts->keys, &opts->curve, why, sizeof why) != 0)
        return fh_cli_usage_error (&s_command, "%s", why);
    if (opts->curve && opts->bind_count)
        return fh_cli_usage_error (&s_command,
                                   "--curve-key is for --connect: a CURVE "
                                   "server needs the keys it allows, which tail does not take");
    opts->patterns = argv + cli.next;
    opts->pattern_count = (size_t) (argc - cli.next);
    if (config_path)
        return s_from_config (opts, config_path);
    if (opts->connect_count + opts->bind_count == 0)
        opts->connect[opts->connect_count++] = S_DEFAULT_ENDPOINT;
    return -1;
}

/* The literal prefix of a pattern: what ZeroMQ can filter on. The text
   before the first '*', or the whole of an exact pattern without its '='. */
static size_t
s_literal_prefix (const char *pattern, const char **start)
{
    if (pattern[0] == '=') {
        *start = pattern + 1;
        return strlen (pattern + 1);
    }
    *start = pattern;
    return strcspn (pattern, "*");
}

/* Subscribes to the prefixes that cover every pattern: "" alone when any
   pattern needs everything, else each prefix that no shorter one covers
   (ZeroMQ would deliver a message once anyway; this keeps the
   subscription list short). */
static int
s_subscribe (void *sock, const s_opts_t *opts)
{
    if (opts->pattern_count == 0)
        return zmq_setsockopt (sock, ZMQ_SUBSCRIBE, "", 0);
    for (size_t i = 0; i < opts->pattern_count; i++) {
        const char *mine;
        size_t mine_len = s_literal_prefix (opts->patterns[i], &mine);
        bool covered = false;
        for (size_t j = 0; j < opts->pattern_count && !covered; j++) {
            const char *other;
            size_t other_len = s_literal_prefix (opts->patterns[j], &other);
            /* Covered by a strictly shorter prefix, or by an equal one
               that comes first. */
            if (other_len <= mine_len && memcmp (other, mine, other_len) == 0
                && (other_len < mine_len || j < i))
                covered = true;
        }
        if (!covered && zmq_setsockopt (sock, ZMQ_SUBSCRIBE, mine, mine_len) < 0)
            return -1;
    }
    return 0;
}

static bool
s_matches (const s_opts_t *opts, const void *topic, size_t size)
{
    for (size_t i = 0; i < opts->exclude_count; i++)
        if (fh_pattern_match (opts->exclude[i], topic, size))
            return false;
    if (opts->pattern_count == 0)
        return true;
    for (size_t i = 0; i < opts->pattern_count; i++)
        if (fh_pattern_match (opts->patterns[i], topic, size))
            return true;
    return false;
}

static void
s_put_base64 (FILE *out, const uint8_t *data, size_t size)
{
    char text[1024]; /* 768 bytes a turn: whole groups until the last */
    for (size_t at = 0; at < size; at += 768) {
        size_t len = size - at < 768 ? size - at : 768;
        fwrite (text, 1, fanhub_base64_encode (text, data + at, len), out);
    }
}

/* Plain output of a topic or a body: see the --help text. */
static void
s_put_text (FILE *out, const uint8_t *data, size_t size)
{
    if (!fanhub_utf8_valid (data, size)) {
        fputs ("base64:", out);
        s_put_base64 (out, data, size);
        return;
    }
    const uint8_t *end = data + size;
    while (data < end) {
        const uint8_t *run = data;
        while (data < end && (*data >= 0x20 || *data == '\t') && *data != 0x7f)
            data++;
        fwrite (run, 1, (size_t) (data - run), out);
        if (data == end)
            break;
        if (*data == '\n')
            fputs ("\\n", out);
        else if (*data == '\r')
            fputs ("\\r", out);
        else
            fprintf (out, "\\x%02x", *data);
        data++;
    }
}

/* A JSON string of valid UTF-8 text; non-ASCII is kept as it is. */
static void
s_put_json_string (FILE *out, const uint8_t *data, size_t size)
{
    const uint8_t *end = data + size;
    char esc[6];
    size_t n = 0;
    fputc ('"', out);
    while (data < end) {
        const uint8_t *run = data;
        while (data < end && (n = fanhub_json_escape_byte (*data, esc)) == 0)
            data++;
        fwrite (run, 1, (size_t) (data - run), out);
        if (data == end)
            break;
        fwrite (esc, 1, n, out);
        data++;
    }
    fputc ('"', out);
}

/* True when the body can be embedded in the output line as it is: one
   JSON document, valid UTF-8 (jansson checks), no line break. */
static bool
s_is_json_line (const uint8_t *data, size_t size)
{
    if (size == 0 || memchr (data, '\n', size) || memchr (data, '\r', size))
        return false;
    json_error_t error;
    json_t *value
        = json_loadb ((const char *) data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (!value)
        return false;
    json_decref (value);
    return true;
}

/* --terse: "2026-11-28T03:09:01.123Z TOPIC MSG_ID". */
static void
s_print_terse (FILE *out, const uint8_t *tdata, size_t tsize, const uint8_t *bdata, size_t bsize)
{
    struct timespec now;
    clock_gettime (CLOCK_REALTIME, &now);
    char when[FANHUB_RFC3339_SIZE], id[FH_FEDMSG_ID_SIZE];
    fanhub_rfc3339 (when, (int64_t) now.tv_sec * 1000000000 + now.tv_nsec, 3);
    fprintf (out, "%s ", when);
    s_put_text (out, tdata, tsize);
    fputc (' ', out);
    if (bdata && fh_fedmsg_msg_id (bdata, bsize, id, sizeof id))
        s_put_text (out, (const uint8_t *) id, strlen (id));
    else
        fputc ('-', out);
    fputc ('\n', out);
}

/* A terminal's default: the topic, then the body, indented when JSON. */
static void
s_print_pretty (FILE *out, const uint8_t *tdata, size_t tsize, const uint8_t *bdata, size_t bsize)
{
    s_put_text (out, tdata, tsize);
    fputc ('\n', out);
    json_t *value
        = bdata ? json_loadb ((const char *) bdata, bsize, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL)
                : NULL;
    char *text = value ? json_dumps (value, JSON_INDENT (2) | JSON_SORT_KEYS | JSON_ENCODE_ANY)
                       : NULL;
    if (text)
        fputs (text, out);
    else if (bdata)
        s_put_text (out, bdata, bsize);
    fputs (bdata ? "\n\n" : "\n", out);
    free (text);
    json_decref (value);
}

static void
s_print (FILE *out, const s_opts_t *opts, zmq_msg_t *topic, zmq_msg_t *body, bool has_body)
{
    const uint8_t *tdata = zmq_msg_data (topic);
    size_t tsize = zmq_msg_size (topic);
    const uint8_t *bdata = has_body ? zmq_msg_data (body) : NULL;
    size_t bsize = has_body ? zmq_msg_size (body) : 0;
    if (opts->terse || opts->pretty) {
        (opts->terse ? s_print_terse : s_print_pretty) (out, tdata, tsize, bdata, bsize);
        return;
    }
    if (!opts->json) {
        s_put_text (out, tdata, tsize);
        if (has_body) {
            fputc (' ', out);
            s_put_text (out, bdata, bsize);
        }
        fputc ('\n', out);
        return;
    }
    if (fanhub_utf8_valid (tdata, tsize)) {
        fputs ("{\"topic\":", out);
        s_put_json_string (out, tdata, tsize);
    }
    else {
        fputs ("{\"topic_base64\":\"", out);
        s_put_base64 (out, tdata, tsize);
        fputc ('"', out);
    }
    if (has_body) {
        if (s_is_json_line (bdata, bsize)) {
            fputs (",\"body\":", out);
            fwrite (bdata, 1, bsize, out);
        }
        else if (fanhub_utf8_valid (bdata, bsize)) {
            fputs (",\"body_text\":", out);
            s_put_json_string (out, bdata, bsize);
        }
        else {
            fputs (",\"body_base64\":\"", out);
            s_put_base64 (out, bdata, bsize);
            fputc ('"', out);
        }
    }
    fputs ("}\n", out);
}

static void *
s_socket_open (void *ctx, const s_opts_t *opts)
{
    void *sock = zmq_socket (ctx, ZMQ_SUB);
    if (!sock) {
        fprintf (stderr, "fanhub tail: %s\n", zmq_strerror (errno));
        return NULL;
    }
    /* Linger 0: a subscriber has nothing worth flushing at exit. The
       subscriptions go first so they travel with the connection
       handshake rather than after it. */
    int zero = 0;
    if (zmq_setsockopt (sock, ZMQ_LINGER, &zero, sizeof zero) < 0
        || zmq_setsockopt (sock, ZMQ_RCVHWM, &opts->rcvhwm, sizeof opts->rcvhwm) < 0
        || (opts->curve
            && (zmq_setsockopt (sock, ZMQ_CURVE_SERVERKEY, opts->keys.server_key, 40) < 0
                || zmq_setsockopt (sock, ZMQ_CURVE_PUBLICKEY, opts->keys.public_key, 40) < 0
                || zmq_setsockopt (sock, ZMQ_CURVE_SECRETKEY, opts->keys.secret_key, 40) < 0))
        || s_subscribe (sock, opts) < 0) {
        fprintf (stderr, "fanhub tail: %s\n", zmq_strerror (errno));
        zmq_close (sock);
        return NULL;
    }
    for (size_t i = 0; i < opts->bind_count; i++)
        if (zmq_bind (sock, opts->bind[i]) < 0) {
            fprintf (stderr, "fanhub tail: cannot bind %s: %s\n", opts->bind[i],
                     zmq_strerror (errno));
            zmq_close (sock);
            return NULL;
        }
    for (size_t i = 0; i < opts->connect_count; i++)
        if (zmq_connect (sock, opts->connect[i]) < 0) {
            fprintf (stderr, "fanhub tail: cannot connect to %s: %s\n", opts->connect[i],
                     zmq_strerror (errno));
            zmq_close (sock);
            return NULL;
        }
    return sock;
}

/* Flushes stdout; false on a write error, reported once here. A reader
   that went away (EPIPE with SIGPIPE ignored) is an ordinary end. */
static bool
s_flush (FILE *out, int *rc)
{
    if (fflush (out) == 0)
        return true;
    if (errno != EPIPE) {
        fprintf (stderr, "fanhub tail: writing output: %s\n", strerror (errno));
        *rc = FH_EXIT_FAILURE;
    }
    return false;
}

/* Receives and prints until -n is reached, a signal, or an error. */
static int
s_run (void *sock, const s_opts_t *opts)
{
    FILE *out = stdout;
    bool tty = isatty (STDOUT_FILENO);
    uint64_t printed = 0;
    int64_t dirty_since = 0; /* time of the oldest unflushed line, 0 if none */
    int rc = FH_EXIT_OK;
    zmq_msg_t topic, body, extra;
    zmq_msg_init (&topic);
    zmq_msg_init (&body);
    zmq_msg_init (&extra);

    while (!fh_cli_stopped () && (opts->count == 0 || printed < opts->count)) {
        if (zmq_msg_recv (&topic, sock, ZMQ_DONTWAIT) < 0) {
            if (errno != EAGAIN && errno != EINTR) {
                fprintf (stderr, "fanhub tail: %s\n", zmq_strerror (errno));
                rc = FH_EXIT_FAILURE;
                break;
            }
            if (errno == EINTR)
                continue;
            /* Nothing waiting: the quiet moment to flush, or to sleep
               until the buffered output is due. */
            long wait_ms = S_POLL_MAX_MS;
            if (dirty_since) {
                int64_t due = dirty_since + S_FLUSH_NS - fh_clock_mono_ns ();
                if (due <= 0) {
                    if (!s_flush (out, &rc))
                        break;
                    dirty_since = 0;
                }
                else if (due / 1000000 + 1 < wait_ms)
                    wait_ms = (long) (due / 1000000 + 1);
            }
            zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
            if (zmq_poll (&item, 1, wait_ms) < 0 && errno != EINTR) {
                fprintf (stderr, "fanhub tail: %s\n", zmq_strerror (errno));
                rc = FH_EXIT_FAILURE;
                break;
            }
            continue;
        }
        /* The other frames of a message arrive with its first one. */
        bool has_body = false;
        if (zmq_msg_more (&topic)) {
            has_body = zmq_msg_recv (&body, sock, 0) >= 0;
            bool more = has_body && zmq_msg_more (&body);
            while (more && zmq_msg_recv (&extra, sock, 0) >= 0)
                more = zmq_msg_more (&extra);
        }
        if (!s_matches (opts, zmq_msg_data (&topic), zmq_msg_size (&topic)))
            continue;
        s_print (out, opts, &topic, &body, has_body);
        printed++;
        if (tty) {
            if (!s_flush (out, &rc))
                break;
        }
        else {
            int64_t now = fh_clock_mono_ns ();
            if (!dirty_since)
                dirty_since = now;
            else if (now - dirty_since >= S_FLUSH_NS) {
                if (!s_flush (out, &rc))
                    break;
                dirty_since = 0;
            }
        }
    }
    zmq_msg_close (&topic);
    zmq_msg_close (&body);
    zmq_msg_close (&extra);
    if (rc == FH_EXIT_OK)
        s_flush (out, &rc);
    return rc;
}

int
fh_cmd_tail (int argc, char **argv)
{
    s_opts_t opts = {0};
    int rc = s_parse (argc, argv, &opts);
    if (rc < 0) {
        fh_cli_signals_t saved; /* a signal cuts zmq_poll short */
        fh_cli_stop_on_signals (&saved, 0);

        rc = FH_EXIT_FAILURE;
        void *ctx = zmq_ctx_new ();
        if (!ctx)
            fprintf (stderr, "fanhub tail: %s\n", zmq_strerror (errno));
        void *sock = ctx ? s_socket_open (ctx, &opts) : NULL;
        if (sock) {
            rc = s_run (sock, &opts);
            zmq_close (sock);
        }
        if (ctx)
            zmq_ctx_term (ctx);
        fh_cli_signals_restore (&saved);
    }
    memset (opts.keys.secret_key, 0, sizeof opts.keys.secret_key);
    free (opts.connect);
    free (opts.bind);
    free (opts.exclude);
    fh_config_destroy (&opts.config);
    return rc;
}
