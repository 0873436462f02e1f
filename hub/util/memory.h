/*  memory - pages faulted in ahead of use.

    In a virtual machine a page fault costs some 10-20 us (15 us measured
    on the 2-vCPU bench machine), against about 1 us a page when the
    kernel is asked for many pages in one call. Memory the hub is about to
    fill (a ring that doubled, a writer's scratch, a block of deferrals)
    is populated at once rather than faulted in a page at a time: a burst
    that spills 100,000 messages otherwise spent more on first touches
    than on writing them.
*/
#ifndef FH_MEMORY_H_INCLUDED
#define FH_MEMORY_H_INCLUDED

#include <stddef.h>

/* Faults in the whole pages of memory[0..bytes-1] now, in one call
   (MADV_POPULATE_WRITE). Does nothing where the kernel cannot, and for
   the partial pages at either end. */
void fh_memory_populate (void *memory, size_t bytes);

#endif
