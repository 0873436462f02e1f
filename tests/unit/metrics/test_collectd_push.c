/*  test_collectd_push - pushing PUTVAL lines to collectd's unixsock
    plugin (hub/metrics/collectd_push.c).

    A fake collectd listens on a Unix socket in a temp directory, on its
    own thread: it records every line it reads and answers each the way
    collectd 5.12 does ("0 Success: 1 value has been dispatched." or
    "-1 ..."), or answers nothing, or nonsense, or hangs up, as the case
    asks. The cases drive fh_collectd_push_send with ready lines, and
    fh_collectd_push_tick with the snapshot of a real (never started) hub
    and a made-up clock; one case runs a started hub's control actor
    against a collectd that never answers. What the pusher logs is caught by pointing stderr
    at a file around the calls, so "logged once" is checked by counting.
*/
#include "collectd_push.h"

#include "clock.h"
#include "config.h"
#include "control.h"
#include "hub.h"
#include "stats.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SECOND INT64_C (1000000000)

/* -------------------------------------------------------------------------
   A fake collectd */

typedef enum {
    SERVE_ACCEPT,     /* every line: "0 Success: ..." */
    SERVE_REFUSE_BAD, /* lines with "bad" in them: "-1 ..." */
    SERVE_SILENT,     /* reads, never answers: a hung collectd */
    SERVE_GARBAGE,    /* answers what no collectd says */
    SERVE_HANG_UP,    /* answers the first line, then closes */
} s_mode_t;

typedef struct {
    char path[sizeof ((struct sockaddr_un *) 0)->sun_path];
    int listener;
    int wake[2]; /* a byte here stops the thread */
    pthread_t thread;
    atomic_int mode;
    pthread_mutex_t lock;
    char *received; /* every line read, in order */
    size_t received_len;
    size_t received_room;
    int lines;
    int connections;
    int client_closed; /* connections the pusher closed */
} s_server_t;

static char s_dir[128];
static char s_socket_path[256];

static void
s_record (s_server_t *self, const char *line, size_t len)
{
    pthread_mutex_lock (&self->lock);
    if (self->received_len + len + 1 > self->received_room) {
        size_t room = (self->received_len + len + 1) * 2;
        char *bigger = realloc (self->received, room);
        assert_non_null (bigger);
        self->received = bigger;
        self->received_room = room;
    }
    memcpy (self->received + self->received_len, line, len);
    self->received_len += len;
    self->received[self->received_len] = '\0';
    self->lines++;
    pthread_mutex_unlock (&self->lock);
}

static void
s_write_all (int fd, const char *text)
{
    size_t len = strlen (text), done = 0;
    while (done < len) {
        ssize_t n = send (fd, text + done, len - done, MSG_NOSIGNAL);
        if (n <= 0)
            return; /* the client went away: its problem, and the case's */
        done += (size_t) n;
    }
}

