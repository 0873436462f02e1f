/*  oom - allocation failures on the hub's paths (a bus message's copy, a
    queue growing, a spool hand-off, a control answer): each is counted in
    one process-wide figure (hub.alloc_failures) and logged, the 1st, 2nd,
    4th, 8th... so a hub short of memory writes a few lines, not one per
    message. The caller then does what its contract says (drop and count
    the message, apply the overflow policy, answer an error): never a
    silent stop.
*/
#ifndef FH_OOM_H_INCLUDED
#define FH_OOM_H_INCLUDED

#include <stdint.h>

/* Any thread: one more failure at `where` (what could not be had, and
   what the hub does instead). Lock-free; logs on powers of two. */
void fh_oom_note (const char *where);
/* Any thread: the failures so far. */
uint64_t fh_oom_count (void);

#endif
