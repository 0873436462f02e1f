/*  bench_pub - the benchmark's publisher: as fast as libzmq sends.

    A throughput case measures its receiver only when the publisher is not
    the bottleneck. `fanhub pub` is a tool for people (options, JSON lines,
    rate limits) and, on a small machine, slower than a bare SUB socket
    receives; the hub then looked better than raw libzmq. This program does
    one thing: from one or several XPUB sockets (one thread each, each its
    own connection), it waits until its subscriber has subscribed, then
    sends COUNT messages [topic, body, stamp] in a tight loop with SNDHWM 0
    (libzmq queues, never drops), and reports its own send rate, so that the
    benchmark can tell a receiver-bound case from a publisher-bound one.

    usage: bench_pub --connect EP -n COUNT [--size BYTES] [--topic T]
                     [--topics FILE] [--connections N] [--subscriptions S]
                     [--no-stamp] [--json [--seq]] [--timeout SECONDS]
                     [--curve-server-key KEY --curve-keys FILE]

    --json makes the body a JSON object of the same size,
    {"pad":"xxx...x"} (at least 10 bytes), for consumers that parse it.
    --seq (with --json, at least 26 bytes) numbers the messages of each
    connection from 0 in the body, {"i":         7,"pad":"x...x"}, for
    consumers that check their order; the body is then copied a message.

    --topics FILE cycles through the topics in FILE (one a line) instead of
    one topic. --subscriptions S: each connection waits for S subscription
    messages (default 1). COUNT is split over the connections. The stamp
    frame is CLOCK_MONOTONIC ns, 8 bytes little-endian (bench_hist.h), as
    `fanhub pub --stamp` sends it; the body is a constant buffer sent
    without a copy (zmq_send_const), as a real publisher's payload would be.

    --curve-server-key KEY (the hub's public key, 40 characters of Z85)
    and --curve-keys FILE (this publisher's key pair: a zcert secret file
    as `fanhub keygen NAME` writes it, NAME_secret) make every connection
    a CURVE client; both or neither.

    Prints "ready" once every connection is subscribed and, at the end, one
    JSON line:
      {"sent":N,"connections":C,"t_first_ns":..,"t_last_ns":..,
       "send_rate":..,"t_flushed_ns":..,"cpu_s":..}
    send_rate is N over first to last send, all threads together: what the
    publisher can offer. t_flushed_ns is when every socket had handed its
    queue to the kernel (close with linger -1, then context term). Exit
    status 0, 1 when the subscriber did not come within the timeout, 2 on
    a usage error.
*/
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

#define MAX_CONNECTIONS 64
#define Z85_KEY_LEN 40

/* CURVE client keys, Z85 text; empty: plaintext. */
typedef struct {
    char server[Z85_KEY_LEN + 1];
    char public_key[Z85_KEY_LEN + 1];
    char secret_key[Z85_KEY_LEN + 1];
} s_curve_t;

#define SEQ_AT 5 /* after {"i": */
#define SEQ_DIGITS 10

