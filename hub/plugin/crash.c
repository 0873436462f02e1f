/*  crash - what a plugin that kills the process leaves behind. See crash.h. */
#define _GNU_SOURCE 1 /* on_exit */
#include "crash.h"

#include "log.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set by the thread itself around consume, read by its own signal
   handler: a thread-local of the executable is async-signal-safe. */
static _Thread_local const char *tl_consumer;
static _Thread_local const char *tl_plugin;
static _Thread_local const char *tl_body; /* the message's body, or NULL */
static _Thread_local size_t tl_body_size;
static _Thread_local uint64_t tl_seq;

static const int s_fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* The handler runs on an alternate stack: a plugin that overflows its
   thread's stack leaves no room there for the handler's frame. Each
   thread that runs plugin code gets one the first time (freed by the
   key's destructor when the thread ends); the main thread at install. */
#define ALT_STACK_BYTES (64 * 1024)
static pthread_key_t s_alt_stack_key;
static pthread_once_t s_alt_stack_once = PTHREAD_ONCE_INIT;
static bool s_alt_stack_keyed; /* written once, under s_alt_stack_once */
static _Thread_local bool tl_alt_stack;

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
    if (tl_alt_stack)
        return;
    /* The key before any stack: consume may run where fh_crash_install
       never did (the unit tests), and a key never made is some other
       module's key 0. */
    pthread_once (&s_alt_stack_once, s_alt_stack_key_create);
    if (!s_alt_stack_keyed)
        return;
    tl_alt_stack = true; /* tried once: without one, the handler still runs
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

void
fh_crash_enter (const char *consumer, const char *plugin)
{
    fh_crash_thread ();
    tl_plugin = plugin;
    atomic_signal_fence (memory_order_seq_cst);
    tl_consumer = consumer;
}

void
fh_crash_message (uint64_t seq, const void *body, size_t size)
{
    tl_seq = seq;
    tl_body_size = size;
    tl_body = body;
}

void
fh_crash_leave (void)
{
    tl_consumer = NULL;
    tl_body = NULL;
}

/* Async-signal-safe appending, a byte at a time. */
static size_t
s_append (char *line, size_t used, size_t size, const char *text)
{
    while (text && *text && used + 1 < size)
        line[used++] = *text++;
    return used;
}

/* The msg_id of a fedmsg body, async-signal-safe: the value of the last
   "msg_id":" in it. fedmsg's encoding sorts keys, so the top-level one
   comes after any inside "msg", and the strings after it (signature,
   topic, username) cannot hold the pattern unescaped. Best effort for
   other encodings. */
static size_t
s_append_msg_id (char *line, size_t used, size_t size, const char *body, size_t body_size)
{
    static const char key[] = "\"msg_id\":\"";
    const size_t key_len = sizeof key - 1;
    const char *found = NULL;
    for (size_t i = 0; body && i + key_len <= body_size; i++) {
        size_t k = 0;
        while (k < key_len && body[i + k] == key[k])
            k++;
        if (k == key_len)
            found = body + i + key_len;
    }
    if (!found)
        return used;
    used = s_append (line, used, size, " (msg_id ");
    for (const char *c = found; c < body + body_size && *c != '"' && *c != '\\'
                                && (unsigned char) *c >= 0x20 && c - found < 64 && used + 1 < size;
         c++)
        line[used++] = *c;
    return s_append (line, used, size, ")");
}

static const char *
s_signal_name (int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "a fatal signal";
    }
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
    const char *consumer = tl_consumer, *plugin = tl_plugin;
    size_t used = s_append (line, 0, sizeof line,
                            fh_log_to_journal () ? "<2>" : "fanhub: error: ");
    used = s_append (line, used, sizeof line, "fatal signal ");
    used = s_append (line, used, sizeof line, number + n);
    used = s_append (line, used, sizeof line, " (");
    used = s_append (line, used, sizeof line, s_signal_name (sig));
    if (consumer) {
        used = s_append (line, used, sizeof line, ") inside consume of consumer '");
        used = s_append (line, used, sizeof line, consumer);
        used = s_append (line, used, sizeof line, "', plugin ");
        used = s_append (line, used, sizeof line, plugin);
        const char *body = tl_body;
        if (body) {
            char seq[24];
            size_t at = sizeof seq - 1;
            seq[at] = '\0';
            uint64_t left = tl_seq;
            do
                seq[--at] = (char) ('0' + left % 10);
            while ((left /= 10) && at);
            used = s_append (line, used, sizeof line, ", message ");
            used = s_append (line, used, sizeof line, seq + at);
            used = s_append_msg_id (line, used, sizeof line, body, tl_body_size);
        }
    }
    else
        used = s_append (line, used, sizeof line, ") in the hub itself");
    used = s_append (line, used, sizeof line,
                     ": the hub stops now (a restart recovers spilled messages from the "
                     "spool)\n");
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
    if (!tl_consumer)
        return;
    fh_error ("consumer '%s', plugin %s: called exit(%d) inside consume: the hub stops "
              "with that status (a restart recovers spilled messages from the spool)",
              tl_consumer, tl_plugin, status);
    fflush (stderr);
    _exit (status);
}

void
fh_crash_install (void)
{
    (void) fh_log_to_journal (); /* decided now: the handler only reads it */
    zsys_init (); /* its exit handler first, so that ours runs before it */
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
