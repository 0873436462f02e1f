/*  cmd_pub - `fanhub pub`: publish messages to the bus.

    The fedmsg-logger of this project, and the load generator of the demo,
    the tests and the benchmarks. It publishes on an XPUB socket rather
    than a PUB socket: an XPUB socket tells its owner about subscriptions,
    so `pub` can wait until a subscriber is really there before the first
    message (ZeroMQ's slow joiner would otherwise eat the first messages).
    The data path is one zmq_send per frame from buffers prepared once:
    generated bodies are patched in place (only the digits of the sequence
    number change), files are encoded once at load and sent with
    zmq_send_const. At full speed nothing is allocated per message but what
    libzmq itself needs.

    Bodies read from a JSON-lines file are re-encoded the way fedmsg did
    (Python's json.dumps with sort_keys=True and compact separators), byte
    for byte: see hub/util/pyjson.h for why that is not just jansson's dump.
*/
#include "cli.h"
#include "commands.h"
#include "cli_fedmsg.h"
#include "pub_jsonl.h"

#include "clock.h"
#include "config.h"

#include <errno.h>
#include <fanhub/sdk.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define S_DEFAULT_ENDPOINT "tcp://127.0.0.1:9940"
#define S_DEFAULT_TOPIC "org.fanhub.demo.message"
#define S_DEFAULT_LINGER_MS 5000
/* The smallest --size that holds {"seq":N} for any 64-bit N. */
#define S_MIN_SIZE 32
#define S_MAX_SIZE (1024u * 1024 * 1024)
#define S_MAX_TIMEOUT_S 31536000 /* a year */
/* How many messages between two reads of the subscription messages. */
#define S_DRAIN_EVERY 256

typedef enum {
    S_SOURCE_SEQ,   /* generated {"seq":N}, optionally padded to --size */
    S_SOURCE_TEXT,  /* --body TEXT */
    S_SOURCE_JSONL, /* --jsonl FILE */
    S_SOURCE_STDIN  /* - or --stdin: one body per line */
} s_source_t;

typedef struct {
    const char *endpoint;
    bool bind;
    const char *topic;
    bool topic_set;
    uint64_t count;
    bool count_set;
    double rate;
    s_source_t source;
    const char *body;
    size_t size; /* 0: natural size */
    const char *jsonl;
    uint64_t wait_subscribers;
    bool wait_set;
    double timeout_s; /* 0: wait for ever */
    int linger_ms;
    int sndhwm;
    bool stamp;
    bool quiet;
    fh_cli_fedmsg_t fedmsg; /* --fedmsg and its signing options */
    char peer[512];         /* -c FILE: where the hub of FILE meets this publisher */
} s_opts_t;

/* A generated body: {"seq":N,"pad":"xxx"} of exactly `size` bytes, or
   {"seq":N} when size is 0. The layout only moves when the number of
   digits of N changes; between those, a message costs a digit copy. */
typedef struct {
    char *data;
    size_t size;   /* current body size */
    size_t fixed;  /* requested size, 0 = natural */
    size_t digits; /* digit count the layout is made for */
} s_gen_t;

enum {
    S_OPT_BODY = FH_CLI_LONG_ONLY,
    S_OPT_SIZE,
    S_OPT_JSONL,
    S_OPT_STDIN,
    S_OPT_WAIT,
    S_OPT_TIMEOUT,
    S_OPT_LINGER,
    S_OPT_SNDHWM,
    S_OPT_STAMP,
    S_OPT_CONNECT
};

