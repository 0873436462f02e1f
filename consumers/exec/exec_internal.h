/*  exec_internal - what the files of the exec plugin share.

    The plugin is split by job:
      exec.c        the options, init, check and fini, the failure log and
                    consume
      exec_child.c  running the command once: the pipes, the spawn, the
                    conversation (body in, stderr out, the deadline) and
                    the outcome from the exit status
*/
#ifndef EXEC_INTERNAL_H_INCLUDED
#define EXEC_INTERNAL_H_INCLUDED

#include <fanhub/consumer.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define EXEC_TIMEOUT_MS_MAX 86400000
#define EXEC_GRACE_MS_MAX 3600000
#define EXEC_EX_TEMPFAIL 75
#define EXEC_LINE_MAX 300        /* bytes of stderr's first line kept */
#define EXEC_DRAIN_MAX (1 << 20) /* stderr read after the child exited */
#define EXEC_POLL_STEP_MS 10     /* without a pidfd */
#define EXEC_SECOND_NS INT64_C (1000000000)
#define EXEC_LOG_BURST_NS (10 * EXEC_SECOND_NS) /* ten lines at once */

typedef enum { EXEC_STDOUT_NULL, EXEC_STDOUT_STDERR, EXEC_STDOUT_INHERIT } exec_stdout_t;

typedef struct {
    const fanhub_host_t *host;
    fanhub_ctx_t *ctx;
    char *path;  /* the program, PATH resolved at init */
    char **argv; /* NULL-terminated */
    char **env;  /* environ at init without FANHUB_*, NULL-ended */
    size_t nenv;
    char *consumer_env; /* "FANHUB_CONSUMER=NAME" */
    int64_t timeout_ns;
    int64_t grace_ns;
    exec_stdout_t out;

    pthread_mutex_t lock; /* guards the failure log below */
    bool failing;         /* the last message failed */
    uint64_t streak;      /* failed runs in the current streak */
    uint64_t unlogged;    /* failures since the last line */
    int64_t last_line;    /* CLOCK_MONOTONIC ns of the last line */
    int64_t credit;       /* ns of log lines allowed now (1 s per line) */
} exec_state_t;

/* What one run came to. */
typedef struct {
    fanhub_result_t result;
    char reason[EXEC_LINE_MAX + 128];
} exec_outcome_t;

/* Runs the command once for msg and says what came of it. Thread-safe:
   everything of the run lives on the caller's stack. */
void exec_run (const exec_state_t *self, const fanhub_msg_t *msg, exec_outcome_t *out);

#endif
