/*  prometheus_http - serves GET /metrics over HTTP. See prometheus_http.h.

    The listening socket is made here (getaddrinfo, socket, bind, listen)
    and handed to libmicrohttpd with MHD_OPTION_LISTEN_SOCKET rather than
    letting MHD bind an address itself: MHD only says "it failed", and an
    operator needs to read "127.0.0.1:9464: Address already in use". The
    daemon runs one internal polling thread, so requests are answered one
    at a time; each asks the control socket for METRICS (at most 2 s), so a
    wedged hub answers 503 instead of hanging the scraper.

    Slow clients cannot hold the scraper off: each address may have at
    most PER_CLIENT_LIMIT connections, and a connection must have sent its
    request headers within HEADER_DEADLINE_S of being accepted (or of its
    last answer, with keep-alive), however it trickles them; a guard
    thread shuts down those that did not (MHD's own timeout is reset by
    every byte). A flood of idle connections from many addresses (the
    per-address limit does not see it) cannot take every slot either:
    once fewer than RESERVED_SLOTS of CONNECTION_LIMIT are free, each new
    connection shuts down the oldest one that has not sent a request (the
    newest few excepted: they may not have been read yet), so MHD keeps
    accepting and a fresh client (a /healthz or /readyz probe) is answered
    at once; a client busy with a request is never the one closed.

    Routes:
        GET|HEAD /metrics  200, the Prometheus text (format 0.0.4), or 503
                           with one line saying why when the control
                           socket does not answer with a snapshot
        GET|HEAD /healthz  200 or 503 with a JSON reason: liveness (health.h)
        GET|HEAD /readyz   200 or 503 with a JSON reason: readiness
        GET|HEAD /         200, the live status page (status_page.h), or 503
        GET|HEAD /status.json  its figures: the STATUS answer (status.h)
        GET|HEAD other     404
        other methods      405 with "Allow: GET, HEAD" (HEAD comes with
                           GET in HTTP; MHD leaves the body out for it)
*/
#include "prometheus_http.h"

#include "status_page.h"

#include "clock.h"
#include "control.h"
#include "log.h"
#include "thread.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STATS_TIMEOUT_MS 2000
#define CONNECTION_TIMEOUT_S 10 /* an idle or slow client is dropped */
#define CONNECTION_LIMIT 64
#define PER_CLIENT_LIMIT 8
#define RESERVED_SLOTS 8    /* kept free for a new client by closing the oldest idle one */
#define NEWEST_KEPT 32      /* the last accepted: they may not have been read yet */
#define HEADER_DEADLINE_S 5 /* from accept (or the last answer) to the headers */
#define GUARD_PERIOD_MS 250
#define LISTEN_BACKLOG 64

#define CONTENT_TYPE_METRICS "text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_TEXT "text/plain; charset=utf-8"
#define CONTENT_TYPE_HTML "text/html; charset=utf-8"
#define CONTENT_TYPE_JSON "application/json"

/* A connection as the guard sees it. */
typedef struct s_conn {
    int fd;
    struct timespec since; /* accepted, or its last answer (CLOCK_MONOTONIC) */
    bool headers_in;       /* the current request's headers are complete */
    struct s_conn *next;
} s_conn_t;

struct fh_prometheus_http {
    struct MHD_Daemon *daemon;
    char *control;                 /* the control endpoint to ask for METRICS */
    char *listen;                  /* HOST:PORT as configured, for messages */
    char address[300];             /* HOST:PORT with the port got (port 0 chooses one) */
    char bound_control[256];       /* the control endpoint as bound, once set */
    atomic_bool has_bound_control; /* release: bound_control is written */
    /* The header deadline's guard: the connections, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    s_conn_t *conns;
    size_t open, closing; /* in conns; of them, shut down and not yet closed */
    uint64_t evicted;     /* idle connections closed to make room */
    bool stopping;
    fh_thread_t guard;
};

/* The control endpoint to ask: as bound when the hub said (a tcp port
   '*' is chosen at bind), else as configured. */
static const char *
s_control (fh_prometheus_http_t *self)
{
    return atomic_load_explicit (&self->has_bound_control, memory_order_acquire)
               ? self->bound_control
               : self->control;
}

