/*  amqp_pub - the baseline of the benchmark's amqp case: a minimal
    librabbitmq publisher with publisher confirms and a window.

    It publishes COUNT messages as the amqp plugin does (the same exchange,
    routing key, a body of SIZE bytes 'x' as bench_pub sends, persistent,
    a fanhub_seq header) on one channel in confirm mode, with at most
    WINDOW publishes unconfirmed (the plugin's window is its consumer's
    max_pending), and waits for the last confirm. One thread, one
    connection, no copy beyond librabbitmq's own: what the broker and
    librabbitmq allow, against which the bridge is measured.

    usage: amqp_pub --port PORT -n COUNT [--host H] [--vhost V] [--user U]
                    [--password-env VAR] [--exchange X] [--routing-key K]
                    [--size BYTES] [--window W]

    Prints one JSON line: {"sent":N,"confirmed":N,"seconds":S,"rate":R}
    (rate: N over first publish to last confirm). Exit status 0; 1 when the
    broker refused, nacked or went away; 2 on a usage error.
*/
#include <amqp.h>
#include <amqp_tcp_socket.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int
s_die (const char *what, const char *why)
{
    fprintf (stderr, "amqp_pub: %s: %s\n", what, why);
    return 1;
}

static bool
s_reply_ok (amqp_connection_state_t conn, const char *what)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply (conn);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return true;
    s_die (what, r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                     ? amqp_error_string2 (r.library_error)
                     : "refused by the broker");
    return false;
}

/* Reads one frame: the highest tag confirmed so far moves. -1 on a nack
   or an error. */
static int
s_read_confirm (amqp_connection_state_t conn, uint64_t *confirmed)
{
    amqp_frame_t frame;
    int rc = amqp_simple_wait_frame (conn, &frame);
    if (rc != AMQP_STATUS_OK)
        return s_die ("wait", amqp_error_string2 (rc)), -1;
    if (frame.frame_type != AMQP_FRAME_METHOD)
        return 0;
    if (frame.payload.method.id == AMQP_BASIC_NACK_METHOD)
        return s_die ("confirm", "the broker nacked a message"), -1;
    if (frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
        amqp_basic_ack_t *ack = frame.payload.method.decoded;
        /* The benchmark publishes to one queue, whose confirms RabbitMQ
           sends in order: the highest tag is the count confirmed. */
        if (ack->delivery_tag > *confirmed)
            *confirmed = ack->delivery_tag;
    }
    else if (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD
             || frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)
        return s_die ("channel", "closed by the broker"), -1;
    amqp_maybe_release_buffers (conn);
    return 0;
}

int
main (int argc, char **argv)
{
    const char *host = "127.0.0.1", *vhost = "/", *user = "guest", *password = "guest";
    const char *exchange = "amq.topic", *key = "org.fanhub.bench.message";
    long port = 5672, count = 0, size = 100, window = 1000;
    static const struct option longopts[] = {{"host", 1, 0, 'h'},         {"port", 1, 0, 'p'},
                                             {"vhost", 1, 0, 'v'},        {"user", 1, 0, 'u'},
                                             {"password-env", 1, 0, 'P'}, {"exchange", 1, 0, 'x'},
                                             {"routing-key", 1, 0, 'k'},  {"size", 1, 0, 's'},
                                             {"window", 1, 0, 'w'},       {0, 0, 0, 0}};
    int opt;
    while ((opt = getopt_long (argc, argv, "n:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h': host = optarg; break;
        case 'p': port = strtol (optarg, NULL, 10); break;
        case 'v': vhost = optarg; break;
        case 'u': user = optarg; break;
        case 'P': password = getenv (optarg) ? getenv (optarg) : ""; break;
        case 'x': exchange = optarg; break;
        case 'k': key = optarg; break;
        case 's': size = strtol (optarg, NULL, 10); break;
        case 'w': window = strtol (optarg, NULL, 10); break;
        case 'n': count = strtol (optarg, NULL, 10); break;
        default: return 2;
        }
    }
    if (count <= 0 || port <= 0 || size < 0 || window <= 0 || optind != argc) {
        fprintf (stderr, "usage: amqp_pub --port PORT -n COUNT [--host H] [--vhost V] "
                         "[--user U] [--password-env VAR] [--exchange X] [--routing-key K] "
                         "[--size BYTES] [--window W]\n");
        return 2;
    }
    char *body = malloc ((size_t) size + 1);
    if (!body)
        return s_die ("malloc", "out of memory");
    memset (body, 'x', (size_t) size);

    amqp_connection_state_t conn = amqp_new_connection ();
    amqp_socket_t *sock = amqp_tcp_socket_new (conn);
    int rc = sock ? amqp_socket_open (sock, host, (int) port) : AMQP_STATUS_NO_MEMORY;
    if (rc != AMQP_STATUS_OK)
        return s_die ("connect", amqp_error_string2 (rc));
    amqp_rpc_reply_t r
        = amqp_login (conn, vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, user, password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL)
        return s_die ("login", "refused");
    amqp_channel_open (conn, 1);
    if (!s_reply_ok (conn, "channel.open"))
        return 1;
    amqp_confirm_select (conn, 1);
    if (!s_reply_ok (conn, "confirm.select"))
        return 1;

    uint64_t sent = 0, confirmed = 0;
    double start = s_now ();
    while (sent < (uint64_t) count || confirmed < sent) {
        if (sent < (uint64_t) count && sent - confirmed < (uint64_t) window) {
            amqp_table_entry_t seq
                = {.key = amqp_cstring_bytes ("fanhub_seq"),
                   .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = (int64_t) sent + 1}};
            amqp_basic_properties_t props = {
                ._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_HEADERS_FLAG,
                .delivery_mode = AMQP_DELIVERY_PERSISTENT,
                .headers = {.num_entries = 1, .entries = &seq},
            };
            amqp_bytes_t bytes = {.len = (size_t) size, .bytes = body};
            rc = amqp_basic_publish (conn, 1, amqp_cstring_bytes (exchange),
                                     amqp_cstring_bytes (key), 0, 0, &props, bytes);
            if (rc != AMQP_STATUS_OK)
                return s_die ("publish", amqp_error_string2 (rc));
            sent++;
            /* Take the confirms that have come, without waiting. */
            while (amqp_frames_enqueued (conn) || amqp_data_in_buffer (conn))
                if (s_read_confirm (conn, &confirmed))
                    return 1;
            continue;
        }
        if (s_read_confirm (conn, &confirmed)) /* the window is full: wait */
            return 1;
    }
    double seconds = s_now () - start;
    printf ("{\"sent\":%llu,\"confirmed\":%llu,\"seconds\":%.6f,\"rate\":%.1f}\n",
            (unsigned long long) sent, (unsigned long long) confirmed, seconds,
            (double) sent / seconds);
    amqp_channel_close (conn, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close (conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection (conn);
    free (body);
    return 0;
}
