/*  cmd_replay - `fanhub replay`: drive one plugin from a file of messages.

    The plugin test harness. It loads one plugin as the hub loads a
    consumer's (fh_plugin_load), calls init with options read from a YAML
    file of their own, then consume once per input line, idle at the end
    of the input and fini: no bus, no queue, no thread but the caller's.
    What the plugin sees is what it would see in the hub: the same host
    table, real messages (fh_msg_new over zmq_msg_t frames) whose seq and
    receive time come from the input, and the hub's signal dispositions
    (SIGPIPE ignored). Because everything runs on one thread in one short
    process, a plugin's memory errors and leaks show up cleanly under
    valgrind, and a test can compare what the plugin did with the file.

    A plugin that answers FANHUB_PENDING (the worker plugins `python` and
    `worker`: their processes answer later, on the plugin's I/O thread)
    gets tickets and completions from replay's own host table
    (replay_host.h); replay keeps at most the window the plugin set open
    and reports each message when it completes, or as expired after
    --timeout.

    The input is JSON lines in either of two shapes: the `log` plugin's own
    output ({"seq", "received_at", "topic", "body" or "body_base64"}), so
    an archive replays as it was received, or the fedmsg-era records of
    `fanhub pub --jsonl` ({"topic", "body": {...}}), whose bodies are
    encoded exactly as `fanhub pub` publishes them. The input is streamed,
    not loaded first: a bad line stops the replay there, after the lines
    before it were consumed.
*/
#include "cli.h"
#include "commands.h"
#include "pyjson.h"
#include "clock.h"
#include "host.h"
#include "message.h"
#include "options_yaml.h"
#include "plugin.h"
#include "plugin_metrics.h"
#include "replay_host.h"

#include <dlfcn.h>
#include <errno.h>
#include <fanhub/sdk.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_NAME_MAX 64 /* as consumer names in the configuration */
#define S_DEFAULT_NAME "replay"

enum { S_OPT_PLUGIN_DIR = FH_CLI_LONG_ONLY };

static const fh_cli_option_t s_options[] = {
    {'p', "plugin", "NAME|PATH",
     "a shipped plugin by name (log, null, ...), or the\n"
     "path of a shared object when it has a '/'"},
    {'o', "options", "FILE",
     "the plugin's options: a YAML file whose top level\n"
     "is the map a consumer's options: would hold\n"
     "(default: an empty map)"},
    {'i', "input", "FILE",
     "the messages, one JSON object per line; '-' (the\n"
     "default) is stdin"},
    {'n', "name", "CONSUMER",
     "the consumer name the plugin is told (default:\n"
     "replay)"},
    {'t', "timeout", "S",
     "how long a message answered PENDING (a worker\n"
     "plugin's) may take to complete (default 60)"},
    {S_OPT_PLUGIN_DIR, "plugin-dir", "DIR",
     "where plugins named without a '/' are found\n"
     "(default: $FANHUB_PLUGIN_DIR, else the installed\n"
     "plugin directory)"},
    {0, NULL, NULL, NULL},
};

