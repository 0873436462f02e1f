/*  crash - what a plugin that kills the process leaves behind. See crash.h. */
#define _GNU_SOURCE 1 /* on_exit */
#include "crash.h"

#include "log.h"

#include <czmq.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set by the thread itself around consume, read by its own signal
   handler: a thread-local of the executable is async-signal-safe. */
static _Thread_local const char *tl_consumer;
static _Thread_local const char *tl_plugin;

static const int s_fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

void
fh_crash_enter (const char *consumer, const char *plugin)
{
    tl_plugin = plugin;
    atomic_signal_fence (memory_order_seq_cst);
    tl_consumer = consumer;
}

void
fh_crash_leave (void)
{
    tl_consumer = NULL;
}

/* Async-signal-safe appending, a byte at a time. */
static size_t
s_append (char *line, size_t used, size_t size, const char *text)
{
    while (text && *text && used + 1 < size)
        line[used++] = *text++;
    return used;
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
    on_exit (s_on_exit, NULL);
    struct sigaction action;
    memset (&action, 0, sizeof action);
    action.sa_handler = s_fatal;
    sigemptyset (&action.sa_mask);
    for (size_t i = 0; i < sizeof s_fatal_signals / sizeof *s_fatal_signals; i++)
        sigaction (s_fatal_signals[i], &action, NULL);
}