static double
s_since_s (const struct timespec *since)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    return (double) (now.tv_sec - since->tv_sec) + (double) (now.tv_nsec - since->tv_nsec) / 1e9;
}

/* Under lock, on MHD's thread, at each new connection: while fewer than
   RESERVED_SLOTS slots are free, shuts down the oldest connection waiting
   for a request, but none of the NEWEST_KEPT last accepted (MHD accepts
   up to ten connections at a turn before it reads any: a probe accepted
   in a burst has not been read yet, and must not be the one closed). MHD
   sees the end of the stream and closes it, so it never reaches its
   limit and never stops accepting while the flood is idle. Logged at
   most every 10 s. */
static void
s_make_room (fh_prometheus_http_t *self)
{
    size_t made = 0;
    while (self->open - self->closing > CONNECTION_LIMIT - RESERVED_SLOTS) {
        s_conn_t *oldest = NULL;
        size_t rank = 0;
        for (s_conn_t *conn = self->conns; conn; conn = conn->next)
            if (rank++ >= NEWEST_KEPT && !conn->headers_in && conn->fd >= 0)
                oldest = conn; /* newest first: the last one found */
        if (!oldest)
            break; /* busy with a request, or just accepted: MHD's limit applies */
        shutdown (oldest->fd, SHUT_RDWR);
        oldest->fd = -1; /* once */
        self->closing++;
        made++;
    }
    if (!made)
        return;
    self->evicted += made;
    static fh_ratelimit_t limit; /* MHD's thread's only */
    uint64_t suppressed = 0;
    if (fh_ratelimit_allow (&limit, fh_clock_mono_ns (), 10 * INT64_C (1000000000), &suppressed))
        fh_warning ("prometheus: %s: %zu connections open: closed the oldest idle one to keep "
                    "room for new clients (%llu so far; %llu more such lines not logged)",
                    self->listen, self->open - self->closing + made,
                    (unsigned long long) self->evicted, (unsigned long long) suppressed);
}

/* MHD's connection notices: the guard's list follows them. MHD calls the
   CLOSED notice before it closes the socket, so a descriptor in the list
   is still that connection's. */
static void
s_notify (void *cls, struct MHD_Connection *connection, void **socket_context,
          enum MHD_ConnectionNotificationCode code)
{
    fh_prometheus_http_t *self = cls;
    pthread_mutex_lock (&self->lock);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info
            = MHD_get_connection_info (connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        s_conn_t *conn = info ? calloc (1, sizeof *conn) : NULL;
        if (conn) {
            conn->fd = info->connect_fd;
            clock_gettime (CLOCK_MONOTONIC, &conn->since);
            conn->next = self->conns;
            self->conns = conn;
            self->open++;
            s_make_room (self);
        }
        *socket_context = conn; /* NULL: not guarded (out of memory) */
    }
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        for (s_conn_t **at = &self->conns; *at; at = &(*at)->next)
            if (*at == *socket_context) {
                *at = (*at)->next;
                break;
            }
        s_conn_t *conn = *socket_context;
        self->open--;
        self->closing -= conn->fd < 0;
        free (*socket_context);
        *socket_context = NULL;
    }
    pthread_mutex_unlock (&self->lock);
}

/* The guarded connection of a request, marked: headers in (true) or the
   answer sent, the next request's deadline starting (false). */