static const fh_cli_command_t s_command = {
    "replay",
    "--plugin NAME|PATH [--options FILE.yaml] [--input FILE.jsonl] [--name CONSUMER] [--timeout S] "
    "[--plugin-dir DIR]",
    "The plugin test harness: feeds messages from a JSON-lines file straight\n"
    "into one plugin, on this thread, without a bus: init with the options,\n"
    "consume for each message, idle once at the end of the input, then fini.\n"
    "Each message's result is one line on stdout, 'SEQ TOPIC -> ok|retry|fail'\n"
    "(control bytes and '\\' of the topic as \\xNN); a retry is reported, not\n"
    "retried. A summary goes to stderr. A plugin that answers later (the\n"
    "worker plugins python and worker: real worker processes run each\n"
    "message) is reported as it completes: also 'drop' (done, skipped by the\n"
    "consumer), or 'expired' when no answer came within --timeout; the\n"
    "reason of a retry or fail goes to stderr.",
    s_options,
    "Input lines, in either of two shapes:\n"
    "  "
    "{\"seq\":7,\"received_at\":\"2026-11-21T09:03:48.123456Z\",\"topic\":\"a.b\",\"body\":\"hi\"}"
    "\n"
    "  {\"topic\":\"org.fedoraproject.prod.git.receive\",\"body\":{\"msg\":{}}}\n"
    "The first is what the log plugin writes, so its output replays as it was\n"
    "received. topic is required. A string body is the body's bytes (its\n"
    "UTF-8); body_base64 (RFC 4648) gives any bytes instead; any other JSON\n"
    "body is encoded as fedmsg did and 'fanhub pub --jsonl' publishes it\n"
    "(sorted keys, compact, ASCII). seq defaults to the previous message's\n"
    "plus one (from 1) and received_at (RFC 3339) to now; the plugin reads\n"
    "them with msg_seq and msg_received_ns. Blank lines are skipped; other\n"
    "keys are ignored.\n"
    "\n"
    "Memory checking: the plugin runs in this process, so with a build\n"
    "without sanitizers\n"
    "  valgrind --leak-check=full --error-exitcode=99 \\\n"
    "      fanhub replay --plugin ./myplugin.so --options opts.yaml --input msgs.jsonl\n"
    "reports the plugin's memory errors and leaks with its function names\n"
    "(it stays mapped until the process exits).\n"
    "\n"
    "Exit status: 0 every message ok (or drop); 1 a message answered retry or\n"
    "fail or expired,\n"
    "stdout could not be written, or SIGINT/SIGTERM stopped the replay;\n"
    "2 bad usage, options file, plugin, refused options or input line (the\n"
    "messages before a bad line have been consumed).",
};

/* ---- input lines ------------------------------------------------------- */

/* RFC 4648 base64, padded or not; into buf. Answers false on anything
   that is not base64 (or when out of memory). */
static bool
s_base64_decode (const char *text, size_t len, fh_buf_t *buf)
{
    unsigned char *bytes = malloc (len / 4 * 3 + 3);
    ptrdiff_t n = bytes ? fanhub_base64_decode (bytes, text, len, false) : -1;
    if (n >= 0)
        fh_buf_put (buf, bytes, (size_t) n);
    free (bytes);
    return n >= 0;
}

typedef struct {
    uint64_t seq;
    bool has_seq;
    int64_t wall_ns;
    bool has_time;
    fh_buf_t topic;
    fh_buf_t body;
} s_line_t;

static void
s_line_clear (s_line_t *line)
{
    free (line->topic.data);
    free (line->body.data);
    memset (line, 0, sizeof *line);
}

/* Reads one input line into line; on error writes why (without the
   FILE:LINE prefix, but with ":COL" first for JSON syntax errors). */
static int
s_line_parse (const char *text, size_t len, s_line_t *line, char *why, size_t whylen)
{
    json_error_t error;
    json_t *root = json_loadb (text, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &error);
    if (!root) {
        /* jansson's column is 0 when the line ended first. */
        if (error.column > 0)
            snprintf (why, whylen, "%d: %s", error.column, error.text);
        else
            snprintf (why, whylen, " %s", error.text);
        return -1;
    }
    int rc = -1;
    json_t *topic = json_object_get (root, "topic");
    json_t *body = json_object_get (root, "body");
    json_t *body64 = json_object_get (root, "body_base64");
    json_t *seq = json_object_get (root, "seq");
    json_t *at = json_object_get (root, "received_at");
    if (!json_is_object (root))
        snprintf (why, whylen, " expected a JSON object with \"topic\" and \"body\"");
    else if (!json_is_string (topic))
        snprintf (why, whylen, " expected \"topic\", a string");
    else if (!body == !body64)
        snprintf (why, whylen,
                  body ? " expected \"body\" or \"body_base64\", not both"
                       : " expected \"body\" (or \"body_base64\")");
    else if (body64 && !json_is_string (body64))
        snprintf (why, whylen, " \"body_base64\": expected a base64 string");
    else if (seq && !(json_is_integer (seq) && json_integer_value (seq) >= 0))
        snprintf (why, whylen, " \"seq\": expected an integer >= 0");
    else if (at
             && !(json_is_string (at)
                  && fh_clock_parse_rfc3339 (json_string_value (at), &line->wall_ns)))
        snprintf (why, whylen,
                  " \"received_at\": expected an RFC 3339 time such as "
                  "\"2026-11-21T09:03:48.123456Z\"");
    else {
        fh_buf_put (&line->topic, json_string_value (topic), json_string_length (topic));
        if (body64) {
            if (!s_base64_decode (json_string_value (body64), json_string_length (body64),
                                  &line->body)) {
                snprintf (why, whylen, " \"body_base64\": not base64 (RFC 4648)");
                goto done;
            }
        }
        else if (json_is_string (body))
            fh_buf_put (&line->body, json_string_value (body), json_string_length (body));
        else
            fh_pyjson_encode (&line->body, body);
        if (line->topic.failed || line->body.failed) {
            snprintf (why, whylen, " out of memory");
            goto done;
        }
        line->has_seq = seq != NULL;
        line->seq = seq ? (uint64_t) json_integer_value (seq) : 0;
        line->has_time = at != NULL;
        rc = 0;
    }
done:
    json_decref (root);
    return rc;
}

