/*  worker - what the files of the worker plugin share.

    The plugin runs a consumer's code in long-lived child processes and
    speaks docs/worker-protocol.md with them. Split by job:
      worker.c   the descriptor, the options (worker and its python
                 preset), init, check, fini and consume
      wire.c     the protocol's frames: encoding and decoding, no I/O
      proc.c     one child process: spawn, signal, reap, its log lines
      crash.c    the crashes each message was in flight for (the blame),
                 and settling what a dead or hung process held
      life.c     a process's life cycle: start, handshake, end, restart
                 with backoff, halt, quit (called by loop.c)
      loop.c     the I/O thread: hands messages to processes, reads their
                 answers and frames, logs their lines, times out the silent
      publish.c  a worker's PUBLISH frames onto the consumer's publish:
*/
#ifndef WORKER_H_INCLUDED
#define WORKER_H_INCLUDED

#include <fanhub/consumer.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define WORKER_PROTOCOL 2     /* what the hub speaks: HELLO says it */
#define WORKER_PROTOCOL_MIN 1 /* the oldest READY it accepts */
/* Frames from a worker: answers and logs are small; a longer one is a
   protocol error. From the hub: a message may be as large as the bus
   allows. */
#define WORKER_FRAME_MAX_IN (UINT32_C (1) << 20)
#define WORKER_FRAME_MAX_OUT (UINT32_C (1) << 30)
#define WORKER_REASON_MAX 255
#define WORKER_LINE_MAX 1024                         /* bytes of one stdout/stderr line logged */
#define WORKER_LINE_COST_NS (10 * INT64_C (1000000)) /* 100 lines a second */
#define WORKER_LINE_BURST_NS (INT64_C (1000000000))  /* 100 at once */

enum {
    WORKER_VERDICT_OK = 0,
    WORKER_VERDICT_RETRY = 1,
    WORKER_VERDICT_FAIL = 2,
    WORKER_VERDICT_DROP = 3,
};

/* A growable byte buffer; data[0..size) is the content. */
typedef struct {
    uint8_t *data;
    size_t size, cap;
} wbuf_t;

int wbuf_reserve (wbuf_t *self, size_t more);
int wbuf_append (wbuf_t *self, const void *data, size_t size);
/* Drops the first n bytes. */
void wbuf_shift (wbuf_t *self, size_t n);
void wbuf_free (wbuf_t *self);

/* wire.c */

/* Appends one frame: length, type, payload. -1 when out of memory. */
int wire_frame (wbuf_t *out, uint8_t type, const void *payload, size_t size);
/* One message frame ('M') as docs/worker-protocol.md lays it out. */
typedef struct {
    uint64_t ticket, seq;
    uint32_t attempt;
    int64_t received_ns;
    const char *id; /* msg_id, or NULL */
    size_t id_size;
    const fanhub_bytes_t *frames;
    size_t count;
} wire_msg_t;
int wire_message (wbuf_t *out, const wire_msg_t *msg);
/* The ticket's place in an encoded message frame (to set it later). */
#define WIRE_TICKET_OFFSET 5

/* The next complete frame in data[0..size): 1 with *type, the payload
   and *used (bytes of the whole frame); 0 when more bytes are needed; -1
   when the frame is broken (err says how). */
int wire_next (const uint8_t *data, size_t size, uint32_t max, uint8_t *type,
               const uint8_t **payload, size_t *payload_size, size_t *used, char *err,
               size_t errlen);
/* An answer's payload: 0, or -1 when malformed. */
int wire_answer (const uint8_t *payload, size_t size, uint64_t *ticket, uint8_t *verdict,
                 const char **reason, size_t *reason_size);
/* A PUBLISH payload: u16 topic length (big-endian), the topic (non-empty
   UTF-8 without NUL), the body (the rest, maybe empty). 0, or -1 with
   what is wrong in err. */
int wire_publish (const uint8_t *payload, size_t size, const char **topic, size_t *topic_size,
                  const uint8_t **body, size_t *body_size, char *err, size_t errlen);
/* The msg_id of a JSON body (the top-level "msg_id" string) into id
   (size bytes, NUL-terminated): its length, 0 when it has none. */
size_t wire_msg_id (const void *body, size_t body_size, char *id, size_t size);

/* What a wait status says: "exited with status 1", "killed by signal 11
   (SIGSEGV)". */
void wire_status_text (int status, char *out, size_t size);
const char *wire_signal_name (int sig);

/* proc.c */