/* Serves one connection; false when told to stop. */
static bool
s_serve (s_server_t *self, int fd)
{
    char buffer[4096];
    size_t have = 0;
    int answered = 0;
    /* The replies to what one recv brought, sent at once: one wake-up of
       the client a batch, not a line (a ping-pong a line took minutes
       under ASan on a machine loaded 20 times over). */
    char replies[sizeof buffer / 2 * sizeof "0 Success: 1 value has been dispatched.\n"];
    while (true) {
        size_t replied = 0;
        struct pollfd items[] = {{fd, POLLIN, 0}, {self->wake[0], POLLIN, 0}};
        if (poll (items, 2, -1) < 0)
            continue;
        if (items[1].revents)
            return false;
        ssize_t n = recv (fd, buffer + have, sizeof buffer - have, 0);
        if (n <= 0) {
            pthread_mutex_lock (&self->lock);
            self->client_closed++;
            pthread_mutex_unlock (&self->lock);
            return true;
        }
        have += (size_t) n;
        char *newline;
        while ((newline = memchr (buffer, '\n', have))) {
            size_t len = (size_t) (newline + 1 - buffer);
            s_record (self, buffer, len);
            bool bad = false;
            for (size_t i = 0; i + 3 <= len && !bad; i++)
                bad = memcmp (buffer + i, "bad", 3) == 0;
            memmove (buffer, buffer + len, have - len);
            have -= len;
            const char *reply = NULL;
            switch (atomic_load (&self->mode)) {
            case SERVE_ACCEPT: reply = "0 Success: 1 value has been dispatched.\n"; break;
            case SERVE_REFUSE_BAD:
                reply = bad ? "-1 1 Type `bad' isn't defined.\n"
                            : "0 Success: 1 value has been dispatched.\n";
                break;
            case SERVE_SILENT: break;
            case SERVE_GARBAGE: reply = "hello there\n"; break;
            case SERVE_HANG_UP:
                if (answered++ > 0) {
                    replies[replied] = '\0';
                    s_write_all (fd, replies);
                    return true;
                }
                reply = "0 Success: 1 value has been dispatched.\n";
                break;
            }
            size_t size = reply ? strlen (reply) : 0;
            assert_true (replied + size < sizeof replies);
            memcpy (replies + replied, reply ? reply : "", size);
            replied += size;
        }
        replies[replied] = '\0';
        s_write_all (fd, replies);
        assert_true (have < sizeof buffer);
    }
}

