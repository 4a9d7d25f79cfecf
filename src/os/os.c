/* mmap-based OS layer, with a failure-injection hook for the fault tests.
 * errno is saved around calls whose failure we absorb, so a successful malloc leaves errno alone. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "os.h"
#include "../common/common.h"

static _Atomic size_t os_mapped, os_purged;

size_t os_mapped_bytes(void)
{
    return atomic_load_explicit(&os_mapped, memory_order_relaxed);
}

size_t os_purged_bytes(void)
{
    return atomic_load_explicit(&os_purged, memory_order_relaxed);
}

static _Atomic long os_fail_countdown = -1;
static _Atomic int os_fail_one;         /* the failure is a single call, not an outage */

void os_fail_after(long n)
{
    atomic_store(&os_fail_one, 0);
    atomic_store(&os_fail_countdown, n);
}

void os_fail_once_after(long n)
{
    atomic_store(&os_fail_one, 1);
    atomic_store(&os_fail_countdown, n);
}

static int os_injected_failure(void)
{
    long n = atomic_load_explicit(&os_fail_countdown, memory_order_relaxed);
    if (likely(n < 0))
        return 0;
    while (n > 0) {
        if (atomic_compare_exchange_weak(&os_fail_countdown, &n, n - 1))
            return 0;
        if (n < 0)
            return 0;
    }
    if (atomic_load(&os_fail_one))
        atomic_store(&os_fail_countdown, -1);
    return 1;
}

HAK_COLD void *os_map(size_t size)
{
    if (os_injected_failure()) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    atomic_fetch_add_explicit(&os_mapped, size, memory_order_relaxed);
    return p;
}

HAK_COLD void *os_map_aligned(size_t size, size_t align)
{
    if (align <= OS_PAGE)
        return os_map(size);
    if (size + align < size) {
        errno = ENOMEM;
        return NULL;
    }
    char *raw = os_map(size + align);
    if (raw == NULL)
        return NULL;
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)raw;
    size_t tail = align - head;
    if (head)
        os_unmap(raw, head);
    if (tail)
        os_unmap((char *)start + size, tail);
    return (void *)start;
}

HAK_COLD void os_unmap(void *p, size_t size)
{
    int e = errno;
    if (munmap(p, size) == 0)
        atomic_fetch_sub_explicit(&os_mapped, size, memory_order_relaxed);
    errno = e;
}

HAK_COLD void os_purge(void *p, size_t size)
{
    int e = errno;
    madvise(p, size, MADV_DONTNEED);
    atomic_fetch_add_explicit(&os_purged, size, memory_order_relaxed);
    errno = e;
}

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000    /* Linux 4.17; older headers lack it */
#endif

static _Atomic int heal_fail_unmaps;

void os_fail_heal_unmaps(int on)
{
    atomic_store(&heal_fail_unmaps, on);
}

/* An injected failure of os_heal's mmap, as a kernel before 6.12 fails: after unmapping. */
static void *os_heal_failed(void *p, size_t size)
{
    if (atomic_load(&heal_fail_unmaps))
        munmap(p, size);
    errno = ENOMEM;
    return MAP_FAILED;
}

HAK_COLD int os_heal(void *p, size_t size, int huge)
{
    int e = errno, healed = 1;
    void *q = os_injected_failure() ? os_heal_failed(p, size)
              : mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (q != MAP_FAILED && huge)        /* the flags its neighbours have, or it stays apart */
        os_advise_huge(p, size);
    if (q == MAP_FAILED) {
        healed = 0;
        if (madvise(p, size, MADV_DONTNEED) != 0) {
            /* The kernel unmapped the range before it failed: mapped again, unless another
             * thread's mapping took the hole meanwhile (then nothing may be put there). */
            void *r = os_injected_failure() ? MAP_FAILED
                      : mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (r != MAP_FAILED && r != p)  /* a kernel before 4.17 took the flag for a hint */
                munmap(r, size);
            if (r != p) {
                healed = -1;
                atomic_fetch_sub_explicit(&os_mapped, size, memory_order_relaxed);
            }
        }
    }
    atomic_fetch_add_explicit(&os_purged, size, memory_order_relaxed);
    errno = e;
    return healed;
}