typedef enum {
    PROC_DOWN,     /* no process; restart_at says when to try */
    PROC_HELLO,    /* started, HELLO sent, waiting for READY */
    PROC_READY,    /* takes messages */
    PROC_QUITTING, /* QUIT sent, or halted: takes no more */
} proc_state_t;

typedef struct {
    char data[WORKER_LINE_MAX];
    size_t size;
    bool cut; /* the current line was longer than data: rest dropped */
} proc_line_t;

typedef struct {
    size_t index;
    proc_state_t state;
    pid_t pid;
    pid_t last_pid;     /* pid's value once reaped (for the log) */
    char tag[64];       /* FANHUB_WORKER_TAG=...: its environment's mark */
    int status;         /* its wait status once reaped, else -1 */
    int sock, out, err; /* -1 when closed */
    wbuf_t in, outq;
    int64_t started_ns;
    int64_t deadline_ns;   /* HELLO: handshake; QUITTING: the kill */
    int64_t restart_at_ns; /* DOWN */
    unsigned failures;     /* starts in a row that ended early: the backoff */
    size_t in_flight;      /* messages sent and not answered */
    /* Its messages in the order it was sent them (job slots), in_flight
       of them: the oldest not started starts when one it runs is
       answered (a worker works its messages one after another). A ring
       of prefetch slots from held_head (loop.c's s_held): the answer to
       the oldest, the usual one, takes it off without moving the rest. */
    size_t *held;
    size_t held_head;
    size_t running;       /* of those, started and not answered */
    bool refused_for_now; /* at start: its consumer's start-up failed */
    bool solo;            /* holds a message a dead worker held: alone */
    bool ever_started;
    proc_line_t out_line, err_line;
    char last_err[256]; /* the last stderr line, for errors */
    char name[128];     /* READY's name and version */
    long long protocol; /* READY's protocol (1 to WORKER_PROTOCOL_MAX) */
} proc_t;

/* Starts the process of p: argv with the socket's end on fd 3, stdin
   /dev/null, stdout and stderr pipes, in a process group of its own,
   environment plus FANHUB_WORKER_FD=3 and its FANHUB_WORKER_TAG. 0, or -1
   with err. */
int proc_spawn (proc_t *p, char *const argv[], char *const envp[], char *err, size_t errlen);
/* Kills the process group with SIGKILL and reaps it: its wait status
   (or -1 when there was none). Closes everything. Safe when down.
   Whatever the process started goes too, setsid children and orphans
   included: every process whose environment carries its tag, and their
   descendants (proc.c). */
int proc_kill (proc_t *p);
/* Reaps it if it has exited: its status, else -1 (not yet). */
int proc_try_reap (proc_t *p);
/* Reads fd (stdout or stderr of p) and hands each whole line to emit;
   false at end of file. */
bool proc_read_lines (proc_t *p, int fd, proc_line_t *line,
                      void (*emit) (void *arg, proc_t *p, bool is_err, const char *line),
                      void *arg);
void proc_close (proc_t *p);

/* loop.c and worker.c */

/* One message the plugin holds: from consume until its answer. */
typedef struct {
    bool used;
    bool suspect;  /* a dead worker held it: send it alone */
    uint64_t wire; /* its ticket on the wire */
    fanhub_ticket_t ticket;
    uint64_t seq;
    uint32_t attempt;
    uint8_t *frame; /* the encoded 'M' frame until answered (sent again
                       when a hung neighbour's kill took it uncharged) */
    size_t frame_size;
    ssize_t proc;        /* -1 while waiting */
    int64_t consumed_ns; /* consume's clock */
    bool started;        /* its worker works on it: host->ticket_started */
    int64_t started_ns;  /* since then its consume_timeout runs */
} job_t;

/* Crashes a message has been in flight for (by seq). */
typedef struct {
    uint64_t seq;
    unsigned crashes;
    bool hung_out; /* its max_crashes-th was a hang the hub expired: its
                      next consume fails it (the ticket was the hub's) */
} crash_t;

