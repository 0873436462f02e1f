/*  bench_raw - the baseline subscriber: raw libzmq, no hub.

    The benchmark's reference point. It is the receiving half of a plain
    ZeroMQ PUB -> SUB pair over tcp loopback, fed by the very publisher the
    hub is fed by (`fanhub pub --stamp`, an XPUB socket), with the same
    message shape [topic, body, stamp]: whatever the hub costs above this
    program is the price of the hub. For each message it receives every
    frame (zmq_msg_recv, as the hub's enqueuer does), reads the stamp frame
    (frame 3: the publisher's CLOCK_MONOTONIC send time, 8 bytes
    little-endian) and records now - stamp in a histogram (bench_hist.h).

    usage: bench_raw (--bind EP | --connect EP) -n COUNT [--rcvhwm N]
                     [--timeout S] [--topic PREFIX]

    It prints "ready" on stdout once it is bound and subscribed, then, when
    COUNT messages have arrived (or --timeout seconds have passed: exit 1),
    one JSON line:
      {"received":N,"short":M,"no_stamp":S,"t_ready_ns":..,"t_first_ns":..,
       "t_last_ns":..,"first_stamp_ns":..,"cpu_s":..,"cpu_user_s":..,
       "cpu_sys_s":..,"ctx_switches":..,"count":..,"p50_ns":..,...,
       "buckets":[...]}
    Times are CLOCK_MONOTONIC ns. cpu_* is getrusage (RUSAGE_SELF) from
    "ready" to the last message: the whole subscriber process, libzmq's I/O
    thread included, as the hub's CPU figures include the hub's; so is
    ctx_switches (voluntary and involuntary context switches).
*/
#include "bench_hist.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

#define MAX_FRAMES 32

static int64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
s_cpu (double *user, double *sys, long *switches)
{
    struct rusage ru;
    getrusage (RUSAGE_SELF, &ru);
    *user = (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6;
    *sys = (double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec / 1e6;
    *switches = ru.ru_nvcsw + ru.ru_nivcsw;
}

static int
s_usage (void)
{
    fputs ("usage: bench_raw (--bind EP | --connect EP) -n COUNT [--rcvhwm N] "
           "[--timeout S] [--topic PREFIX]\n",
           stderr);
    return 2;
}

int
main (int argc, char **argv)
{
    static const struct option options[] = {
        {"bind", required_argument, NULL, 'b'},
        {"connect", required_argument, NULL, 'c'},
        {"count", required_argument, NULL, 'n'},
        {"rcvhwm", required_argument, NULL, 'H'},
        {"timeout", required_argument, NULL, 't'},
        {"topic", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    const char *bind = NULL, *connect = NULL, *topic = "";
    unsigned long long count = 0;
    int rcvhwm = 100000; /* the hub's bus.rcvhwm default */
    double timeout_s = 120;
    int opt;
    while ((opt = getopt_long (argc, argv, "b:c:n:H:t:T:", options, NULL)) != -1) {
        switch (opt) {
        case 'b': bind = optarg; break;
        case 'c': connect = optarg; break;
        case 'n': count = strtoull (optarg, NULL, 10); break;
        case 'H': rcvhwm = atoi (optarg); break;
        case 't': timeout_s = atof (optarg); break;
        case 'T': topic = optarg; break;
        default: return s_usage ();
        }
    }
    if ((!bind) == (!connect) || count == 0 || timeout_s <= 0)
        return s_usage ();

    void *ctx = zmq_ctx_new ();
    void *sub = zmq_socket (ctx, ZMQ_SUB);
    int linger = 0, rcvtimeo = 200;
    zmq_setsockopt (sub, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    zmq_setsockopt (sub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt (sub, ZMQ_RCVTIMEO, &rcvtimeo, sizeof rcvtimeo);
    zmq_setsockopt (sub, ZMQ_SUBSCRIBE, topic, strlen (topic));
    int rc = bind ? zmq_bind (sub, bind) : zmq_connect (sub, connect);
    if (rc != 0) {
        fprintf (stderr, "bench_raw: cannot %s %s: %s\n", bind ? "bind" : "connect",
                 bind ? bind : connect, zmq_strerror (errno));
        return 1;
    }

    static bench_hist_t hist; /* 59 KiB: not on the stack */
    bench_hist_init (&hist);
    zmq_msg_t frames[MAX_FRAMES + 1];
    unsigned long long received = 0, short_msgs = 0, no_stamp = 0;
    int64_t first_ns = 0, last_ns = 0, first_stamp = -1;
    double user0, sys0, user1, sys1;
    long switches0, switches1;
    int64_t ready_ns = s_now_ns ();
    int64_t deadline = ready_ns + (int64_t) (timeout_s * 1e9);
    s_cpu (&user0, &sys0, &switches0);
    printf ("ready\n");
    fflush (stdout);

    while (received < count) {
        size_t n = 0;
        bool more = true, failed = false;
        while (more) {
            zmq_msg_t *frame = &frames[n < MAX_FRAMES ? n : MAX_FRAMES];
            zmq_msg_init (frame);
            if (zmq_msg_recv (frame, sub, 0) < 0) {
                zmq_msg_close (frame);
                failed = true;
                break;
            }
            more = zmq_msg_more (frame);
            if (n < MAX_FRAMES)
                n++;
            else
                zmq_msg_close (frame);
        }
        if (failed) {
            for (size_t i = 0; i < n; i++)
                zmq_msg_close (&frames[i]);
            if (errno != EAGAIN && errno != EINTR)
                break;
            if (s_now_ns () > deadline)
                break;
            continue;
        }
        int64_t now = s_now_ns ();
        if (received == 0)
            first_ns = now;
        last_ns = now;
        received++;
        if (n < 2)
            short_msgs++;
        int64_t stamp
            = n >= 3 ? bench_stamp_decode (zmq_msg_data (&frames[2]), zmq_msg_size (&frames[2]))
                     : -1;
        if (stamp < 0)
            no_stamp++;
        else {
            if (first_stamp < 0)
                first_stamp = stamp;
            bench_hist_record (&hist, now - stamp);
        }
        for (size_t i = 0; i < n; i++)
            zmq_msg_close (&frames[i]);
    }
    s_cpu (&user1, &sys1, &switches1);

    printf ("{\"received\":%llu,\"short\":%llu,\"no_stamp\":%llu,\"t_ready_ns\":%lld,"
            "\"t_first_ns\":%lld,\"t_last_ns\":%lld,\"first_stamp_ns\":%lld,"
            "\"cpu_s\":%.6f,\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f,\"ctx_switches\":%ld,",
            received, short_msgs, no_stamp, (long long) ready_ns, (long long) first_ns,
            (long long) last_ns, (long long) first_stamp, (user1 - user0) + (sys1 - sys0),
            user1 - user0, sys1 - sys0, switches1 - switches0);
    bench_hist_write_json (&hist, stdout);
    printf ("}\n");
    fflush (stdout);
    zmq_close (sub);
    zmq_ctx_term (ctx);
    return received == count ? 0 : 1;
}