HAK_COLD void os_yield(void)
{
    int e = errno;
    sched_yield();
    errno = e;
}

/* The process's membarrier, private expedited (Linux 4.14): registered once, on first use.
 * A kernel or sandbox that refuses it (ENOSYS, EPERM, valgrind) leaves it off for good. */
#define MB_CMD_PRIVATE_EXPEDITED          (1 << 3)
#define MB_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)
static _Atomic int membarrier_state;    /* 0 unknown, 1 registered, -1 refused */

HAK_COLD int os_membarrier(void)
{
    int e = errno, st = atomic_load_explicit(&membarrier_state, memory_order_acquire);
    if (st == 0) {
        st = syscall(SYS_membarrier, MB_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 ? 1 : -1;
        atomic_store_explicit(&membarrier_state, st, memory_order_release);
    }
    int ok = st > 0 && syscall(SYS_membarrier, MB_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
    errno = e;
    return ok;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23          /* Linux 5.14; older headers lack it */
#endif

/* 0 once the kernel has refused MADV_POPULATE_WRITE (before 5.14): the pages fault in
 * one by one as they are touched, as they always did. */
static _Atomic int os_populate_ok = 1;

HAK_COLD void os_populate(void *p, size_t size)
{
    if (!atomic_load_explicit(&os_populate_ok, memory_order_relaxed))
        return;
    int e = errno;
    if (madvise(p, size, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
        atomic_store_explicit(&os_populate_ok, 0, memory_order_relaxed);
    errno = e;                          /* short of memory: the touches will fault, as without */
}

HAK_COLD size_t os_resident(const void *p, size_t size, size_t step)
{
    unsigned char v[1024];
    size_t pages = (size + OS_PAGE - 1) / OS_PAGE, every = step / OS_PAGE, held = 0;
    int e = errno;
    for (size_t i = 0; i < pages; i += sizeof v) {
        size_t k = pages - i < sizeof v ? pages - i : sizeof v;
        if (mincore((char *)p + i * OS_PAGE, k * OS_PAGE, v) != 0) {
            errno = e;
            return (size_t)-1;
        }
        for (size_t j = (every - i % every) % every; j < k; j += every)
            held += v[j] & 1;
    }
    return held;
}

/* The process itself as a pidfd (Linux 6.14): no descriptor to open, keep or lose in fork. */
#define OS_PIDFD_SELF_PROCESS (-10001)

/* 0 once the kernel has refused process_madvise for this process (older than 6.13, no
 * PIDFD_SELF, a seccomp filter): from then on every extent is its own madvise. */
static _Atomic int os_many_ok = 1;

HAK_COLD void os_purge_many(struct iovec *v, unsigned n, int batched)
{
    int e = errno;
    unsigned i = 0;
    size_t total = 0;
    for (unsigned k = 0; k < n; k++)
        total += v[k].iov_len;
    atomic_fetch_add_explicit(&os_purged, total, memory_order_relaxed);
    if (batched && atomic_load_explicit(&os_many_ok, memory_order_relaxed)) {
        long r = syscall(SYS_process_madvise, OS_PIDFD_SELF_PROCESS, v, (size_t)n, MADV_DONTNEED, 0u);
        if (r < 0) {
            atomic_store_explicit(&os_many_ok, 0, memory_order_relaxed);
        } else {
            /* It may stop short; the extents it did not reach get one madvise each. */
            size_t done = (size_t)r;
            for (; i < n && done >= v[i].iov_len; i++)
                done -= v[i].iov_len;
            if (i < n && done) {
                madvise((char *)v[i].iov_base + done, v[i].iov_len - done, MADV_DONTNEED);
                i++;
            }
        }
    }
    for (; i < n; i++)
        madvise(v[i].iov_base, v[i].iov_len, MADV_DONTNEED);
    errno = e;
}

/* 0 once the kernel has refused MADV_FREE (before 4.5) */
static _Atomic int os_free_ok = 1;

HAK_COLD void os_purge_lazy(struct iovec *v, unsigned n)
{
    if (!atomic_load_explicit(&os_free_ok, memory_order_relaxed)) {
        os_purge_many(v, n, 0);
        return;
    }
    int e = errno;
    size_t total = 0;
    for (unsigned i = 0; i < n; i++) {
        total += v[i].iov_len;
        if (madvise(v[i].iov_base, v[i].iov_len, MADV_FREE) != 0 && errno == EINVAL) {
            atomic_store_explicit(&os_free_ok, 0, memory_order_relaxed);
            errno = e;
            os_purge_many(v + i, n - i, 0);
            atomic_fetch_add_explicit(&os_purged, total - v[i].iov_len, memory_order_relaxed);
            return;
        }
    }
    atomic_fetch_add_explicit(&os_purged, total, memory_order_relaxed);
    errno = e;
}

HAK_COLD void os_advise_huge(void *p, size_t size)
{
    int e = errno;
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
    errno = e;
}

HAK_COLD void *os_remap(void *p, size_t old_size, size_t new_size)
{
    if (os_injected_failure()) {
        errno = ENOMEM;
        return NULL;
    }
    void *q = mremap(p, old_size, new_size, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    atomic_fetch_add_explicit(&os_mapped, new_size - old_size, memory_order_relaxed);   /* wraps down */
    return q;
}

HAK_COLD int os_move(void *src, size_t size, void *dst)
{
    int e = errno;
    void *q = mremap(src, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    errno = e;                          /* a refused move is never the caller's failure */
    if (q == dst)                       /* src is gone; dst was mapped before and stays */
        atomic_fetch_sub_explicit(&os_mapped, size, memory_order_relaxed);
    return q == dst;
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

/* One mremap of [src, src+size) onto dst; `keep`: src stays mapped and reads as zero after
 * (MREMAP_DONTUNMAP). */
static int move_once(char *src, size_t size, char *dst, int keep)
{
    if (!keep)
        return os_move(src, size, dst);
    return mremap(src, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, dst) == dst;
}

/* A range the kernel would not move whole (it crosses kernel mappings): in halves until each
 * piece lies in one mapping; a page still refused is copied, its source unmapped (or with
 * `keep` purged).  Each failed attempt costs one cheap syscall (the kernel checks the mapping
 * first), so a range with k mapping boundaries takes about 2k log2(pages) calls. */
static void move_halves(char *src, size_t size, char *dst, int keep)
{
    if (size <= OS_PAGE) {
        memcpy(dst, src, size);
        if (keep)
            os_purge(src, size);
        else
            os_unmap(src, size);
        return;
    }
    size_t half = (size / 2) & ~(size_t)(OS_PAGE - 1);
    if (!move_once(src, half, dst, keep))
        move_halves(src, half, dst, keep);
    if (!move_once(src + half, size - half, dst + half, keep))
        move_halves(src + half, size - half, dst + half, keep);
}

HAK_COLD void os_move_split(void *src, size_t size, void *dst)
{
    if (!os_move(src, size, dst))
        move_halves(src, size, dst, 0);
}

/* Set once a kernel has refused MREMAP_DONTUNMAP: every later call gives up at once. */
static _Atomic int keep_refused;

int os_move_keep_refused(void)
{
    return atomic_load_explicit(&keep_refused, memory_order_relaxed);
}

HAK_COLD int os_move_keep(void *src, size_t size, void *dst)
{
    if (atomic_load_explicit(&keep_refused, memory_order_relaxed))
        return 0;
    int e = errno;
    void *q = mremap(src, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, dst);
    int refused = q == MAP_FAILED && errno == EINVAL;   /* the flag, not the range (EFAULT) */
    if (q != dst && !refused)
        move_halves(src, size, dst, 1);
    errno = e;
    if (refused)
        atomic_store_explicit(&keep_refused, 1, memory_order_relaxed);
    return !refused;
}

HAK_COLD size_t os_address_limit(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > SIZE_MAX)
        return SIZE_MAX;
    return (size_t)r.rlim_cur;
}