static void *
s_server_thread (void *arg)
{
    s_server_t *self = arg;
    while (true) {
        struct pollfd items[] = {{self->listener, POLLIN, 0}, {self->wake[0], POLLIN, 0}};
        if (poll (items, 2, -1) < 0)
            continue;
        if (items[1].revents)
            break;
        int fd = accept (self->listener, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock (&self->lock);
        self->connections++;
        pthread_mutex_unlock (&self->lock);
        bool more = s_serve (self, fd);
        close (fd);
        if (!more)
            break;
    }
    return NULL;
}

static s_server_t *
s_server_start (const char *path, s_mode_t mode)
{
    s_server_t *self = calloc (1, sizeof *self);
    assert_non_null (self);
    assert_true (strlen (path) < sizeof self->path);
    memcpy (self->path, path, strlen (path) + 1);
    atomic_init (&self->mode, (int) mode);
    pthread_mutex_init (&self->lock, NULL);
    assert_int_equal (pipe (self->wake), 0);
    self->listener = socket (AF_UNIX, SOCK_STREAM, 0);
    assert_true (self->listener >= 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    memcpy (addr.sun_path, self->path, sizeof addr.sun_path);
    unlink (self->path); /* left by a test that failed before its cleanup */
    assert_int_equal (bind (self->listener, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_int_equal (listen (self->listener, 8), 0);
    assert_int_equal (pthread_create (&self->thread, NULL, s_server_thread, self), 0);
    return self;
}

/* Stops like collectd does: closes everything, removes the socket file. */
static void
s_server_stop (s_server_t **self_p)
{
    s_server_t *self = *self_p;
    assert_int_equal (write (self->wake[1], "x", 1), 1);
    pthread_join (self->thread, NULL);
    close (self->listener);
    close (self->wake[0]);
    close (self->wake[1]);
    unlink (self->path);
    pthread_mutex_destroy (&self->lock);
    free (self->received);
    free (self);
    *self_p = NULL;
}

static int
s_server_lines (s_server_t *self)
{
    pthread_mutex_lock (&self->lock);
    int lines = self->lines;
    pthread_mutex_unlock (&self->lock);
    return lines;
}

static int
s_server_connections (s_server_t *self)
{
    pthread_mutex_lock (&self->lock);
    int connections = self->connections;
    pthread_mutex_unlock (&self->lock);
    return connections;
}

static int
s_server_client_closed (s_server_t *self)
{
    pthread_mutex_lock (&self->lock);
    int closed = self->client_closed;
    pthread_mutex_unlock (&self->lock);
    return closed;
}

/* What the server read, as a new string. */
static char *
s_server_received (s_server_t *self)
{
    pthread_mutex_lock (&self->lock);
    char *copy = strdup (self->received ? self->received : "");
    pthread_mutex_unlock (&self->lock);
    assert_non_null (copy);
    return copy;
}

/* -------------------------------------------------------------------------
   The log: stderr goes to a file while the pusher runs */

static int s_saved_stderr = -1;
static char s_log_path[300];

static void
s_capture_begin (void)
{
    fflush (stderr);
    s_saved_stderr = dup (STDERR_FILENO);
    assert_true (s_saved_stderr >= 0);
    int fd = open (s_log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true (fd >= 0);
    assert_true (dup2 (fd, STDERR_FILENO) >= 0);
    close (fd);
}

/* Puts stderr back; returns what was logged (to free). */
static char *
s_capture_end (void)
{
    fflush (stderr);
    assert_true (dup2 (s_saved_stderr, STDERR_FILENO) >= 0);
    close (s_saved_stderr);
    s_saved_stderr = -1;
    FILE *file = fopen (s_log_path, "rb");
    assert_non_null (file);
    char *text = calloc (1, 65536);
    assert_non_null (text);
    size_t n = fread (text, 1, 65535, file);
    text[n] = '\0';
    fclose (file);
    /* Shown, so a failing case says what the pusher said. */
    fputs (text, stderr);
    return text;
}

static int
s_count (const char *text, const char *what)
{
    int count = 0;
    for (const char *p = text; (p = strstr (p, what)); p += strlen (what))
        count++;
    return count;
}

/* -------------------------------------------------------------------------
   Fixtures */

static fh_config_t *
s_config (const char *socket, const char *collectd_interval)
{
    char yaml[2048], err[512];
    snprintf (yaml, sizeof yaml,
              "bus: {connect: tcp://127.0.0.1:9}\n"
              "metrics:\n"
              "  interval: 1\n"
              "  collectd: {socket: \"%s\"%s%s}\n"
              "consumers:\n"
              "  - name: c1\n"
              "    plugin: %s/sleep.so\n",
              socket, collectd_interval ? ", interval: " : "",
              collectd_interval ? collectd_interval : "", TEST_PLUGIN_DIR);
    fh_config_t *config = fh_config_load_string (yaml, strlen (yaml), "t.yaml", err, sizeof err);
    if (!config)
        fail_msg ("%s", err);
    return config;
}

static fh_collectd_push_t *
s_push_new (const char *socket)
{
    fh_config_t *config = s_config (socket, "2");
    fh_collectd_push_t *push = fh_collectd_push_new (config);
    fh_config_destroy (&config); /* the pusher keeps nothing of it */
    assert_non_null (push);
    return push;
}

static const char s_three[] = "PUTVAL \"h/fanhub-hub/derive-received\" interval=2 N:7\n"
                              "PUTVAL \"h/fanhub-c1/queue_length\" interval=2 N:3\n"
                              "PUTVAL \"h/fanhub-c1/derive-completed\" interval=2 N:4\n";

static const char s_one_bad[] = "PUTVAL \"h/fanhub-hub/derive-received\" interval=2 N:7\n"
                                "PUTVAL \"h/fanhub-c1/bad-thing\" interval=2 N:3\n"
                                "PUTVAL \"h/fanhub-c1/derive-completed\" interval=2 N:4\n";

/* -------------------------------------------------------------------------
   Cases */

static void
test_nothing_without_a_socket (void **state)
{
    (void) state;
    char err[512];
    const char *yaml = "bus: {connect: tcp://127.0.0.1:9}\n"
                       "consumers: [{name: c1, plugin: \"null\"}]\n";
    fh_config_t *config = fh_config_load_string (yaml, strlen (yaml), "t.yaml", err, sizeof err);
    assert_non_null (config);
    assert_null (fh_collectd_push_new (config));
    fh_collectd_push_t *none = NULL;
    fh_collectd_push_destroy (&none); /* safe with NULL */
    fh_config_destroy (&config);
}

static void
test_lines_go_through_and_the_connection_is_kept (void **state)
{
    (void) state;
    s_server_t *server = s_server_start (s_socket_path, SERVE_ACCEPT);
    fh_collectd_push_t *push = s_push_new (s_socket_path);
    s_capture_begin ();
    int first = fh_collectd_push_send (push, s_three);
    int second = fh_collectd_push_send (push, s_three);
    char *log = s_capture_end ();
    assert_int_equal (first, 0);
    assert_int_equal (second, 0);
    char *received = s_server_received (server);
    char twice[sizeof s_three * 2];
    snprintf (twice, sizeof twice, "%s%s", s_three, s_three);
    assert_string_equal (received, twice);
    assert_int_equal (s_server_connections (server), 1);
    /* One line says it works; nothing else. */
    assert_int_equal (s_count (log, "collectd: pushing 3 values to "), 1);
    assert_int_equal (s_count (log, "every 2s"), 1);
    assert_int_equal (s_count (log, "\n"), 1);
    free (received);
    free (log);
    fh_collectd_push_destroy (&push);
    fh_collectd_push_destroy (&push); /* safe twice */
    s_server_stop (&server);
}

static void
test_a_refused_value_is_logged_once (void **state)
{
    (void) state;
    s_server_t *server = s_server_start (s_socket_path, SERVE_REFUSE_BAD);
    fh_collectd_push_t *push = s_push_new (s_socket_path);
    s_capture_begin ();
    int rc[4];
    rc[0] = fh_collectd_push_send (push, s_one_bad);
    rc[1] = fh_collectd_push_send (push, s_one_bad);
    rc[2] = fh_collectd_push_send (push, s_three);
    rc[3] = fh_collectd_push_send (push, s_one_bad);
    char *log = s_capture_end ();
    assert_int_equal (rc[0], 1);
    assert_int_equal (rc[1], 1);
    assert_int_equal (rc[2], 0);
    assert_int_equal (rc[3], 1);
    /* Every line was still sent, on one connection: a refusal is no
       reason to hang up. */
    assert_int_equal (s_server_lines (server), 12);
    assert_int_equal (s_server_connections (server), 1);
    assert_int_equal (s_count (log, "refused 1 of 3 values, the first "
                                    "\"h/fanhub-c1/bad-thing\": 1 Type `bad' isn't defined."),
                      2); /* at first, and again after it took all once */
    assert_int_equal (s_count (log, "takes every value again"), 1);
    assert_int_equal (s_count (log, "cannot push"), 0);
    free (log);
    fh_collectd_push_destroy (&push);
    s_server_stop (&server);
}

static void
test_collectd_down_is_logged_once_until_it_works (void **state)
{
    (void) state;
    fh_collectd_push_t *push = s_push_new (s_socket_path);
    s_capture_begin ();
    int rc[3];
    for (int i = 0; i < 3; i++)
        rc[i] = fh_collectd_push_send (push, s_three);
    char *log = s_capture_end ();
    for (int i = 0; i < 3; i++)
        assert_int_equal (rc[i], -1);
    assert_int_equal (s_count (log, "collectd: cannot push to "), 1);
    assert_int_equal (s_count (log, "connect: No such file or directory (is collectd "
                                    "running, with LoadPlugin unixsock"),
                      1);
    assert_int_equal (s_count (log, "\n"), 1);
    free (log);

    s_server_t *server = s_server_start (s_socket_path, SERVE_ACCEPT);
    s_capture_begin ();
    int back = fh_collectd_push_send (push, s_three);
    log = s_capture_end ();
    assert_int_equal (back, 0);
    assert_int_equal (s_count (log, "collectd: pushing to "), 1);
    assert_int_equal (s_count (log, " again"), 1);
    free (log);

    /* It goes away again: that is news again, once. */
    s_server_stop (&server);
    s_capture_begin ();
    rc[0] = fh_collectd_push_send (push, s_three);
    rc[1] = fh_collectd_push_send (push, s_three);
    log = s_capture_end ();
    assert_int_equal (rc[0], -1);
    assert_int_equal (rc[1], -1);
    assert_int_equal (s_count (log, "collectd: cannot push to "), 1);
    free (log);
    fh_collectd_push_destroy (&push);
}

static void
test_a_restart_between_batches_goes_unnoticed (void **state)
{
    (void) state;
    s_server_t *server = s_server_start (s_socket_path, SERVE_ACCEPT);
    fh_collectd_push_t *push = s_push_new (s_socket_path);
    s_capture_begin ();
    int before = fh_collectd_push_send (push, s_three);
    s_server_stop (&server);
    server = s_server_start (s_socket_path, SERVE_ACCEPT);
    /* The kept connection is dead; the batch goes on a new one. */
    int after = fh_collectd_push_send (push, s_three);
    char *log = s_capture_end ();
    assert_int_equal (before, 0);
    assert_int_equal (after, 0);
    char *received = s_server_received (server);
    assert_string_equal (received, s_three);
    assert_int_equal (s_count (log, "warning"), 0);
    free (received);
    free (log);
    fh_collectd_push_destroy (&push);
    s_server_stop (&server);
}

static void
test_a_hung_collectd_costs_a_bounded_wait (void **state)
{
    (void) state;
    s_server_t *server = s_server_start (s_socket_path, SERVE_SILENT);
    fh_collectd_push_t *push = s_push_new (s_socket_path);
    s_capture_begin ();
    int hung = fh_collectd_push_send (push, s_three);
    atomic_store (&server->mode, SERVE_ACCEPT);
    /* The connection was closed: this batch comes on a new one. */
    int back = fh_collectd_push_send (push, s_three);
    char *log = s_capture_end ();
    assert_int_equal (hung, -1);
    assert_int_equal (back, 0);
    assert_int_equal (s_server_connections (server), 2);
    assert_int_equal (s_count (log, "collectd answered 0 of 3 values and then nothing for "), 1);
    assert_int_equal (s_count (log, "collectd: pushing to "), 1);
    free (log);
    fh_collectd_push_destroy (&push);
    s_server_stop (&server);
}

static void
test_nonsense_and_hang_ups_are_failures (void **state)
{
    (void) state;
    s_server_t *server = s_server_start (s_socket_path, SERVE_GARBAGE);
    fh_collectd_push_t *push = s_push_new (s_socket_path);
    s_capture_begin ();
    int garbage = fh_collectd_push_send (push, s_three);
    char *log = s_capture_end ();
    assert_int_equal (garbage, -1);
    assert_int_equal (s_count (log, "unexpected reply 'hello there'"), 1);
    free (log);

    /* Hung up on in the middle of a batch: not retried, it was not a
       connection left over from before. */
    atomic_store (&server->mode, SERVE_HANG_UP);
    fh_collectd_push_t *other = s_push_new (s_socket_path);
    s_capture_begin ();
    int hang_up = fh_collectd_push_send (other, s_three);
    log = s_capture_end ();
    assert_int_equal (hang_up, -1);
    assert_int_equal (s_count (log, "collectd closed the connection"), 1);
    free (log);
    fh_collectd_push_destroy (&other);
    fh_collectd_push_destroy (&push);
    s_server_stop (&server);
}

static void
test_a_large_batch_is_pipelined (void **state)
{
    (void) state;
    /* Far more than both socket buffers: lines and replies must flow at
       the same time, or each side waits for the other forever. */
    enum { LINES = 20000 };
    size_t room = (size_t) LINES * 64;
    char *lines = malloc (room);
    assert_non_null (lines);
    size_t len = 0;
    for (int i = 0; i < LINES; i++)
        len += (size_t) snprintf (lines + len, room - len,
                                  "PUTVAL \"h/fanhub-c%d/queue_length\" interval=2 N:%d\n", i, i);
    s_server_t *server = s_server_start (s_socket_path, SERVE_ACCEPT);
    fh_collectd_push_t *push = s_push_new (s_socket_path);
    /* Correctness, not speed: under sanitizers on a busy machine 20,000
       round trips may take longer than the production limits. */
    fh_collectd_push_set_limits (push, 60000, 120000);
    s_capture_begin ();
    int rc = fh_collectd_push_send (push, lines);
    char *log = s_capture_end ();
    assert_int_equal (rc, 0);
    assert_int_equal (s_server_lines (server), LINES);
    char *received = s_server_received (server);
    assert_string_equal (received, lines);
    free (received);
    free (log);
    free (lines);
    fh_collectd_push_destroy (&push);
    s_server_stop (&server);
}

static void
test_a_socket_path_too_long (void **state)
{
    (void) state;
    char path[400];
    memset (path, 'x', sizeof path - 1);
    path[0] = '/';
    path[sizeof path - 1] = '\0';
    fh_collectd_push_t *push = s_push_new (path);
    s_capture_begin ();
    int rc = fh_collectd_push_send (push, s_three);
    char *log = s_capture_end ();
    assert_int_equal (rc, -1);
    assert_int_equal (s_count (log, "the socket path is longer than 107 bytes"), 1);
    free (log);
    fh_collectd_push_destroy (&push);
}

/* As the control actor does before it takes the hub lock. */
static void
s_read_process (fh_stats_t *stats)
{
    assert_non_null (stats);
    fh_process_t reading;
    fh_process_read (&reading);
    fh_stats_set_process (stats, &reading);
}

/* The collectd values of one consumer: one per registry row with a
   collectd type, two for a latency (_p99 and _mean). */
static int
s_consumer_values (void)
{
    int values = 0;
    for (size_t id = 0; id < FH_METRIC_COUNT; id++)
        if (fh_metrics[id].scope == FH_SCOPE_CONSUMER && fh_metrics[id].collectd)
            values += fh_metrics[id].type == FH_METRIC_HISTOGRAM ? 2 : 1;
    return values;
}

static void
test_tick_pushes_the_snapshot_on_its_grid (void **state)
{
    (void) state;
    fh_config_t *config = s_config (s_socket_path, "2");
    char err[512];
    fh_hub_t *hub = fh_hub_new (config, SHIPPED_PLUGIN_DIR, err, sizeof err);
    if (!hub)
        fail_msg ("%s", err);
    fh_stats_t *stats = fh_stats_new (hub);
    s_read_process (stats);
    assert_non_null (stats);
    fh_collectd_push_t *push = fh_collectd_push_new (config);
    assert_non_null (push);
    s_server_t *server = s_server_start (s_socket_path, SERVE_ACCEPT);
    /* Every row with a collectd type (docs/metrics.md): 17 of the hub
       (two for end_to_end), 6 of the process, 3 per endpoint, and the
       consumer's rows (two per latency); no notification. */
    const int batch = 17 + 6 + 3 + s_consumer_values ();
    const int64_t t = 1000 * SECOND;

    /* Made-up times, and whether a batch is due then: the first tick
       sends, then every 2 s from it; missed points are skipped. */
    static const struct {
        int64_t at_ms;
        bool due;
    } ticks[] = {
        {0, true},    {1000, false}, {1999, false}, {2000, true}, {3000, false},
        {4100, true}, {7500, true},  {7999, false}, {8000, true}, {9999, false},
    };
    s_capture_begin ();
    int sent[sizeof ticks / sizeof ticks[0]];
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        fh_collectd_push_tick (push, stats, t + ticks[i].at_ms * INT64_C (1000000));
        sent[i] = s_server_lines (server);
    }
    fh_collectd_push_tick (NULL, stats, t); /* no pusher: nothing */
    char *log = s_capture_end ();
    int expected = 0;
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        expected += ticks[i].due ? batch : 0;
        if (sent[i] != expected)
            fail_msg ("tick at %lld ms: %d lines sent, expected %d", (long long) ticks[i].at_ms,
                      sent[i], expected);
    }
    char *received = s_server_received (server);
    assert_non_null (strstr (received, "/fanhub-hub/derive-received\" interval=2 N:0\n"));
    assert_non_null (strstr (received, "/fanhub-c1/queue_length\" interval=2 N:0\n"));
    assert_non_null (strstr (received, "/fanhub-c1/derive-completed\" interval=2 N:0\n"));
    char hostname[256] = "";
    gethostname (hostname, sizeof hostname);
    if (!strpbrk (hostname, "/\"\\ ")) {
        char start[300];
        snprintf (start, sizeof start, "PUTVAL \"%s/fanhub-hub/", hostname);
        assert_int_equal (strncmp (received, start, strlen (start)), 0);
    }
    char pushing[64];
    snprintf (pushing, sizeof pushing, "collectd: pushing %d values to ", batch);
    assert_int_equal (s_count (log, pushing), 1);
    assert_null (strstr (received, "PUTNOTIF"));
    free (received);
    free (log);
    fh_collectd_push_destroy (&push);
    s_server_stop (&server);
    fh_stats_destroy (&stats);
    fh_hub_destroy (&hub);
    fh_config_destroy (&config);
}

static void
test_interval_defaults_to_metrics_interval (void **state)
{
    (void) state;
    fh_config_t *config = s_config (s_socket_path, NULL);
    fh_collectd_push_t *push = fh_collectd_push_new (config);
    assert_non_null (push);
    char err[512];
    fh_hub_t *hub = fh_hub_new (config, SHIPPED_PLUGIN_DIR, err, sizeof err);
    if (!hub)
        fail_msg ("%s", err);
    fh_stats_t *stats = fh_stats_new (hub);
    s_read_process (stats);
    s_server_t *server = s_server_start (s_socket_path, SERVE_ACCEPT);
    s_capture_begin ();
    fh_collectd_push_tick (push, stats, 5 * SECOND);
    fh_collectd_push_tick (push, stats, 6 * SECOND - 1);
    fh_collectd_push_tick (push, stats, 6 * SECOND);
    char *log = s_capture_end ();
    assert_int_equal (s_server_lines (server), 2 * (17 + 6 + 3 + s_consumer_values ()));
    char *received = s_server_received (server);
    assert_non_null (strstr (received, "/fanhub-c1/queue_length\" interval=1 N:0\n"));
    free (received);
    free (log);
    fh_collectd_push_destroy (&push);
    s_server_stop (&server);
    fh_stats_destroy (&stats);
    fh_hub_destroy (&hub);
    fh_config_destroy (&config);
}

/* Takes the hub's lock once, on a thread of its own: the case waits for
   it with a deadline, and a lock that is never free fails the case
   rather than hanging it. */
typedef struct {
    fh_hub_t *hub;
    atomic_bool took;
} s_locker_t;

static void *
s_locker (void *arg)
{
    s_locker_t *locker = arg;
    fh_hub_lock (locker->hub);
    atomic_store (&locker->took, true);
    fh_hub_unlock (locker->hub);
    return NULL;
}

/* Issue 29: the control actor used to push to collectd with the hub's
   lock held, so a collectd that reads and does not answer held every
   reload (and bus.amqp's deliveries) for as long as the pusher waited.
   Now the batch is made under the lock and sent after it: while the
   pusher waits for this collectd's answers (its limits made longer than
   any deadline here, so it still waits at the end), the lock is free. */
static void
test_a_slow_collectd_does_not_hold_the_hub_lock (void **state)
{
    (void) state;
    char yaml[2048], err[512];
    snprintf (yaml, sizeof yaml,
              "bus: {connect: tcp://127.0.0.1:9}\n"
              "control: ipc://%s/control.sock\n"
              "metrics: {interval: 1, collectd: {socket: \"%s\"}}\n"
              "consumers:\n"
              "  - name: c1\n"
              "    plugin: %s/sleep.so\n",
              s_dir, s_socket_path, TEST_PLUGIN_DIR);
    fh_config_t *config = fh_config_load_string (yaml, strlen (yaml), "t.yaml", err, sizeof err);
    if (!config)
        fail_msg ("%s", err);
    fh_hub_t *hub = fh_hub_new (config, SHIPPED_PLUGIN_DIR, err, sizeof err);
    if (!hub || fh_hub_start (hub, err, sizeof err) != 0)
        fail_msg ("hub: %s", err);
    s_server_t *server = s_server_start (s_socket_path, SERVE_SILENT);
    fh_collectd_push_set_default_limits (3600 * 1000, 3600 * 1000);
    fh_control_t *control = fh_control_new (hub, err, sizeof err);
    fh_collectd_push_set_default_limits (1000, 2000);
    if (!control)
        fail_msg ("control: %s", err);

    /* The first tick (a second after the start) sends its batch: once a
       line is here, the pusher waits for answers that do not come. */
    int64_t end = fh_clock_mono_ns () + 30 * SECOND;
    while (s_server_lines (server) == 0 && fh_clock_mono_ns () < end)
        nanosleep (&(struct timespec){0, 1000000}, NULL);
    assert_true (s_server_lines (server) > 0);
    s_locker_t locker = {.hub = hub};
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_locker, &locker), 0);
    end = fh_clock_mono_ns () + 30 * SECOND;
    while (!atomic_load (&locker.took) && fh_clock_mono_ns () < end)
        nanosleep (&(struct timespec){0, 1000000}, NULL);
    bool took = atomic_load (&locker.took);
    /* The same batch still waits for its answers: nothing gave up yet. */
    int closed = s_server_client_closed (server);
    int connections = s_server_connections (server);
    /* collectd goes away: the pusher gives up, the actor goes on. */
    s_server_stop (&server);
    pthread_join (thread, NULL);
    assert_true (took);
    assert_int_equal (closed, 0);
    assert_int_equal (connections, 1);

    fh_control_destroy (&control);
    fh_hub_stop_receiving (hub);
    end = fh_clock_mono_ns () + 30 * SECOND;
    while (!fh_hub_drained (hub) && fh_clock_mono_ns () < end)
        nanosleep (&(struct timespec){0, 1000000}, NULL);
    assert_true (fh_hub_drained (hub));
    fh_hub_destroy (&hub);
    fh_config_destroy (&config);
}

static int
s_setup (void **state)
{
    (void) state;
    if (!mkdtemp (test_tmp_template (s_dir, sizeof s_dir, "fanhub-collectd-test")))
        return -1;
    snprintf (s_socket_path, sizeof s_socket_path, "%s/collectd.sock", s_dir);
    snprintf (s_log_path, sizeof s_log_path, "%s/log", s_dir);
    return 0;
}

static int
s_teardown (void **state)
{
    (void) state;
    unlink (s_socket_path);
    unlink (s_log_path);
    rmdir (s_dir);
    return 0;
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_nothing_without_a_socket),
        cmocka_unit_test (test_lines_go_through_and_the_connection_is_kept),
        cmocka_unit_test (test_a_refused_value_is_logged_once),
        cmocka_unit_test (test_collectd_down_is_logged_once_until_it_works),
        cmocka_unit_test (test_a_restart_between_batches_goes_unnoticed),
        cmocka_unit_test (test_a_hung_collectd_costs_a_bounded_wait),
        cmocka_unit_test (test_nonsense_and_hang_ups_are_failures),
        cmocka_unit_test (test_a_large_batch_is_pipelined),
        cmocka_unit_test (test_a_socket_path_too_long),
        cmocka_unit_test (test_tick_pushes_the_snapshot_on_its_grid),
        cmocka_unit_test (test_interval_defaults_to_metrics_interval),
        cmocka_unit_test (test_a_slow_collectd_does_not_hold_the_hub_lock),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