static const fh_cli_option_t s_options[] = {
    {FH_CLI_HEADING, "", NULL, "Where:"},
    {'b', "bind", "EP",
     "bind EP (default: --bind " S_DEFAULT_ENDPOINT ",\n"
     "where the default hub configuration connects)"},
    {'c', "config", "FILE",
     "meet the hub of FILE: bind where it connects, else\nconnect where it binds"},
    {S_OPT_CONNECT, "connect", "EP", "connect to EP instead (e.g. a hub's bind endpoint)"},
    {FH_CLI_HEADING, "", NULL, "What (one body source; without one, bodies are {\"seq\":N}):"},
    {'t', "topic", "TOPIC",
     "topic of every message\n"
     "(default " S_DEFAULT_TOPIC ")"},
    {S_OPT_BODY, "body", "TEXT", "this body"},
    {S_OPT_SIZE, "size", "BYTES",
     "bodies of exactly BYTES bytes (32 to 1GiB; 4096 or\n"
     "64KiB): "
     "{\"seq\":N,\"pad\":\"xxx...\"}, N counting from 1"},
    {S_OPT_JSONL, "jsonl", "FILE",
     "the messages of a JSON-lines file of\n"
     "{\"topic\":..., \"body\":...} objects, in order;\n"
     "bodies are encoded as fedmsg did (sorted keys,\n"
     "compact, ASCII-only, Python's float format)"},
    {S_OPT_STDIN, "stdin", NULL, "each line of standard input is one body (or '-')"},
    {FH_CLI_HEADING, "", NULL, "How many, how fast:"},
    {'n', "count", "N",
     "messages to send; 0 = until interrupted (or the\n"
     "end of stdin). Default: 1; with --jsonl each\n"
     "message of the file once (more cycles the file);\n"
     "with --stdin every line"},
    {'r', "rate", "MSG_PER_S",
     "average rate, paced on the monotonic clock;\n"
     "0 = as fast as possible (default)"},
    {S_OPT_STAMP, "stamp", NULL,
     "add a third frame: the monotonic send time in\n"
     "nanoseconds, 8 bytes little-endian"},
    {FH_CLI_HEADING, "", NULL, "Delivery:"},
    {S_OPT_WAIT, "wait-subscribers", "N",
     "before the first message, wait for N\n"
     "subscriptions to arrive (default 1 when binding,\n"
     "0 when connecting); avoids losing the first\n"
     "messages to a subscriber that is still joining"},
    {S_OPT_TIMEOUT, "timeout", "S",
     "give up that wait after S seconds (exit 1);\n"
     "default 0 = wait until interrupted"},
    {S_OPT_SNDHWM, "sndhwm", "N",
     "send high-water mark per subscriber; 0 = no\n"
     "limit, nothing dropped here (default)"},
    {S_OPT_LINGER, "linger-ms", "MS",
     "at exit, time allowed to flush what is queued\n"
     "(default 5000; -1 = for ever)"},
    {'q', "quiet", NULL, "no summary line at exit"},
    {FH_CLI_HEADING, "", NULL, "Envelope:"},
    FH_CLI_FEDMSG_OPTIONS,
    {FH_CLI_HEADING, "", NULL, "Help:"},
    {0, NULL, NULL, NULL},
};

/* The numbers, stored by the option layer (cli.h). */
static const fh_cli_value_t s_values[] = {
    {'n', FH_CLI_U64, offsetof (s_opts_t, count), 0, INFINITY},
    {'r', FH_CLI_NUMBER, offsetof (s_opts_t, rate), 0, INFINITY},
    {S_OPT_SIZE, FH_CLI_SIZE, offsetof (s_opts_t, size), S_MIN_SIZE, S_MAX_SIZE},
    {S_OPT_WAIT, FH_CLI_U64, offsetof (s_opts_t, wait_subscribers), 0, INFINITY},
    {S_OPT_TIMEOUT, FH_CLI_SECONDS, offsetof (s_opts_t, timeout_s), 0, S_MAX_TIMEOUT_S},
    {S_OPT_SNDHWM, FH_CLI_INT, offsetof (s_opts_t, sndhwm), 0, INT32_MAX},
    {S_OPT_LINGER, FH_CLI_INT, offsetof (s_opts_t, linger_ms), -1, INT32_MAX},
    {0, 0, 0, 0, 0},
};

