/*  memory - pages faulted in ahead of use. See memory.h. */
#include "memory.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

void
fh_memory_populate (void *memory, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t page = (uintptr_t) sysconf (_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t) memory + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t) memory + bytes) & ~(page - 1);
    if (end > start)
        (void) madvise ((void *) start, end - start, MADV_POPULATE_WRITE);
#else
    (void) memory;
    (void) bytes;
#endif
}
