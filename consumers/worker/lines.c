/*  lines - what a worker writes for the hub's log: its stdout and stderr
    lines and its LOG frames, named, rate-limited, made safe to print. */
#include "worker.h"

#include <stdio.h>

/* A line of a worker's stdout or stderr (or its LOG frames): logged with
   the consumer's name and the worker's index, at most 100 a second, and
   what was held back said at most once a second. Control characters
   become '?': a worker's text cannot forge or break the hub's lines. */
void
worker_log_line (worker_t *w, proc_t *p, fanhub_log_level_t level, const char *line, bool cut)
{
    int64_t now = worker_now_ns ();
    w->line_credit_ns += now - w->line_last_ns;
    w->line_last_ns = now;
    if (w->line_credit_ns > WORKER_LINE_BURST_NS)
        w->line_credit_ns = WORKER_LINE_BURST_NS;
    if (w->line_credit_ns < WORKER_LINE_COST_NS) {
        w->lines_dropped++;
        return;
    }
    w->line_credit_ns -= WORKER_LINE_COST_NS;
    if (w->lines_dropped && now - w->lines_said_ns >= WORKER_LINE_BURST_NS) {
        w->host->log (w->ctx, FANHUB_LOG_WARNING,
                      "workers: %llu lines not logged (more than 100 a second)",
                      (unsigned long long) w->lines_dropped);
        w->lines_dropped = 0;
        w->lines_said_ns = now;
    }
    char clean[WORKER_LINE_MAX];
    size_t n = 0;
    for (; line[n] && n < sizeof clean - 1; n++)
        clean[n] = (unsigned char) line[n] < 0x20 && line[n] != '\t' ? '?' : line[n];
    clean[n] = '\0';
    w->host->log (w->ctx, level, "worker %zu: %s%s", p->index, clean, cut ? " [cut]" : "");
}

void
worker_emit_line (void *arg, proc_t *p, bool is_err, const char *line)
{
    if (is_err)
        snprintf (p->last_err, sizeof p->last_err, "%s", line);
    worker_log_line (arg, p, is_err ? FANHUB_LOG_WARNING : FANHUB_LOG_INFO, line,
                     is_err ? p->err_line.cut : p->out_line.cut);
}