static const fh_cli_command_t s_command = {
    "pub",
    "[OPTIONS] [-]",
    "Publish messages to the bus: ZeroMQ multipart messages of a topic\n"
    "frame and a body frame (fedmsg-logger style).",
    s_options,
    "At exit a summary goes to stderr:\n"
    "  fanhub pub: sent N messages in X.XXX s (R msg/s)\n"
    "SIGINT or SIGTERM stops publishing; the summary is printed and the\n"
    "exit status is 0. Exit status 1: runtime failure; 2: bad usage.\n"
    "\n"
    "Examples:\n"
    "  fanhub pub --body '{\"hello\":\"world\"}'\n"
    "  fanhub pub -n 0 -r 10 -t org.fanhub.demo.tick\n"
    "  fanhub pub -n 1000000 --size 100 --stamp\n"
    "  fanhub pub --connect tcp://hub.example.org:9941 --jsonl fedmsg-sample.jsonl\n"
    "  fanhub pub -c /etc/fanhub/fanhub.yaml --body '{\"hello\":\"world\"}'\n"
    "  fanhub pub --fedmsg --sign-key me.key --sign-cert me.crt --body '{\"a\":1}'\n"
    "  journalctl -f -o cat | fanhub pub -t org.example.log -n 0 -",
};

/* What the command line says about where to publish and from what. */
typedef struct {
    const char *connect, *bind, *config;
    int sources; /* body sources given: at most one */
} s_where_t;

static void
s_from_stdin (s_opts_t *opts, s_where_t *where)
{
    if (opts->source != S_SOURCE_STDIN)
        where->sources++;
    opts->source = S_SOURCE_STDIN;
}

/* A body source option: --body, --size, --jsonl, --stdin. -1 to go on,
   else the exit status. */
static int
s_source_option (int c, const char *arg, s_opts_t *opts, s_where_t *where)
{
    switch (c) {
    case S_OPT_BODY:
        opts->source = S_SOURCE_TEXT;
        opts->body = arg;
        break;
    case S_OPT_SIZE: opts->source = S_SOURCE_SEQ; break; /* opts->size: s_values */
    case S_OPT_JSONL:
        opts->source = S_SOURCE_JSONL;
        opts->jsonl = arg;
        break;
    case S_OPT_STDIN: s_from_stdin (opts, where); return -1;
    default: return -1;
    }
    where->sources++;
    return -1;
}

/* One option of the command line. -1 to go on, else the exit status. */
static int
s_option (int c, const char *arg, s_opts_t *opts, s_where_t *where)
{
    if (fh_cli_fedmsg_option (&opts->fedmsg, c, arg))
        return -1;
    switch (c) {
    case 'c': where->config = arg; break;
    case S_OPT_CONNECT:
    case 'b':
        if (where->connect || where->bind || where->config)
            return fh_cli_usage_error (&s_command,
                                       "give one of -c FILE, --connect EP or --bind EP, once");
        *(c == 'b' ? &where->bind : &where->connect) = arg;
        break;
    case 't':
        if (!fanhub_utf8_valid (arg, strlen (arg)))
            return fh_cli_usage_error (&s_command, "--topic '%s' is not valid UTF-8", arg);
        opts->topic = arg;
        opts->topic_set = true;
        break;
    case S_OPT_STAMP: opts->stamp = true; break;
    case 'q': opts->quiet = true; break;
    /* The numbers are stored already (s_values); noted here: given. */
    case 'n': opts->count_set = true; break;
    case S_OPT_WAIT: opts->wait_set = true; break;
    case S_OPT_BODY:
    case S_OPT_SIZE:
    case S_OPT_JSONL:
    case S_OPT_STDIN: return s_source_option (c, arg, opts, where);
    default: break;
    }
    return -1;
}

/* After the options: the endpoint, and the defaults that depend on it.
   -1 to go on, else the exit status. */