static bool
s_blank (const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\n')
            return false;
    return true;
}

/* A message as the enqueuer makes one: the frames moved into an fh_msg_t.
   received_ns is monotonic time, as in the hub: the host table adds the
   wall-clock offset back, so the plugin reads the input's received_at. */
static fh_msg_t *
s_msg_new (const s_line_t *line, uint64_t seq)
{
    zmq_msg_t frames[2];
    const fh_buf_t *parts[2] = {&line->topic, &line->body};
    for (int i = 0; i < 2; i++) {
        if (zmq_msg_init_size (&frames[i], parts[i]->size) != 0) {
            if (i)
                zmq_msg_close (&frames[0]);
            return NULL;
        }
        if (parts[i]->size)
            memcpy (zmq_msg_data (&frames[i]), parts[i]->data, parts[i]->size);
    }
    int64_t received_ns = line->has_time ? line->wall_ns - fh_clock_wall_offset_ns ()
                                         : fh_clock_mono_ns ();
    fh_msg_t *msg = fh_msg_new (frames, 2, seq, received_ns);
    zmq_msg_close (&frames[0]);
    zmq_msg_close (&frames[1]);
    return msg;
}

/* The topic on one line of output: control bytes, and '\' so that the
   escape reads back unambiguously, as \xNN. */
