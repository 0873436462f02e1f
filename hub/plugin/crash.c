/*  crash - what a plugin that kills the process leaves behind. See crash.h. */
#define _GNU_SOURCE 1 /* on_exit */
#include "crash.h"

#include "crashlog.h"
#include "log.h"
#include "message.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* See crash.h: set by the thread itself around plugin calls, read by its
   own signal handler. */
_Thread_local const fh_crash_site_t *fh_crash_tl_site;
_Thread_local const char *fh_crash_tl_where;
_Thread_local const fh_msg_t *fh_crash_tl_msg;
_Thread_local bool fh_crash_tl_alt_stack;

static const int s_fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* The handler runs on an alternate stack: a plugin that overflows its
   thread's stack leaves no room there for the handler's frame. Each
   thread that runs plugin code gets one the first time (freed by the
   key's destructor when the thread ends); the main thread at install. */
#define ALT_STACK_BYTES (64 * 1024)
static pthread_key_t s_alt_stack_key;
static pthread_once_t s_alt_stack_once = PTHREAD_ONCE_INIT;
static bool s_alt_stack_keyed; /* written once, under s_alt_stack_once */

static void
s_alt_stack_free (void *memory)
{
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack (&off, NULL);
    free (memory);
}

static void
s_alt_stack_key_create (void)
{
    s_alt_stack_keyed = pthread_key_create (&s_alt_stack_key, s_alt_stack_free) == 0;
}

void
fh_crash_thread (void)
{
    if (fh_crash_tl_alt_stack)
        return;
    /* The key before any stack: consume may run where fh_crash_install
       never did (the unit tests), and a key never made is some other
       module's key 0. */
    pthread_once (&s_alt_stack_once, s_alt_stack_key_create);
    if (!s_alt_stack_keyed)
        return;
    fh_crash_tl_alt_stack = true; /* tried once: without one, the handler still runs
                            for everything but an overflow */
    size_t size = ALT_STACK_BYTES > SIGSTKSZ ? ALT_STACK_BYTES : (size_t) SIGSTKSZ;
    stack_t stack = {.ss_sp = malloc (size), .ss_size = size, .ss_flags = 0};
    void *memory = stack.ss_sp;
    if (!memory || sigaltstack (&stack, NULL) != 0) {
        free (memory);
        return;
    }
    if (pthread_setspecific (s_alt_stack_key, memory) != 0) {
        s_alt_stack_free (memory);
        return;
    }
}

/* Async-signal-safe appending, a byte at a time. */
static size_t
s_append (char *line, size_t used, size_t size, const char *text)
{
    while (text && *text && used + 1 < size)
        line[used++] = *text++;
    return used;
}

/* Async-signal-safe: at most max bytes of text[0..len-1], anything but
   printable ASCII as '?'. */
static size_t
s_append_bytes (char *line, size_t used, size_t size, const char *text, size_t len, size_t max)
{
    for (size_t i = 0; i < len && i < max && used + 1 < size; i++)
        line[used++] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    return used;
}

/* Async-signal-safe: j past the JSON white space at text[j]. */
static size_t
s_skip_space (const char *text, size_t size, size_t j)
{
    while (j < size && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
        j++;
    return j;
}

/* Async-signal-safe: the string value of the first "msg_id" key of a JSON
   body (a scan, not a parse: no JSON library may run in a signal
   handler); its length, 0 when there is none or it holds escapes. */
static size_t
s_msg_id (fanhub_bytes_t body, const char **start)
{
    static const char key[] = "\"msg_id\"";
    const char *text = body.data;
    size_t size = body.size, klen = sizeof key - 1;
    for (size_t i = 0; i + klen <= size; i++) {
        if (text[i] != '"' || memcmp (text + i, key, klen) != 0)
            continue;
        size_t j = s_skip_space (text, size, i + klen);
        if (j >= size || text[j] != ':')
            continue; /* a value "msg_id", not the key */
        j = s_skip_space (text, size, j + 1);
        if (j >= size || text[j] != '"')
            return 0;
        size_t end = ++j;
        while (end < size && text[end] != '"' && text[end] != '\\')
            end++;
        if (end >= size || text[end] != '"')
            return 0;
        *start = text + j;
        return end - j;
    }
    return 0;
}

/* Async-signal-safe: ", message SEQ (topic T, msg_id M)" for the message
   inside the call, whose crash is appended to the consumer's record in
   its state_dir when it has one. */
static size_t
s_describe_message (char *line, size_t used, size_t size, int sig)
{
    const fh_msg_t *msg = fh_crash_tl_msg;
    if (!msg)
        return used;
    char digits[24];
    size_t n = sizeof digits - 1;
    digits[n] = '\0';
    uint64_t value = msg->seq;
    do
        digits[--n] = (char) ('0' + value % 10);
    while ((value /= 10) && n);
    /* zmq_msg_data and zmq_msg_size only read the frame's fields. */
    fanhub_bytes_t topic = fh_msg_frame (msg, 0), body = fh_msg_frame (msg, 1);
    used = s_append (line, used, size, ", message ");
    used = s_append (line, used, size, digits + n);
    used = s_append (line, used, size, " (topic ");
    used = s_append_bytes (line, used, size, topic.data, topic.size, 200);
    const char *id = NULL;
    size_t id_len = s_msg_id (body, &id);
    if (id_len) {
        used = s_append (line, used, size, ", msg_id ");
        used = s_append_bytes (line, used, size, id, id_len, 120);
    }
    used = s_append (line, used, size, ")");
    int fd = fh_crash_tl_site->record_fd;
    if (fd >= 0) {
        uint32_t crc = fh_crashlog_identity (topic, body);
        used = s_append (line, used, size,
                         fh_crashlog_append (fd, msg->seq, crc, sig) == 0
                             ? ", recorded in its state_dir"
                             : ", NOT recorded in its state_dir (the write failed)");
    }
    return used;
}

static void
s_fatal (int sig)
{
    char line[1024], number[16];
    size_t n = sizeof number - 1;
    number[n] = '\0';
    int value = sig;
    do
        number[--n] = (char) ('0' + value % 10);
    while ((value /= 10) && n);
    const fh_crash_site_t *site = fh_crash_tl_site;
    size_t used = s_append (line, 0, sizeof line, fh_log_to_journal () ? "<2>" : "fanhub: error: ");
    used = s_append (line, used, sizeof line, "fatal signal ");
    used = s_append (line, used, sizeof line, number + n);
    used = s_append (line, used, sizeof line, " (");
    used = s_append (line, used, sizeof line, fh_crashlog_signal_name (sig));
    if (site) {
        used = s_append (line, used, sizeof line, ") inside ");
        used = s_append (line, used, sizeof line, fh_crash_tl_where);
        used = s_append (line, used, sizeof line, " of consumer '");
        used = s_append (line, used, sizeof line, site->consumer);
        used = s_append (line, used, sizeof line, "', plugin ");
        used = s_append (line, used, sizeof line, site->plugin);
        used = s_describe_message (line, used, sizeof line, sig);
    }
    else
        used = s_append (line, used, sizeof line, ") in the hub itself");
    used = s_append (line, used, sizeof line,
                     ": the hub stops now (a restart recovers spilled messages from the "
                     "spool)\n");
    if (line[used - 1] != '\n')
        line[used - 1] = '\n'; /* cut short: still one line */
    ssize_t written = write (STDERR_FILENO, line, used);
    (void) written;
    /* The default action now: the status and core dump are the signal's.
       A raised signal is delivered when this handler returns; a fault
       repeats when the instruction runs again. */
    signal (sig, SIG_DFL);
    raise (sig);
}

/* exit() on a consumer thread: end with the plugin's status before the
   other exit handlers (CZMQ's asserts on sockets still open elsewhere). */
static void
s_on_exit (int status, void *arg)
{
    (void) arg;
    const fh_crash_site_t *site = fh_crash_tl_site;
    if (!site)
        return;
    fh_error ("consumer '%s', plugin %s: called exit(%d) inside %s: the hub stops "
              "with that status (a restart recovers spilled messages from the spool)",
              site->consumer, site->plugin, status, fh_crash_tl_where);
    fflush (stderr);
    _exit (status);
}

void
fh_crash_install (void)
{
    (void) fh_log_to_journal (); /* decided now: the handler only reads it */
    zsys_init ();                /* its exit handler first, so that ours runs before it */
    fh_crash_thread ();
    on_exit (s_on_exit, NULL);
    struct sigaction action;
    memset (&action, 0, sizeof action);
    action.sa_handler = s_fatal;
    action.sa_flags = SA_ONSTACK;
    sigemptyset (&action.sa_mask);
    for (size_t i = 0; i < sizeof s_fatal_signals / sizeof *s_fatal_signals; i++)
        sigaction (s_fatal_signals[i], &action, NULL);
}
