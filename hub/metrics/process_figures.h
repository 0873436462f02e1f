/*  process_figures - the process_* metrics of the hub's own process.

    Read from the kernel at each snapshot: the start time (/proc/self/stat
    against the boot time in /proc/stat; read once), CPU time (getrusage), resident
    and virtual memory (/proc/self/statm), open file descriptors (the
    entries of /proc/self/fd) and their limit (RLIMIT_NOFILE). A figure
    that cannot be read stays 0; nothing here fails the snapshot.
*/
#ifndef FH_PROCESS_FIGURES_H_INCLUDED
#define FH_PROCESS_FIGURES_H_INCLUDED

#include "metrics.h"

/* Sets the process rows of item (the snapshot's hub). */
void fh_process_figures (fh_metrics_item_t *item);

#endif