static void
s_mark (fh_prometheus_http_t *self, struct MHD_Connection *connection, bool headers_in)
{
    const union MHD_ConnectionInfo *info
        = MHD_get_connection_info (connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    pthread_mutex_lock (&self->lock);
    s_conn_t *conn = info ? info->socket_context : NULL;
    if (conn) {
        conn->headers_in = headers_in;
        if (!headers_in)
            clock_gettime (CLOCK_MONOTONIC, &conn->since);
    }
    pthread_mutex_unlock (&self->lock);
}

static void
s_completed (void *cls, struct MHD_Connection *connection, void **con_cls,
             enum MHD_RequestTerminationCode code)
{
    (void) con_cls;
    (void) code;
    s_mark (cls, connection, false);
}

/* The guard: shuts down connections past the header deadline; MHD sees
   the end of the stream and closes them. */
static void *
s_guard (void *arg)
{
    fh_prometheus_http_t *self = arg;
    pthread_mutex_lock (&self->lock);
    while (!self->stopping) {
        size_t dropped = 0;
        for (s_conn_t *conn = self->conns; conn; conn = conn->next)
            if (!conn->headers_in && conn->fd >= 0
                && s_since_s (&conn->since) > HEADER_DEADLINE_S) {
                shutdown (conn->fd, SHUT_RDWR);
                conn->fd = -1; /* once */
                self->closing++;
                dropped++;
            }
        if (dropped)
            fh_warning ("prometheus: %s: closed %zu connection%s that sent no complete "
                        "request within %d s",
                        self->listen, dropped, dropped == 1 ? "" : "s", HEADER_DEADLINE_S);
        struct timespec until;
        clock_gettime (CLOCK_MONOTONIC, &until);
        until.tv_nsec += GUARD_PERIOD_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait (&self->wake, &self->lock, &until);
    }
    pthread_mutex_unlock (&self->lock);
    return NULL;
}

/* Queues a response whose body is text, copied (MHD frees the copy). */
static enum MHD_Result
s_respond (struct MHD_Connection *connection, unsigned status, const char *content_type,
           const char *text, size_t size, bool allow)
{
    struct MHD_Response *response
        = MHD_create_response_from_buffer (size, (void *) text, MHD_RESPMEM_MUST_COPY);
    if (!response)
        return MHD_NO; /* out of memory: MHD closes the connection */
    enum MHD_Result ok
        = MHD_add_response_header (response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (ok == MHD_YES && allow)
        ok = MHD_add_response_header (response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    if (ok == MHD_YES)
        ok = MHD_queue_response (connection, status, response);
    MHD_destroy_response (response);
    return ok;
}

static enum MHD_Result s_respond_line (struct MHD_Connection *connection, unsigned status,
                                       bool allow, const char *fmt, ...) FANHUB_PRINTF (4, 5);

/* A one-line text/plain answer (errors, 404, 405). */
static enum MHD_Result
s_respond_line (struct MHD_Connection *connection, unsigned status, bool allow, const char *fmt,
                ...)
{
    char line[1024];
    va_list args;
    va_start (args, fmt);
    int n = vsnprintf (line, sizeof line - 1, fmt, args);
    va_end (args);
    size_t len = n < 0 ? 0 : (size_t) n < sizeof line - 1 ? (size_t) n : sizeof line - 2;
    /* One line: a newline inside the reason (from a peer) would split it. */
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[len++] = '\n';
    line[len] = '\0';
    return s_respond (connection, status, CONTENT_TYPE_TEXT, line, len, allow);
}

/* GET /metrics: the Prometheus text of a fresh snapshot, made by the
   control thread (METRICS): nothing is parsed here. */
static enum MHD_Result
s_serve_metrics (fh_prometheus_http_t *self, struct MHD_Connection *connection)
{
    char err[512];
    char *text = fh_control_call (s_control (self), "METRICS", STATS_TIMEOUT_MS, err, sizeof err);
    if (!text)
        return s_respond_line (connection, MHD_HTTP_SERVICE_UNAVAILABLE, false,
                               "fanhub: cannot read the hub's stats: %s", err);
    if (strncmp (text, "ERROR ", 6) == 0) {
        enum MHD_Result ok = s_respond_line (connection, MHD_HTTP_SERVICE_UNAVAILABLE, false,
                                             "fanhub: the control socket answered: %s", text);
        free (text);
        return ok;
    }
    enum MHD_Result ok
        = s_respond (connection, MHD_HTTP_OK, CONTENT_TYPE_METRICS, text, strlen (text), false);
    free (text);
    return ok;
}

/* GET /healthz (HEALTH) or /readyz (READY): the control thread's answer,
   "200 JSON" or "503 JSON" (health.h); a control loop that does not
   answer is itself not live. */
static enum MHD_Result
s_serve_health (fh_prometheus_http_t *self, struct MHD_Connection *connection, const char *command)
{
    char err[512];
    char *text = fh_control_call (s_control (self), command, STATS_TIMEOUT_MS, err, sizeof err);
    if (!text || !(strncmp (text, "200 ", 4) == 0 || strncmp (text, "503 ", 4) == 0)) {
        json_t *json = json_pack ("{s:s, s:[s]}", "status", "fail", "reasons", text ? text : err);
        char *body = json ? json_dumps (json, JSON_COMPACT) : NULL;
        json_decref (json);
        free (text);
        enum MHD_Result ok = body ? s_respond (connection, MHD_HTTP_SERVICE_UNAVAILABLE,
                                               CONTENT_TYPE_JSON, body, strlen (body), false)
                                  : MHD_NO;
        free (body);
        return ok;
    }
    unsigned status = text[0] == '2' ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
    enum MHD_Result ok
        = s_respond (connection, status, CONTENT_TYPE_JSON, text + 4, strlen (text + 4), false);
    free (text);
    return ok;
}

/* GET / (the status page, status_page.h) or /status.json (its figures):
   from the control thread's STATUS answer. The page is made only when
   asked; nothing is kept between requests. */
static enum MHD_Result
s_serve_status (fh_prometheus_http_t *self, struct MHD_Connection *connection, bool page)
{
    char err[512];
    char *text = fh_control_call (s_control (self), "STATUS", STATS_TIMEOUT_MS, err, sizeof err);
    if (!text || strncmp (text, "ERROR ", 6) == 0) {
        enum MHD_Result ok = s_respond_line (connection, MHD_HTTP_SERVICE_UNAVAILABLE, false,
                                             "fanhub: cannot read the hub's status: %s",
                                             text ? text : err);
        free (text);
        return ok;
    }
    if (!page) {
        enum MHD_Result ok
            = s_respond (connection, MHD_HTTP_OK, CONTENT_TYPE_JSON, text, strlen (text), false);
        free (text);
        return ok;
    }
    json_t *status = json_loads (text, 0, NULL);
    free (text);
    char *html = status ? fh_status_page_html (status) : NULL;
    json_decref (status);
    if (!html)
        return s_respond_line (connection, MHD_HTTP_INTERNAL_SERVER_ERROR, false,
                               "fanhub: cannot make the status page (out of memory?)");
    enum MHD_Result ok
        = s_respond (connection, MHD_HTTP_OK, CONTENT_TYPE_HTML, html, strlen (html), false);
    free (html);
    return ok;
}

/* MHD's request callback, on the daemon's thread. MHD calls it once when
   the headers are in, then for each piece of a body, then once more.
   Another method is refused at once, so its body is never read (MHD then
   closes the connection); GET and HEAD answer on the last call, which
   lets MHD keep the connection alive for the scraper's next visit. */
static enum MHD_Result
s_handle (void *cls, struct MHD_Connection *connection, const char *url, const char *method,
          const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    static int s_headers_seen;
    (void) version;
    (void) upload_data;
    fh_prometheus_http_t *self = cls;
    bool get = strcmp (method, MHD_HTTP_METHOD_GET) == 0
               || strcmp (method, MHD_HTTP_METHOD_HEAD) == 0;
    if (!get)
        return s_respond_line (connection, MHD_HTTP_METHOD_NOT_ALLOWED, true,
                               "fanhub: method not allowed: use GET");
    if (!*con_cls) {
        *con_cls = &s_headers_seen;
        s_mark (self, connection, true);
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* a GET with a body: ignored */
        return MHD_YES;
    }
    if (strcmp (url, "/metrics") == 0)
        return s_serve_metrics (self, connection);
    if (strcmp (url, "/healthz") == 0)
        return s_serve_health (self, connection, "HEALTH");
    if (strcmp (url, "/readyz") == 0)
        return s_serve_health (self, connection, "READY");
    if (strcmp (url, "/") == 0 || strcmp (url, "/status.json") == 0)
        return s_serve_status (self, connection, url[1] == '\0');
    return s_respond_line (connection, MHD_HTTP_NOT_FOUND, false,
                           "fanhub: not found: the metrics are at /metrics");
}

static void s_mhd_log (void *cls, const char *fmt, va_list args) FANHUB_PRINTF (2, 0);

/* Connections MHD closed at once: CONNECTION_LIMIT open already. */
static atomic_uint_fast64_t s_refused;

uint64_t
fh_prometheus_http_refused (void)
{
    return atomic_load_explicit (&s_refused, memory_order_relaxed);
}

/* MHD's own complaints (a failed accept, a broken client) go to our log.
   Out of descriptors with no connection open, MHD retries its accept at
   once, forever, logging each time: in its own thread (the only one that
   calls this), the retry is slowed to 10 a second and logged every 10 s
   with the number left out. */
static void
s_mhd_log (void *cls, const char *fmt, va_list args)
{
    fh_prometheus_http_t *self = cls;
    if (strstr (fmt, "reached connection limit")) {
        /* One line per refused connection was a flood of its own. */
        static fh_ratelimit_t limit; /* the MHD thread's only */
        uint64_t suppressed = 0;
        uint64_t refused = atomic_fetch_add (&s_refused, 1) + 1;
        if (fh_ratelimit_allow (&limit, fh_clock_mono_ns (), 10 * INT64_C (1000000000),
                                &suppressed))
            fh_warning ("prometheus: %s: %d connections open, the most it serves: refused a "
                        "connection (%llu so far, hub.http_refused; %llu more such lines not "
                        "logged)",
                        self->listen, CONNECTION_LIMIT, (unsigned long long) refused,
                        (unsigned long long) suppressed);
        return;
    }
    if (strstr (fmt, "resource limit")) {
        static fh_ratelimit_t limit; /* the MHD thread's only */
        uint64_t suppressed = 0;
        if (fh_ratelimit_allow (&limit, fh_clock_mono_ns (), 10 * INT64_C (1000000000),
                                &suppressed))
            fh_warning ("prometheus: %s: out of descriptors, cannot accept (%llu more such "
                        "lines not logged); backing off",
                        self->listen, (unsigned long long) suppressed);
        struct timespec pause = {0, 100000000};
        nanosleep (&pause, NULL);
        return;
    }
    char line[512];
    vsnprintf (line, sizeof line, fmt, args);
    size_t len = strlen (line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    fh_warning ("prometheus: %s: %s", self->listen, line);
}

void
fh_prometheus_http_set_control (fh_prometheus_http_t *self, const char *endpoint)
{
    if (!self || atomic_load (&self->has_bound_control))
        return;
    snprintf (self->bound_control, sizeof self->bound_control, "%s", endpoint);
    atomic_store_explicit (&self->has_bound_control, true, memory_order_release);
}

const char *
fh_prometheus_http_address (const fh_prometheus_http_t *self)
{
    return self->address;
}

/* self->address: the configured host with the port fd got. */
static void
s_note_address (fh_prometheus_http_t *self, int fd)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof addr;
    int port = -1;
    if (getsockname (fd, (struct sockaddr *) &addr, &len) == 0)
        port = addr.ss_family == AF_INET6 ? ntohs (((struct sockaddr_in6 *) &addr)->sin6_port)
                                          : ntohs (((struct sockaddr_in *) &addr)->sin_port);
    const char *colon = strrchr (self->listen, ':');
    if (port < 0 || !colon)
        snprintf (self->address, sizeof self->address, "%s", self->listen);
    else
        snprintf (self->address, sizeof self->address, "%.*s:%d", (int) (colon - self->listen),
                  self->listen, port);
}

/* Splits HOST:PORT (HOST may be [IPv6]) into host and port; host "*" or
   empty means every address. Returns 0, or -1 when the text has no port. */
static int
s_split (const char *address, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon = strrchr (address, ':');
    if (!colon || !colon[1])
        return -1;
    const char *start = address, *end = colon;
    if (*start == '[') {
        if (end[-1] != ']')
            return -1;
        start++;
        end--;
    }
    size_t len = (size_t) (end - start);
    if (len >= hostlen || strlen (colon + 1) >= portlen)
        return -1;
    memcpy (host, start, len);
    host[len] = '\0';
    snprintf (port, portlen, "%s", colon + 1);
    return 0;
}

/* Binds and listens on the first address of `address` that takes it.
   Returns the socket, or -1 with one line in err. */
static int
s_listen (const char *address, char *err, size_t errlen)
{
    char host[256], port[16];
    if (s_split (address, host, sizeof host, port, sizeof port) != 0) {
        snprintf (err, errlen, "prometheus: cannot listen on %s: expected HOST:PORT", address);
        return -1;
    }
    bool any = host[0] == '\0' || strcmp (host, "*") == 0;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
    };
    struct addrinfo *addrs = NULL;
    int rc = getaddrinfo (any ? NULL : host, port, &hints, &addrs);
    if (rc != 0) {
        snprintf (err, errlen, "prometheus: cannot listen on %s: %s", address,
                  rc == EAI_SYSTEM ? strerror (errno) : gai_strerror (rc));
        return -1;
    }
    int fd = -1, why = EADDRNOTAVAIL;
    for (struct addrinfo *ai = addrs; ai && fd < 0; ai = ai->ai_next) {
        fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            why = errno;
            continue;
        }
        /* A restarted hub must not wait out TIME_WAIT; a port that another
           socket listens on still fails with EADDRINUSE. */
        int one = 1;
        (void) setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind (fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen (fd, LISTEN_BACKLOG) != 0) {
            why = errno;
            close (fd);
            fd = -1;
        }
    }
    freeaddrinfo (addrs);
    if (fd < 0)
        snprintf (err, errlen, "prometheus: cannot listen on %s: %s", address, strerror (why));
    return fd;
}

fh_prometheus_http_t *
fh_prometheus_http_new (const fh_config_t *config, char *err, size_t errlen)
{
    if (errlen > 0)
        err[0] = '\0';
    if (!config->metrics.prometheus_listen)
        return NULL;
    fh_prometheus_http_t *self = calloc (1, sizeof *self);
    if (self) {
        self->control = strdup (config->control);
        self->listen = strdup (config->metrics.prometheus_listen);
        pthread_mutex_init (&self->lock, NULL);
        pthread_condattr_t attr;
        pthread_condattr_init (&attr);
        pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
        pthread_cond_init (&self->wake, &attr);
        pthread_condattr_destroy (&attr);
    }
    if (!self || !self->control || !self->listen) {
        snprintf (err, errlen, "prometheus: out of memory");
        fh_prometheus_http_destroy (&self);
        return NULL;
    }
    int fd = s_listen (self->listen, err, errlen);
    if (fd < 0) {
        fh_prometheus_http_destroy (&self);
        return NULL;
    }
    s_note_address (self, fd);
    /* MHD owns fd from here: MHD_stop_daemon closes it. */
    self->daemon
        = MHD_start_daemon (MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
                            NULL, NULL, s_handle, self,
                            /* First, or MHD complains on stderr about the options before it. */
                            MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, self, MHD_OPTION_LISTEN_SOCKET,
                            (MHD_socket) fd, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned int) CONNECTION_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned int) CONNECTION_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            (unsigned int) PER_CLIENT_LIMIT, MHD_OPTION_NOTIFY_CONNECTION, s_notify,
                            self, MHD_OPTION_NOTIFY_COMPLETED, s_completed, self, MHD_OPTION_END);
    if (!self->daemon) {
        /* Whether MHD closed fd on failure is not documented; leaking one
           descriptor (the hub is about to exit) beats closing a number
           another thread may have been given since. */
        snprintf (err, errlen,
                  "prometheus: cannot serve HTTP on %s: libmicrohttpd "
                  "would not start (see the line above)",
                  self->listen);
        fh_prometheus_http_destroy (&self);
        return NULL;
    }
    if (fh_thread_start (&self->guard, "fh:http-guard", s_guard, self, err, errlen) != 0)
        fh_prometheus_http_destroy (&self);
    return self;
}

void
fh_prometheus_http_destroy (fh_prometheus_http_t **self_p)
{
    fh_prometheus_http_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock (&self->lock);
    self->stopping = true;
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
    fh_thread_join (&self->guard);
    /* Joins the daemon's thread: no request runs after this (and every
       connection's CLOSED notice has come). */
    if (self->daemon)
        MHD_stop_daemon (self->daemon);
    for (s_conn_t *conn = self->conns, *next; conn; conn = next) {
        next = conn->next;
        free (conn);
    }
    pthread_cond_destroy (&self->wake);
    pthread_mutex_destroy (&self->lock);
    free (self->control);
    free (self->listen);
    free (self);
    *self_p = NULL;
}