static void
s_print_topic (FILE *out, const fh_buf_t *topic)
{
    for (size_t i = 0; i < topic->size; i++) {
        unsigned char c = (unsigned char) topic->data[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            fprintf (out, "\\x%02x", c);
        else
            fputc (c, out);
    }
}

static bool
s_name_valid (const char *name)
{
    size_t len = strlen (name);
    return len >= 1 && len <= S_NAME_MAX
           && strspn (name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                            "0123456789_.-")
                  == len;
}

/* ---- the command ------------------------------------------------------- */

typedef struct {
    const char *plugin;
    const char *options_path;
    const char *input_path;
    const char *name;
    const char *plugin_dir;
    double timeout_s;
} s_args_t;

static const fh_cli_value_t s_values[] = {
    {'t', FH_CLI_SECONDS, offsetof (s_args_t, timeout_s), 0.001, 86400},
    {0},
};

typedef struct {
    uint64_t ok, drop, retry, fail, expired;
} s_counts_t;

/* A message answered PENDING, until it completes. */
typedef struct {
    uint64_t seq;
    fh_buf_t topic;
    fanhub_ticket_t ticket;
    int64_t deadline_ns;
} s_open_t;

/* The open messages, oldest first, and how the replay answers. */
typedef struct {
    s_open_t *items;
    size_t count, room;
    fanhub_ticket_t last_ticket;
    int64_t timeout_ns;
    s_counts_t *counts;
    const fanhub_consumer_desc_t *desc; /* its idle runs before a wait, as in the hub */
    void *state;
} s_opens_t;

/* Before waiting for open messages: the hub calls idle when its queue
   ran empty or max_pending messages are open (a batching plugin commits
   then, and completes). */
static void
s_idle (s_opens_t *opens)
{
    if (opens->count && opens->desc->idle)
        opens->desc->idle (opens->state);
}

/* One result line: 'SEQ TOPIC -> WORD', flushed. -1 when stdout fails. */
static int
s_report (uint64_t seq, const fh_buf_t *topic, const char *word, const char *reason)
{
    printf ("%" PRIu64 " ", seq);
    s_print_topic (stdout, topic);
    printf (" -> %s\n", word);
    if (reason && *reason)
        fprintf (stderr, "fanhub replay: %" PRIu64 ": %s: %s\n", seq, word, reason);
    /* One line at a time: a plugin that writes to stdout too (log with
       path "-") interleaves with the results in order. */
    if (fflush (stdout) != 0) {
        fprintf (stderr, "fanhub replay: cannot write the results: %s\n", strerror (errno));
        return -1;
    }
    return 0;
}

/* Waits for the oldest open message and reports it. -1 when stdout
   fails. */
static int
s_settle_oldest (s_opens_t *opens)
{
    s_open_t *open = &opens->items[0];
    fanhub_result_t result;
    bool dropped;
    char reason[512];
    const char *word = "expired";
    if (!fh_replay_wait (open->ticket, open->deadline_ns, fh_cli_stopped, &result, &dropped, reason,
                         sizeof reason)) {
        snprintf (reason, sizeof reason, "%s",
                  fh_cli_stopped () ? "not answered before the replay was stopped"
                                    : "no answer within --timeout");
        opens->counts->expired++;
    }
    else if (result == FANHUB_OK) {
        word = dropped ? "drop" : "ok";
        *(dropped ? &opens->counts->drop : &opens->counts->ok) += 1;
    }
    else if (result == FANHUB_RETRY) {
        word = "retry";
        opens->counts->retry++;
    }
    else {
        word = "fail";
        opens->counts->fail++;
    }
    /* The reason of an ok or a drop is no news. */
    int rc = s_report (open->seq, &open->topic, word,
                       strcmp (word, "ok") && strcmp (word, "drop") ? reason : NULL);
    free (open->topic.data);
    memmove (opens->items, opens->items + 1, --opens->count * sizeof *opens->items);
    return rc;
}

/* A message answered PENDING: kept open; the oldest are waited for while
   the plugin's window is full. -1 when out of memory or stdout fails. */
static int
s_keep_open (s_opens_t *opens, uint64_t seq, const fh_buf_t *topic)
{
    if (opens->count == opens->room) {
        size_t room = opens->room ? opens->room * 2 : 16;
        s_open_t *grown = realloc (opens->items, room * sizeof *grown);
        if (!grown)
            return -1;
        opens->items = grown;
        opens->room = room;
    }
    s_open_t *open = &opens->items[opens->count++];
    *open = (s_open_t){.seq = seq,
                       .ticket = opens->last_ticket,
                       .deadline_ns = fh_clock_mono_ns () + opens->timeout_ns};
    fh_buf_put (&open->topic, topic->data, topic->size);
    if (open->topic.failed)
        return -1;
    size_t window = fh_replay_window ();
    if (opens->count >= (window ? window : 1000))
        s_idle (opens);
    while (opens->count >= (window ? window : 1000))
        if (s_settle_oldest (opens) != 0)
            return -1;
    return 0;
}

/* Feeds every line of input to the plugin. Answers FH_EXIT_OK,
   FH_EXIT_FAILURE (interrupted, stdout unwritable) or FH_EXIT_USAGE (a bad
   line), counting results in counts. */
static int
s_feed (FILE *input, const char *source, const fanhub_consumer_desc_t *desc, void *state,
        s_opens_t *opens)
{
    s_counts_t *counts = opens->counts;
    char *text = NULL;
    size_t room = 0;
    ssize_t len;
    unsigned long lineno = 0;
    uint64_t next_seq = 1;
    int rc = FH_EXIT_OK;
    while (!fh_cli_stopped () && (len = getline (&text, &room, input)) != -1) {
        lineno++;
        if (s_blank (text, (size_t) len))
            continue;
        s_line_t line = {0};
        char why[512];
        if (s_line_parse (text, (size_t) len, &line, why, sizeof why)) {
            fprintf (stderr, "fanhub replay: %s:%lu:%s\n", source, lineno, why);
            s_line_clear (&line);
            rc = FH_EXIT_USAGE;
            break;
        }
        uint64_t seq = line.has_seq ? line.seq : next_seq;
        next_seq = seq + 1;
        fh_msg_t *msg = s_msg_new (&line, seq);
        if (!msg) {
            fprintf (stderr, "fanhub replay: %s:%lu: out of memory\n", source, lineno);
            s_line_clear (&line);
            rc = FH_EXIT_FAILURE;
            break;
        }
        fh_replay_ticket_set (++opens->last_ticket);
        fanhub_result_t result = desc->consume (state, msg);
        fh_replay_ticket_set (0);
        const char *word = "fail";
        if (result == FANHUB_PENDING) {
            fh_msg_destroy (&msg);
            int kept = s_keep_open (opens, seq, &line.topic);
            s_line_clear (&line);
            if (kept != 0) {
                rc = FH_EXIT_FAILURE;
                break;
            }
            continue;
        }
        if (result == FANHUB_OK) {
            word = "ok";
            counts->ok++;
        }
        else if (result == FANHUB_RETRY) {
            word = "retry";
            counts->retry++;
        }
        else {
            counts->fail++;
            if (result != FANHUB_FAIL)
                /* The hub counts any other answer as a failure too. */
                fprintf (stderr,
                         "fanhub replay: %s:%lu: consume answered %d, which is not "
                         "FANHUB_OK, FANHUB_RETRY or FANHUB_FAIL: counted as fail\n",
                         source, lineno, (int) result);
        }
        fh_msg_destroy (&msg);
        int reported = s_report (seq, &line.topic, word, NULL);
        s_line_clear (&line);
        if (reported != 0) {
            rc = FH_EXIT_FAILURE;
            break;
        }
    }
    if (rc == FH_EXIT_OK && fh_cli_stopped ()) {
        fprintf (stderr, "fanhub replay: interrupted after %lu input line%s\n", lineno,
                 lineno == 1 ? "" : "s");
        rc = FH_EXIT_FAILURE;
    }
    else if (rc == FH_EXIT_OK && ferror (input)) {
        fprintf (stderr, "fanhub replay: %s: cannot read: %s\n", source, strerror (errno));
        rc = FH_EXIT_USAGE;
    }
    free (text);
    return rc;
}

static int
s_parse_args (int argc, char **argv, s_args_t *args)
{
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, args);
    int opt;
    const char *arg;
    while ((opt = fh_cli_next (&cli, &arg)) > 0) {
        switch (opt) {
        case 'p': args->plugin = arg; break;
        case 'o': args->options_path = arg; break;
        case 'i': args->input_path = arg; break;
        case 'n': args->name = arg; break;
        case S_OPT_PLUGIN_DIR: args->plugin_dir = arg; break;
        }
    }
    if (opt < 0)
        return fh_cli_status (&cli);
    if (cli.next < argc) {
        return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[cli.next]);
    }
    if (!args->plugin || !*args->plugin) {
        return fh_cli_usage_error (&s_command, "--plugin NAME|PATH is required");
    }
    if (!s_name_valid (args->name)) {
        fprintf (stderr,
                 "fanhub replay: --name: expected a name of 1 to %d characters from "
                 "A-Z a-z 0-9 _ . -, got '%s'\n",
                 S_NAME_MAX, args->name);
        return FH_EXIT_USAGE;
    }
    return -1;
}

