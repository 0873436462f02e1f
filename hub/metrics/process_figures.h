/*  process_figures - the process_* metrics of the hub's own process.

    Read from the kernel (fh_process_read) by the control actor before it
    takes the hub lock, since that lock does no I/O (hub/README.md), and
    set into a snapshot from that reading (fh_process_figures): the start time (/proc/self/stat
    against the boot time in /proc/stat; read once), CPU time (getrusage), resident
    and virtual memory (/proc/self/statm), open file descriptors (the
    entries of /proc/self/fd) and their limit (RLIMIT_NOFILE). A figure
    that cannot be read stays 0; nothing here fails the snapshot.
*/
#ifndef FH_PROCESS_FIGURES_H_INCLUDED
#define FH_PROCESS_FIGURES_H_INCLUDED

#include "metrics.h"

#include <stdint.h>

/* One reading of the process figures. */
typedef struct {
    double start_time; /* seconds since the epoch */
    double cpu;        /* seconds, user and system */
    int64_t virtual_bytes, resident_bytes;
    int64_t open_fds, max_fds; /* max_fds 0: unlimited or unknown */
} fh_process_t;

/* Reads them from the kernel (/proc, getrusage, getrlimit). */
void fh_process_read (fh_process_t *out);
/* Sets the process rows of item (the snapshot's hub) from a reading. */
void fh_process_figures (fh_metrics_item_t *item, const fh_process_t *reading);

#endif