static int
s_resolve (s_opts_t *opts, const s_where_t *where)
{
    if (where->sources > 1)
        return fh_cli_usage_error (&s_command, "%s",
                                   "give one body source: --body, --size, --jsonl or --stdin");
    if (opts->source == S_SOURCE_JSONL && opts->topic_set)
        return fh_cli_usage_error (&s_command, "%s",
                                   "--topic and --jsonl are exclusive: the file has the topics");
    const char *connect = where->connect, *bind = where->bind, *config = where->config;
    char err[2048];
    if (config && (connect || bind))
        return fh_cli_usage_error (&s_command,
                                   "give one of -c FILE, --connect EP or --bind EP, once");
    bool to_bind = true;
    if (config
        && fh_cli_bus_peer (config, opts->peer, sizeof opts->peer, &to_bind, err, sizeof err))
        return fh_cli_usage_error (&s_command, "%s", err);
    opts->bind = config ? to_bind : connect == NULL;
    opts->endpoint = config ? opts->peer : connect ? connect : bind ? bind : S_DEFAULT_ENDPOINT;
    const char *why = fh_endpoint_check (opts->endpoint, opts->bind);
    if (why)
        return fh_cli_usage_error (&s_command, "%s '%s': %s", opts->bind ? "--bind" : "--connect",
                                   opts->endpoint, why);
    if (!opts->wait_set)
        opts->wait_subscribers = opts->bind ? 1 : 0;
    if (!opts->count_set)
        opts->count = opts->source == S_SOURCE_STDIN ? 0 : 1;
    return -1;
}

/* Parses the command line into opts. Returns -1 when the work is to go
   on, else the exit status (--help, usage errors). */
static int
s_parse (int argc, char **argv, s_opts_t *opts)
{
    *opts = (s_opts_t){
        .topic = S_DEFAULT_TOPIC,
        .linger_ms = S_DEFAULT_LINGER_MS,
    };
    s_where_t where = {0};
    fh_cli_t cli;
    fh_cli_begin_typed (&cli, &s_command, argc, argv, s_values, opts);
    int c, status = -1;
    const char *arg;
    while (status < 0 && (c = fh_cli_next (&cli, &arg)) > 0)
        status = s_option (c, arg, opts, &where);
    if (status >= 0)
        return status;
    if (c < 0)
        return fh_cli_status (&cli);
    for (int i = cli.next; i < argc; i++) {
        if (strcmp (argv[i], "-") != 0)
            return fh_cli_usage_error (&s_command, "unexpected argument '%s'", argv[i]);
        s_from_stdin (opts, &where);
    }
    status = s_resolve (opts, &where);
    if (status >= 0)
        return status;
    /* Last: it loads the signing key, which nothing after may leak. */
    return fh_cli_fedmsg_start (&opts->fedmsg, &s_command);
}

/* ---- message sources --------------------------------------------------- */

/* Writes N in decimal at the end of a 20-byte field; returns the start. */
static char *
s_u64_digits (uint64_t n, char field[20], size_t *len)
{
    char *p = field + 20;
    do {
        *--p = (char) ('0' + n % 10);
        n /= 10;
    } while (n);
    *len = (size_t) (field + 20 - p);
    return p;
}

static int
s_gen_init (s_gen_t *self, size_t fixed)
{
    *self = (s_gen_t){.fixed = fixed};
    /* Natural bodies are at most {"seq":} plus 20 digits. */
    self->data = malloc (fixed ? fixed : 32);
    return self->data ? 0 : -1;
}

/* Lays the body out for an N of `digits` digits:
     {"seq":N,"pad":"xxxxx"}   when --size leaves room for the pad,
     {"seq":N        }         (spaces, still JSON) when it barely does not,
     {"seq":N}                 without --size. */
static void
s_gen_layout (s_gen_t *self, size_t digits)
{
    static const char head[] = "{\"seq\":";
    static const char pad[] = ",\"pad\":\"";
    const size_t head_len = sizeof head - 1, pad_len = sizeof pad - 1;
    self->digits = digits;
    memcpy (self->data, head, head_len);
    if (!self->fixed) {
        self->size = head_len + digits + 1;
        self->data[self->size - 1] = '}';
        return;
    }
    self->size = self->fixed;
    size_t after = head_len + digits;
    if (after + pad_len + 2 <= self->fixed) {
        memcpy (self->data + after, pad, pad_len);
        memset (self->data + after + pad_len, 'x', self->fixed - after - pad_len - 2);
        memcpy (self->data + self->fixed - 2, "\"}", 2);
    }
    else {
        memset (self->data + after, ' ', self->fixed - after - 1);
        self->data[self->fixed - 1] = '}';
    }
}