/* Loads the plugin and keeps it mapped past fh_plugin_destroy's dlclose,
   until the process exits, so that valgrind and ASan can name the
   plugin's functions in the leak reports they write at exit. */
static fh_plugin_t *
s_load_pinned (const s_args_t *args, char *err, size_t errlen)
{
    fh_plugin_t *plugin
        = fh_plugin_load (args->plugin, fh_plugin_dir (args->plugin_dir), err, errlen);
    void *pin = plugin ? dlopen (fh_plugin_path (plugin), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)
                       : NULL;
    if (pin)
        dlclose (pin);
    return plugin;
}

/* The hub's dispositions: a plugin may count on SIGPIPE being ignored.
   SIGINT and SIGTERM end the replay between messages (no SA_RESTART: a
   read of stdin returns), so fini still runs. */
static void
s_take_signals (void)
{
    signal (SIGPIPE, SIG_IGN);
    fh_cli_stop_on_signals (NULL, 0);
}

/* init, the messages, idle and fini: the exit status. */
static int
s_drive (const s_args_t *args, const fh_plugin_t *plugin, fanhub_option_t *options, FILE *input,
         const char *source)
{
    const fanhub_consumer_desc_t *desc = fh_plugin_desc (plugin);
    struct fanhub_ctx ctx = {.consumer_name = args->name, .desc = desc};
    void *state = NULL;
    if (desc->init) {
        char why[1024] = "";
        if (desc->init (fh_replay_host (), &ctx, options, &state, why, sizeof why) != 0) {
            why[sizeof why - 1] = '\0';
            fprintf (
                stderr, "fanhub replay: %s%sconsumer '%s': plugin '%s' refused its options: %s\n",
                args->options_path ? fh_option_where (options) : "", args->options_path ? ": " : "",
                args->name, args->plugin, why[0] ? why : "(init gave no reason)");
            fh_plugin_metrics_free (&ctx.metrics);
            return FH_EXIT_USAGE;
        }
    }
    s_counts_t counts = {0};
    s_opens_t opens = {.timeout_ns = (int64_t) (args->timeout_s * 1e9),
                       .counts = &counts,
                       .desc = desc,
                       .state = state};
    int rc = s_feed (input, source, desc, state, &opens);
    /* The input is done: as when the hub's queue runs empty, idle, then
       what is still open completes, before fini. */
    s_idle (&opens);
    while (opens.count)
        if (s_settle_oldest (&opens) != 0)
            rc = FH_EXIT_FAILURE;
    free (opens.items);
    if (rc == FH_EXIT_OK && desc->idle)
        desc->idle (state);
    if (desc->fini)
        desc->fini (state);
    fh_plugin_metrics_free (&ctx.metrics);
    if (rc == FH_EXIT_OK && (counts.retry || counts.fail || counts.expired))
        rc = FH_EXIT_FAILURE;
    uint64_t total = counts.ok + counts.drop + counts.retry + counts.fail + counts.expired;
    fprintf (stderr,
             "fanhub replay: %" PRIu64 " message%s: %" PRIu64 " ok, %" PRIu64 " retry, %" PRIu64
             " fail",
             total, total == 1 ? "" : "s", counts.ok, counts.retry, counts.fail);
    if (counts.drop || counts.expired)
        fprintf (stderr, ", %" PRIu64 " drop, %" PRIu64 " expired", counts.drop, counts.expired);
    fputc ('\n', stderr);
    return rc;
}