typedef struct {
    void *ctx;
    const char *endpoint;
    char **topics;
    size_t topic_count;
    const void *body;
    size_t body_size;
    bool stamp;
    bool seq; /* body is a JSON template with 10 digits at SEQ_AT */
    int subscriptions;
    double timeout_s;
    const s_curve_t *curve;
    pthread_barrier_t *ready;
    atomic_bool *failed;
    /* per connection */
    void *sock;
    uint64_t count;
    int64_t first_ns, last_ns;
    char error[256];
} s_conn_t;

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Connects and waits for the subscriber's subscriptions. */
static int
s_connect (s_conn_t *conn)
{
    conn->sock = zmq_socket (conn->ctx, ZMQ_XPUB);
    int zero = 0, one = 1, linger = -1;
    zmq_setsockopt (conn->sock, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt (conn->sock, ZMQ_XPUB_VERBOSE, &one, sizeof one);
    zmq_setsockopt (conn->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (conn->curve->server[0]
        && (zmq_setsockopt (conn->sock, ZMQ_CURVE_SERVERKEY, conn->curve->server, Z85_KEY_LEN) != 0
            || zmq_setsockopt (conn->sock, ZMQ_CURVE_PUBLICKEY, conn->curve->public_key,
                               Z85_KEY_LEN)
                   != 0
            || zmq_setsockopt (conn->sock, ZMQ_CURVE_SECRETKEY, conn->curve->secret_key,
                               Z85_KEY_LEN)
                   != 0)) {
        snprintf (conn->error, sizeof conn->error, "CURVE options refused: %s",
                  zmq_strerror (errno));
        return -1;
    }
    if (zmq_connect (conn->sock, conn->endpoint) != 0) {
        snprintf (conn->error, sizeof conn->error, "cannot connect %s: %s", conn->endpoint,
                  zmq_strerror (errno));
        return -1;
    }
    int64_t deadline = s_now_ns () + (int64_t) (conn->timeout_s * 1e9);
    for (int seen = 0; seen < conn->subscriptions;) {
        zmq_pollitem_t item = {conn->sock, 0, ZMQ_POLLIN, 0};
        int64_t left_ms = (deadline - s_now_ns ()) / 1000000;
        if (left_ms <= 0) {
            snprintf (conn->error, sizeof conn->error, "%s: %d of %d subscriptions within %.0f s",
                      conn->endpoint, seen, conn->subscriptions, conn->timeout_s);
            return -1;
        }
        if (zmq_poll (&item, 1, left_ms) > 0) {
            zmq_msg_t sub;
            zmq_msg_init (&sub);
            if (zmq_msg_recv (&sub, conn->sock, 0) >= 0 && zmq_msg_size (&sub) >= 1
                && ((const uint8_t *) zmq_msg_data (&sub))[0] == 1)
                seen++;
            zmq_msg_close (&sub);
        }
    }
    return 0;
}

static void *
s_send_all (void *arg)
{
    s_conn_t *conn = arg;
    int rc = s_connect (conn);
    if (rc != 0)
        atomic_store (conn->failed, true);
    pthread_barrier_wait (conn->ready); /* every connection subscribed */
    pthread_barrier_wait (conn->ready); /* "ready" printed: go */
    if (atomic_load (conn->failed))
        return NULL;
    conn->first_ns = s_now_ns ();
    char *numbered = conn->seq ? malloc (conn->body_size) : NULL;
    if (conn->seq && !numbered) {
        snprintf (conn->error, sizeof conn->error, "out of memory");
        atomic_store (conn->failed, true);
        return NULL;
    }
    if (numbered)
        memcpy (numbered, conn->body, conn->body_size);
    for (uint64_t i = 0; i < conn->count; i++) {
        const char *topic = conn->topics[i % conn->topic_count];
        zmq_send_const (conn->sock, topic, strlen (topic), ZMQ_SNDMORE);
        if (numbered) {
            uint64_t v = i; /* right-aligned after spaces: JSON has no leading zeros */
            for (int d = SEQ_DIGITS - 1; d >= 0; d--, v /= 10)
                numbered[SEQ_AT + d] = v || d == SEQ_DIGITS - 1 ? (char) ('0' + v % 10) : ' ';
            zmq_send (conn->sock, numbered, conn->body_size, conn->stamp ? ZMQ_SNDMORE : 0);
        }
        else
            zmq_send_const (conn->sock, conn->body, conn->body_size, conn->stamp ? ZMQ_SNDMORE : 0);
        if (conn->stamp) {
            uint64_t now = (uint64_t) s_now_ns ();
            uint8_t le[8];
            for (int b = 0; b < 8; b++)
                le[b] = (uint8_t) (now >> (8 * b));
            zmq_send (conn->sock, le, sizeof le, 0);
        }
    }
    conn->last_ns = s_now_ns ();
    free (numbered);
    return NULL;
}

static char **
s_read_topics (const char *path, size_t *count)
{
    FILE *f = fopen (path, "r");
    if (!f) {
        fprintf (stderr, "bench_pub: %s: %s\n", path, strerror (errno));
        return NULL;
    }
    char **topics = NULL;
    size_t n = 0, cap = 0;
    char line[1024];
    while (fgets (line, sizeof line, f)) {
        line[strcspn (line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc (topics, cap * sizeof *topics);
            if (!grown)
                break;
            topics = grown;
        }
        topics[n++] = strdup (line);
    }
    fclose (f);
    if (n == 0) {
        fprintf (stderr, "bench_pub: %s: no topics\n", path);
        free (topics);
        return NULL;
    }
    *count = n;
    return topics;
}

static bool
s_key_valid (const char *text)
{
    uint8_t key[32];
    return strlen (text) == Z85_KEY_LEN && zmq_z85_decode (key, text) != NULL;
}

/* Reads `NAME = "VALUE"` from a zcert file (CZMQ's ZPL: `curve` section,
   public-key and secret-key) into key; false when absent or not a key. */
static bool
s_zcert_key (const char *path, const char *name, char key[Z85_KEY_LEN + 1])
{
    FILE *f = fopen (path, "r");
    if (!f) {
        fprintf (stderr, "bench_pub: %s: %s\n", path, strerror (errno));
        return false;
    }
    bool found = false;
    char line[256];
    while (!found && fgets (line, sizeof line, f)) {
        char *p = line + strspn (line, " \t");
        size_t len = strlen (name);
        if (strncmp (p, name, len) != 0)
            continue;
        p += len;
        p += strspn (p, " \t");
        if (*p++ != '=')
            continue;
        p += strspn (p, " \t");
        if (*p++ != '"' || strlen (p) < Z85_KEY_LEN + 1 || p[Z85_KEY_LEN] != '"')
            continue;
        memcpy (key, p, Z85_KEY_LEN);
        key[Z85_KEY_LEN] = '\0';
        found = s_key_valid (key);
    }
    fclose (f);
    return found;
}

static int
s_usage (void)
{
    fputs ("usage: bench_pub --connect EP -n COUNT [--size BYTES] [--topic T] "
           "[--topics FILE] [--connections N] [--subscriptions S] [--no-stamp] "
           "[--json [--seq]] [--timeout SECONDS] [--curve-server-key KEY --curve-keys FILE]\n",
           stderr);
    return 2;
}

int
main (int argc, char **argv)
{
    static const struct option options[] = {
        {"connect", required_argument, NULL, 'c'},
        {"count", required_argument, NULL, 'n'},
        {"size", required_argument, NULL, 's'},
        {"topic", required_argument, NULL, 't'},
        {"topics", required_argument, NULL, 'T'},
        {"connections", required_argument, NULL, 'C'},
        {"subscriptions", required_argument, NULL, 'S'},
        {"no-stamp", no_argument, NULL, 'N'},
        {"json", no_argument, NULL, 'J'},
        {"seq", no_argument, NULL, 'Q'},
        {"timeout", required_argument, NULL, 'o'},
        {"curve-server-key", required_argument, NULL, 'K'},
        {"curve-keys", required_argument, NULL, 'k'},
        {NULL, 0, NULL, 0},
    };
    const char *endpoint = NULL, *topic = "org.fanhub.bench.message", *topics_path = NULL;
    unsigned long long count = 0;
    size_t size = 100;
    int connections = 1, subscriptions = 1;
    bool stamp = true, json = false, seq = false;
    double timeout_s = 20;
    const char *server_key = NULL, *keys_path = NULL;
    int opt;
    while ((opt = getopt_long (argc, argv, "c:n:s:t:", options, NULL)) != -1) {
        switch (opt) {
        case 'c': endpoint = optarg; break;
        case 'n': count = strtoull (optarg, NULL, 10); break;
        case 's': size = strtoull (optarg, NULL, 10); break;
        case 't': topic = optarg; break;
        case 'T': topics_path = optarg; break;
        case 'C': connections = atoi (optarg); break;
        case 'S': subscriptions = atoi (optarg); break;
        case 'N': stamp = false; break;
        case 'J': json = true; break;
        case 'Q': seq = true; break;
        case 'o': timeout_s = atof (optarg); break;
        case 'K': server_key = optarg; break;
        case 'k': keys_path = optarg; break;
        default: return s_usage ();
        }
    }
    if (!endpoint || count == 0 || connections < 1 || connections > MAX_CONNECTIONS
        || subscriptions < 0 || timeout_s <= 0)
        return s_usage ();
    s_curve_t curve;
    memset (&curve, 0, sizeof curve); /* plaintext unless --curve-* */
    if (!server_key != !keys_path) {
        fputs ("bench_pub: --curve-server-key and --curve-keys go together\n", stderr);
        return 2;
    }
    if (server_key) {
        if (!s_key_valid (server_key)) {
            fprintf (stderr, "bench_pub: --curve-server-key %s: not 40 characters of Z85\n",
                     server_key);
            return 2;
        }
        if (!s_zcert_key (keys_path, "public-key", curve.public_key)
            || !s_zcert_key (keys_path, "secret-key", curve.secret_key)) {
            fprintf (stderr,
                     "bench_pub: --curve-keys %s: no public-key and secret-key in "
                     "it (a zcert secret file, as fanhub keygen writes NAME_secret)\n",
                     keys_path);
            return 2;
        }
        memcpy (curve.server, server_key, Z85_KEY_LEN + 1);
    }

    char *one_topic[] = {(char *) topic};
    char **topics = one_topic;
    size_t topic_count = 1;
    if (topics_path && !(topics = s_read_topics (topics_path, &topic_count)))
        return 2;
    void *body = malloc (size ? size : 1);
    if (!body)
        return 1;
    memset (body, 'x', size ? size : 1);
    if (seq && (!json || size < SEQ_AT + SEQ_DIGITS + 11))
        return s_usage ();
    if (seq) {
        memcpy (body, "{\"i\":", SEQ_AT);
        memcpy ((char *) body + SEQ_AT + SEQ_DIGITS, ",\"pad\":\"", 8);
        memcpy ((char *) body + size - 2, "\"}", 2);
    }
    else if (json && size >= 10) {
        memcpy (body, "{\"pad\":\"", 8);
        memcpy ((char *) body + size - 2, "\"}", 2);
    }

    void *ctx = zmq_ctx_new ();
    pthread_barrier_t ready;
    pthread_barrier_init (&ready, NULL, (unsigned) connections + 1);
    atomic_bool failed;
    atomic_init (&failed, false);
    s_conn_t conns[MAX_CONNECTIONS];
    pthread_t threads[MAX_CONNECTIONS];
    for (int i = 0; i < connections; i++) {
        conns[i] = (s_conn_t){
            .ctx = ctx,
            .endpoint = endpoint,
            .topics = topics,
            .topic_count = topic_count,
            .body = body,
            .body_size = size,
            .stamp = stamp,
            .seq = seq,
            .subscriptions = subscriptions,
            .curve = &curve,
            .timeout_s = timeout_s,
            .ready = &ready,
            .failed = &failed,
            .count = count / (unsigned) connections
                     + ((unsigned long long) i < count % (unsigned) connections),
        };
        pthread_create (&threads[i], NULL, s_send_all, &conns[i]);
    }
    pthread_barrier_wait (&ready);
    if (!atomic_load (&failed)) {
        printf ("ready\n");
        fflush (stdout);
    }
    struct rusage ru0, ru1;
    getrusage (RUSAGE_SELF, &ru0);
    pthread_barrier_wait (&ready);
    for (int i = 0; i < connections; i++)
        pthread_join (threads[i], NULL);
    getrusage (RUSAGE_SELF, &ru1);
    int status = 0;
    for (int i = 0; i < connections; i++)
        if (conns[i].error[0]) {
            fprintf (stderr, "bench_pub: %s\n", conns[i].error);
            status = 1;
        }
    for (int i = 0; i < connections; i++)
        zmq_close (conns[i].sock);
    zmq_ctx_term (ctx); /* linger -1: returns once every queue is sent */
    int64_t flushed = s_now_ns ();
    if (status == 0) {
        int64_t first = conns[0].first_ns, last = conns[0].last_ns;
        for (int i = 1; i < connections; i++) {
            if (conns[i].first_ns < first)
                first = conns[i].first_ns;
            if (conns[i].last_ns > last)
                last = conns[i].last_ns;
        }
        double cpu = (double) (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec)
                     + (double) (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6
                     + (double) (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec)
                     + (double) (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
        printf ("{\"sent\":%llu,\"connections\":%d,\"t_first_ns\":%lld,\"t_last_ns\":%lld,"
                "\"send_rate\":%.1f,\"t_flushed_ns\":%lld,\"cpu_s\":%.6f}\n",
                count, connections, (long long) first, (long long) last,
                (double) count / ((double) (last - first > 0 ? last - first : 1) / 1e9),
                (long long) flushed, cpu);
        fflush (stdout);
    }
    pthread_barrier_destroy (&ready);
    if (topics != one_topic) {
        for (size_t i = 0; i < topic_count; i++)
            free (topics[i]);
        free (topics);
    }
    free (body);
    return status;
}