static void
s_gen_set_seq (s_gen_t *self, uint64_t seq)
{
    char field[20];
    size_t len;
    const char *digits = s_u64_digits (seq, field, &len);
    if (len != self->digits)
        s_gen_layout (self, len);
    memcpy (self->data + 7, digits, len);
}

/* ---- the bus ------------------------------------------------------------ */

/* Reads the subscription messages that have arrived, without blocking,
   and counts the subscribes (first byte 1; 0 is an unsubscribe). Unread,
   they would pile up in the socket for ever. */
static void
s_drain (void *sock, uint64_t *subscriptions)
{
    uint8_t buf[64];
    int size;
    while ((size = zmq_recv (sock, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0)
        if (size > 0 && buf[0] == 1)
            (*subscriptions)++;
}

/* Waits until `want` subscriptions have arrived. Returns 0 when they have
   (or a signal asked to stop), -1 on timeout or error. */
static int
s_wait_subscribers (void *sock, const s_opts_t *opts, uint64_t *subscriptions)
{
    int64_t deadline = opts->timeout_s > 0 ? fh_clock_mono_ns () + (int64_t) (opts->timeout_s * 1e9)
                                           : 0;
    s_drain (sock, subscriptions);
    while (*subscriptions < opts->wait_subscribers && !fh_cli_stopped ()) {
        /* Short polls: a signal that lands just before zmq_poll would
           otherwise go unnoticed until the next subscription. */
        long wait_ms = 200;
        if (deadline) {
            int64_t left = deadline - fh_clock_mono_ns ();
            if (left <= 0) {
                fprintf (stderr,
                         "fanhub pub: no subscriber on %s: %" PRIu64 " of %" PRIu64
                         " subscriptions after %.3f s, giving up"
                         " (see --wait-subscribers, --timeout)\n",
                         opts->endpoint, *subscriptions, opts->wait_subscribers, opts->timeout_s);
                return -1;
            }
            if (left / 1000000 + 1 < wait_ms)
                wait_ms = (long) (left / 1000000 + 1);
        }
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll (&item, 1, wait_ms) < 0 && errno != EINTR) {
            fprintf (stderr, "fanhub pub: %s\n", zmq_strerror (errno));
            return -1;
        }
        s_drain (sock, subscriptions);
    }
    return 0;
}

/* Sends one message. Frames that outlive the socket go out with
   zmq_send_const (no copy); the rest is copied by zmq_send. An XPUB
   socket never blocks on send (it drops at the HWM), so a message is
   always sent whole. */
static int
s_send (void *sock, const void *topic, size_t topic_size, const void *body, size_t body_size,
        bool body_const, bool stamp)
{
    if (zmq_send_const (sock, topic, topic_size, ZMQ_SNDMORE) < 0)
        return -1;
    int flags = stamp ? ZMQ_SNDMORE : 0;
    int rc = body_const ? zmq_send_const (sock, body, body_size, flags)
                        : zmq_send (sock, body, body_size, flags);
    if (rc < 0)
        return -1;
    if (stamp) {
        uint64_t now = (uint64_t) fh_clock_mono_ns ();
        uint8_t le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t) (now >> (8 * i));
        if (zmq_send (sock, le, sizeof le, 0) < 0)
            return -1;
    }
    return 0;
}