typedef struct worker {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    const char *name;
    char **argv, **envp;
    char *hello_options; /* the options as JSON text */
    /* Its window: prefetch messages a process, all processes together,
       within the consumer's max_pending; the hub keeps the rest in the
       consumer's queue (host->set_window). The job table has room for
       twice that: a hung process's message the hub expired keeps its
       slot until the process is killed, while the hub's retry of it (and
       the window's others) come in. */
    int64_t window, cap, prefetch, consume_timeout_ns, max_attempts;
    uint64_t max_crashes;
    int64_t handshake_ns, restart_ns, restart_max_ns, shutdown_ns;

    size_t nprocs;
    proc_t *procs;

    pthread_mutex_t lock; /* guards the jobs, the wait queue, crashes, halt */
    job_t *jobs;
    size_t *free_slots, nfree;
    size_t *waitq, whead, wcount; /* a ring of job slots, capacity cap */
    uint64_t serial;
    crash_t *crashes;
    size_t ncrashes, crashcap;
    bool halted;
    char halt_reason[256];

    int wake_fd; /* eventfd: consume and fini wake the thread */
    pthread_t thread;
    bool thread_made;
    bool running; /* init has returned: a failed start is retried, not fatal */
    atomic_bool stop;
    /* init waits for the first handshakes under lock: */
    pthread_cond_t ready_cond;
    size_t ready_count;
    bool start_failed;
    size_t start_down; /* starts the consumer refused for now: init goes on */
    char start_err[512];

    /* log lines of the workers, rate-limited (the I/O thread's) */
    int64_t line_credit_ns, line_last_ns;
    uint64_t lines_dropped;
    int64_t lines_said_ns; /* the last "lines not logged" notice */

    /* The consumer's own figures (ABI 1.6; NULL on an older hub): the
       processes that ended while they should run, those of them killed
       for a hang, and the messages sent and not answered yet. */
    fanhub_metric_t *m_crashes, *m_hangs, *m_pending;
} worker_t;

/* CLOCK_MONOTONIC in ns. Inline: loop.c and worker.c both read it, and
   neither calls the other for it (lint.call_cycles). */
static inline int64_t
worker_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A message to complete once the lock is let go. */
typedef struct {
    fanhub_ticket_t ticket;
    fanhub_result_t result;
    char reason[WORKER_REASON_MAX + 1];
} worker_done_t;

/* Frees a job's slot. Under lock. */
void worker_free_job (worker_t *w, job_t *job);

/* crash.c: the crashes of each message, under lock. */

crash_t *crash_find (worker_t *w, uint64_t seq);
void crash_forget (worker_t *w, uint64_t seq);
/* One more crash of seq: its count (at least 1, even out of memory). */
unsigned crash_add (worker_t *w, uint64_t seq);
/* True when a dead worker held the message seq: it goes alone to an idle
   worker. */
bool crash_suspect (worker_t *w, uint64_t seq);
/* True when seq hung its worker max_crashes times: the count is
   forgotten and reason says it. */
bool crash_hung_out (worker_t *w, uint64_t seq, char *reason, size_t size);
/* The messages p held when it died (cause): each one attempt, into done
   (cap entries at most) to complete; a hung p's started ones are the
   hub's to expire and the rest go back to the wait queue. Answers how
   many are in done. */
size_t crash_settle (worker_t *w, proc_t *p, const char *cause, bool hung, int64_t now,
                     worker_done_t *done);
/* life.c: a process's life cycle, on the I/O thread. */

/* Spawns p and queues its HELLO; a failure is a failed start. */
void life_start (worker_t *w, proc_t *p, int64_t now);
/* A start that failed (spawn, no READY, exit before READY): killed, its
   restart scheduled; said by init while it waits, else logged. */
void life_start_failed (worker_t *w, proc_t *p, const char *why, int64_t now);
/* READY and ERROR, the answers to HELLO. */
void life_ready (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now);
void life_refused (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now);
/* p is gone or must go: killed, reaped, its messages settled
   (crash_settle), its restart scheduled unless stopping or halted. cause
   NULL: its exit status says why. hung: killed for holding a message past
   consume_timeout. */
void life_end (worker_t *w, proc_t *p, const char *cause, bool hung, int64_t now);
/* HALT from p: the consumer takes no more; what waits fails, and every
   ready process is asked to QUIT. */
void life_halt (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, int64_t now);
/* At stop: QUIT to every ready process; the others are killed. */
void life_quit_all (worker_t *w, int64_t now);

/* publish.c: a PUBLISH frame of p's (protocol 2) onto the consumer's
   publish: endpoints (host->publish, ABI 1.5). True when taken (a
   refusal by the hub is logged by the hub, counted in publish_failed);
   false with why set for a protocol error (the process is killed). */
bool worker_publish_frame (worker_t *w, proc_t *p, const uint8_t *payload, size_t size, char *why,
                           size_t whylen);

/* The I/O thread. */
void *loop_thread (void *arg);
/* Wakes it (after new jobs, or to stop). */
void loop_wake (worker_t *w);

#endif
