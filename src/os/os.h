/* The OS layer: every mmap, munmap, mremap and madvise hakmem makes goes through here.
 * Functions return NULL / nonzero on failure and never touch errno on success. */
#ifndef HAK_OS_H
#define HAK_OS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define OS_PAGE 4096u
#define OS_HUGE_PAGE ((size_t)2 << 20)  /* x86-64's transparent huge page */

static inline size_t os_page_round(size_t n)     /* n up to a whole number of pages */
{
    return (n + OS_PAGE - 1) & ~(size_t)(OS_PAGE - 1);
}

void *os_map(size_t size);                       /* zeroed, page-aligned, NULL on failure */
void *os_map_aligned(size_t size, size_t align); /* align: power of two >= OS_PAGE */
void  os_unmap(void *p, size_t size);
void  os_purge(void *p, size_t size);            /* give the pages back; they read as zero after */
/* os_purge that also makes [p, p+size) part of the mapping around it again (a fresh mapping
 * there, `huge` advised as os_advise_huge, which the kernel joins to its neighbours when they
 * are what mmap made): pages moved in from elsewhere were a kernel mapping of their own.
 * 1 if so; 0 if the kernel refused and the pages are only purged (or, where it unmapped them
 * first, mapped afresh); -1 if they are gone: unmapped, and the hole may be another mapping's
 * by now, so nothing there may be used or unmapped again. */
int   os_heal(void *p, size_t size, int huge);
/* os_purge of n extents; `batched` (Phase 95): in one process_madvise call, so the kernel
 * flushes the TLB once for all of them (one madvise each where the kernel refuses). */
void  os_purge_many(struct iovec *v, unsigned n, int batched);
/* The same with MADV_FREE: the kernel takes the pages only when it wants memory, and until
 * then they keep what they held (MADV_DONTNEED where the kernel has no MADV_FREE). */
void  os_purge_lazy(struct iovec *v, unsigned n);
/* Faults the (zero) pages of [p, p+size) in with one call: each page the program then
 * touches costs no page fault (a tenth of one on a shadow-paging guest). */
void  os_populate(void *p, size_t size);
/* Of the pages at p, p + step, p + 2 step ... below p + size (p and step page multiples),
 * how many the kernel holds (mincore); (size_t)-1 if part of the range is not mapped. */
size_t os_resident(const void *p, size_t size, size_t step);
void  os_advise_huge(void *p, size_t size);      /* MADV_HUGEPAGE; a kernel without THP ignores it */
void  os_yield(void);                            /* lets another thread run (a short wait's spin) */
/* A full memory barrier in every running thread of the process (membarrier's private
 * expedited command): 1, or 0 where the kernel refuses it. */
int   os_membarrier(void);
void *os_remap(void *p, size_t old_size, size_t new_size);
/* Moves the pages of [src, src+size) over [dst, dst+size) (whose old pages are dropped),
 * without copying; src is left unmapped.  0 on failure (e.g. src crosses two kernel
 * mappings), and then nothing moved. */
int   os_move(void *src, size_t size, void *dst);
/* os_move that cannot fail: a range across kernel mappings is moved in halves until each
 * piece lies in one mapping (a page the kernel still refuses is copied and unmapped). */
void  os_move_split(void *src, size_t size, void *dst);
/* Moves the pages of [src, src+size) over [dst, dst+size) as os_move_split does, but src
 * stays mapped and reads as zero after (MREMAP_DONTUNMAP), so a hole never opens in a
 * mapping that is cut into chunks.  0 when the kernel cannot (before 5.13): nothing moved. */
int   os_move_keep(void *src, size_t size, void *dst);
int   os_move_keep_refused(void);   /* 1 once the kernel has refused it: every call would */

/* Bytes of every mapping made here and not unmapped, and bytes purged since start: relaxed
 * counters bumped beside each system call (the statistics' totals read them). */
/* The process's limit on address space (RLIMIT_AS, `ulimit -v`), SIZE_MAX without one. */
size_t os_address_limit(void);
size_t os_mapped_bytes(void);
size_t os_purged_bytes(void);

/* Test hook: after `n` more successful calls, every call fails (n < 0: never). */
void  os_fail_after(long n);
/* Test hook: after `n` more successful calls, exactly one call fails. */
void  os_fail_once_after(long n);
/* Test hook: an injected failure of os_heal unmaps the range first, as kernels before 6.12
 * did when a MAP_FIXED mmap failed. */
void  os_fail_heal_unmaps(int on);

#endif