/* Sleeps until an absolute monotonic time; a signal cuts it short. */
static void
s_sleep_until (int64_t when_ns)
{
    struct timespec ts = {
        .tv_sec = (time_t) (when_ns / 1000000000),
        .tv_nsec = (long) (when_ns % 1000000000),
    };
    clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

typedef struct {
    const s_opts_t *opts;
    void *sock;
    s_gen_t gen;
    fh_pub_jmsg_t *jmsgs;
    size_t jcount;
    char *line;
    size_t line_cap;
    uint64_t subscriptions;
    uint64_t sent;
    fh_cli_fedmsg_t *fedmsg; /* wraps each body when on */
} s_pub_t;

/* --fedmsg: *body becomes its envelope (not constant: the next replaces it). */
static int
s_wrap (fh_cli_fedmsg_t *fedmsg, const char *topic, size_t topic_size, const void **body,
        size_t *body_size, bool *body_const)
{
    char err[512];
    if (fh_cli_fedmsg_wrap (fedmsg, topic, topic_size, *body, *body_size, err, sizeof err) < 0) {
        fprintf (stderr, "fanhub pub: --fedmsg: %s\n", err);
        return -1;
    }
    *body = fedmsg->data;
    *body_size = fedmsg->size;
    *body_const = false;
    return 0;
}

/* The publishing loop. Returns 0 when done or stopped, -1 on failure. */
static int
s_publish (s_pub_t *self)
{
    const s_opts_t *opts = self->opts;
    const char *topic = opts->topic;
    size_t topic_size = strlen (topic);
    uint64_t count = opts->count;
    size_t text_size = opts->body ? strlen (opts->body) : 0;
    double period_ns = opts->rate > 0 ? 1e9 / opts->rate : 0;
    int64_t start = fh_clock_mono_ns ();

    for (uint64_t i = 0; (count == 0 || i < count) && !fh_cli_stopped (); i++) {
        if (period_ns > 0 && i > 0) {
            /* Absolute deadlines: oversleeping once is made up by the
               next messages, so the average rate is the one asked for. */
            int64_t deadline = start + (int64_t) ((double) i * period_ns);
            if (fh_clock_mono_ns () < deadline) {
                s_drain (self->sock, &self->subscriptions);
                s_sleep_until (deadline);
                if (fh_cli_stopped ())
                    break;
            }
        }
        if (i % S_DRAIN_EVERY == S_DRAIN_EVERY - 1)
            s_drain (self->sock, &self->subscriptions);

        const void *body;
        size_t body_size;
        bool body_const = true;
        switch (opts->source) {
        case S_SOURCE_SEQ:
            s_gen_set_seq (&self->gen, i + 1);
            body = self->gen.data;
            body_size = self->gen.size;
            body_const = false;
            break;
        case S_SOURCE_TEXT:
            body = opts->body;
            body_size = text_size;
            break;
        case S_SOURCE_JSONL: {
            const fh_pub_jmsg_t *msg = &self->jmsgs[i % self->jcount];
            topic = msg->topic;
            topic_size = msg->topic_size;
            body = msg->body;
            body_size = msg->body_size;
            break;
        }
        case S_SOURCE_STDIN:
        default: {
            errno = 0;
            ssize_t len = getline (&self->line, &self->line_cap, stdin);
            if (len < 0) {
                if (errno == EINTR || feof (stdin) || fh_cli_stopped ())
                    return 0;
                fprintf (stderr, "fanhub pub: reading stdin: %s\n", strerror (errno));
                return -1;
            }
            if (len > 0 && self->line[len - 1] == '\n')
                len--;
            if (len > 0 && self->line[len - 1] == '\r')
                len--;
            body = self->line;
            body_size = (size_t) len;
            body_const = false;
            break;
        }
        }
        if (self->fedmsg->on
            && s_wrap (self->fedmsg, topic, topic_size, &body, &body_size, &body_const) < 0)
            return -1;
        if (s_send (self->sock, topic, topic_size, body, body_size, body_const, opts->stamp) < 0) {
            fprintf (stderr, "fanhub pub: send: %s\n", zmq_strerror (errno));
            return -1;
        }
        self->sent++;
    }
    return 0;
}

static void *
s_socket_open (void *ctx, const s_opts_t *opts)
{
    void *sock = zmq_socket (ctx, ZMQ_XPUB);
    if (!sock) {
        fprintf (stderr, "fanhub pub: %s\n", zmq_strerror (errno));
        return NULL;
    }
    int one = 1;
    int rc = zmq_setsockopt (sock, ZMQ_XPUB_VERBOSE, &one, sizeof one);
    if (rc == 0)
        rc = zmq_setsockopt (sock, ZMQ_SNDHWM, &opts->sndhwm, sizeof opts->sndhwm);
    if (rc == 0)
        rc = zmq_setsockopt (sock, ZMQ_LINGER, &opts->linger_ms, sizeof opts->linger_ms);
    if (rc == 0)
        rc = opts->bind ? zmq_bind (sock, opts->endpoint) : zmq_connect (sock, opts->endpoint);
    if (rc < 0) {
        fprintf (stderr, "fanhub pub: cannot %s %s: %s\n", opts->bind ? "bind" : "connect to",
                 opts->endpoint, zmq_strerror (errno));
        zmq_close (sock);
        return NULL;
    }
    /* A port chosen by the system is worth telling: nobody else knows it. */
    size_t len = strlen (opts->endpoint);
    if (opts->bind && !opts->quiet && len > 2
        && (strcmp (opts->endpoint + len - 2, ":*") == 0
            || strcmp (opts->endpoint + len - 2, ":0") == 0)) {
        char last[256];
        size_t size = sizeof last;
        if (zmq_getsockopt (sock, ZMQ_LAST_ENDPOINT, last, &size) == 0)
            fprintf (stderr, "fanhub pub: bound to %s\n", last);
    }
    return sock;
}

int
fh_cmd_pub (int argc, char **argv)
{
    s_opts_t opts;
    int rc = s_parse (argc, argv, &opts);
    if (rc >= 0)
        return rc;

    s_pub_t pub = {.opts = &opts, .fedmsg = &opts.fedmsg};
    if (opts.source == S_SOURCE_JSONL) {
        if (fh_pub_jsonl_load (opts.jsonl, &pub.jmsgs, &pub.jcount) < 0) {
            fh_cli_fedmsg_end (&opts.fedmsg);
            return FH_EXIT_FAILURE;
        }
        if (!opts.count_set)
            opts.count = pub.jcount;
    }
    if (opts.source == S_SOURCE_SEQ && s_gen_init (&pub.gen, opts.size) < 0) {
        fprintf (stderr, "fanhub pub: out of memory\n");
        fh_pub_jsonl_free (pub.jmsgs, pub.jcount);
        fh_cli_fedmsg_end (&opts.fedmsg);
        return FH_EXIT_FAILURE;
    }

    /* No SA_RESTART: a signal must cut a blocking zmq_poll, getline or
       clock_nanosleep short. SA_RESETHAND: a second ^C during the final
       flush (--linger-ms) ends the process at once. */
    fh_cli_signals_t saved;
    fh_cli_stop_on_signals (&saved, SA_RESETHAND);

    rc = FH_EXIT_FAILURE;
    void *ctx = zmq_ctx_new ();
    pub.sock = ctx ? s_socket_open (ctx, &opts) : NULL;
    int64_t start = 0, end = 0;
    bool published = false;
    if (pub.sock && s_wait_subscribers (pub.sock, &opts, &pub.subscriptions) == 0) {
        published = true;
        start = fh_clock_mono_ns ();
        if (s_publish (&pub) == 0)
            rc = FH_EXIT_OK;
        end = fh_clock_mono_ns ();
    }
    if (pub.sock)
        zmq_close (pub.sock);
    /* Terminating the context waits for the queued messages to go out,
       for at most --linger-ms. */
    if (ctx)
        zmq_ctx_term (ctx);
    else
        fprintf (stderr, "fanhub pub: %s\n", zmq_strerror (errno));

    if (published && !opts.quiet) {
        double seconds = (double) (end - start) / 1e9;
        fprintf (stderr, "fanhub pub: sent %" PRIu64 " messages in %.3f s (%.0f msg/s)\n", pub.sent,
                 seconds, seconds > 0 ? (double) pub.sent / seconds : 0.0);
    }
    fh_cli_signals_restore (&saved);
    free (pub.gen.data);
    free (pub.line);
    fh_pub_jsonl_free (pub.jmsgs, pub.jcount);
    fh_cli_fedmsg_end (&opts.fedmsg);
    return rc;
}