int
fh_cmd_replay (int argc, char **argv)
{
    s_args_t args = {.input_path = "-", .name = S_DEFAULT_NAME, .timeout_s = 60};
    int rc = s_parse_args (argc, argv, &args);
    if (rc >= 0)
        return rc;

    char err[2048];
    fanhub_option_t *options = NULL;
    if (args.options_path)
        options = fh_options_yaml_load_file (args.options_path, err, sizeof err);
    else if (!(options = fh_option_new (FANHUB_OPTION_MAP, NULL, "(no --options)")))
        snprintf (err, sizeof err, "out of memory");
    if (!options) {
        fprintf (stderr, "fanhub replay: %s\n", err);
        return FH_EXIT_USAGE;
    }
    bool from_stdin = strcmp (args.input_path, "-") == 0;
    const char *source = from_stdin ? "<stdin>" : args.input_path;
    FILE *input = from_stdin ? stdin : fopen (args.input_path, "r");
    fh_plugin_t *plugin = NULL;
    if (!input) {
        fprintf (stderr, "fanhub replay: %s: cannot open: %s\n", source, strerror (errno));
        rc = FH_EXIT_USAGE;
    }
    else if (!(plugin = s_load_pinned (&args, err, sizeof err))) {
        fprintf (stderr, "fanhub replay: %s\n", err);
        rc = FH_EXIT_USAGE;
    }
    else {
        s_take_signals ();
        rc = s_drive (&args, plugin, options, input, source);
    }
    fh_plugin_destroy (&plugin);
    fh_option_destroy (&options);
    if (input && !from_stdin)
        fclose (input);
    return rc;
}
