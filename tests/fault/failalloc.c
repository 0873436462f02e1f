/*  failalloc - an LD_PRELOAD shim for fault.alloc: malloc calls made from
    the fanhub executable itself, of at least FH_FAILALLOC_MIN bytes, fail
    with ENOMEM; every other call, and every call from a library (libzmq
    aborts on a failed allocation: its alloc_assert), goes to glibc. So the
    hub's own answer to a failed allocation is tested, not libzmq's. Without
    FH_FAILALLOC_MIN it fails nothing.
*/
#define _GNU_SOURCE 1
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>

extern void *__libc_malloc (size_t size);

static uintptr_t s_lo = UINTPTR_MAX, s_hi; /* where the executable is mapped */
static size_t s_min;                       /* 0: fail nothing */

/* The first object dl_iterate_phdr reports is the executable. */
static int
s_find_executable (struct dl_phdr_info *info, size_t size, void *arg)
{
    (void) size;
    (void) arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW (Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (lo < s_lo)
            s_lo = lo;
        if (lo + ph->p_memsz > s_hi)
            s_hi = lo + ph->p_memsz;
    }
    return 1;
}

__attribute__ ((constructor)) static void
s_init (void)
{
    const char *min = getenv ("FH_FAILALLOC_MIN");
    if (!min)
        return;
    dl_iterate_phdr (s_find_executable, NULL);
    s_min = strtoull (min, NULL, 10);
}

void *
malloc (size_t size)
{
    uintptr_t caller = (uintptr_t) __builtin_return_address (0);
    if (s_min && size >= s_min && caller >= s_lo && caller < s_hi) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_malloc (size);
}
