/* Phase 99: the purger, a thread that gives free chunks past the retained cap back to the
 * OS, so a free that empties memory does not wait for the kernel, page by page. */
#define _GNU_SOURCE                         /* pthread_setname_np */
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include "arena.h"
#include "chunks.h"
#include "../os/os.h"
#include "../policy/policy.h"

/* Started only once more than `[purge] retain` of free memory is resident, so a small
 * program never has it.  It is created at a safe point (the slow malloc's entry), not where
 * it was found wanted: pthread_create allocates, a free deep in the cold path may hold
 * heap state, and glibc frees a thread's TLS while holding the lock that pthread_create
 * takes.  Until it runs, the freeing threads purge, as with the phase off. */
enum { PURGER_NONE, PURGER_WANTED, PURGER_STARTING, PURGER_RUNNING, PURGER_FAILED };
static _Atomic int purger_state;

#define PURGER_BATCH 256u                   /* extents per sweep, as chunks.c batches its own */

static _Atomic unsigned purger_pause_ms;    /* test hook: a batch held this long before its purge */

void arena_purger_pause(unsigned ms)
{
    atomic_store(&purger_pause_ms, ms);
}
#define PURGER_STACK ((size_t)64 << 10)

static arena_idle_fn purger_idle_hook;    /* large/'s page cache trim, registered at start-up */

void arena_set_idle(arena_idle_fn fn)
{
    __atomic_store_n(&purger_idle_hook, fn, __ATOMIC_RELEASE);
}

/* The program has idled for [purge] idle: the free pages of its regions and spans go back as
 * they turn out untouched (a first pass notes which were, the second, a sparse delay later,
 * takes those still untouched; one busy again keeps its pages), then the large page cache. */
static void purger_decay(void)
{
    arena_sparse_pass(0, 0);
    uint32_t ms = arena_sparse_delay(policy_now());
    nanosleep(&(struct timespec){ ms / 1000, (long)(ms % 1000) * 1000000L }, NULL);
    arena_sparse_pass(0, 0);
    arena_idle_fn hook = __atomic_load_n(&purger_idle_hook, __ATOMIC_ACQUIRE);
    if (hook)
        hook();
}

static void *purger_main(void *arg)
{
    (void)arg;
    struct iovec extents[PURGER_BATCH];
    for (;;) {
        int batched, sparse;
        unsigned n = arena_pool_purge_next(extents, PURGER_BATCH, &batched, &sparse);
        if (sparse == ARENA_PASS_SPARSE) {
            arena_sparse_pass(0, policy_now()->purge_cap);
            continue;
        }
        if (sparse == ARENA_PASS_IDLE) {
            purger_decay();
            continue;
        }
        unsigned pause = atomic_load_explicit(&purger_pause_ms, memory_order_relaxed);
        if (n && pause)
            nanosleep(&(struct timespec){ pause / 1000, (long)(pause % 1000) * 1000000L }, NULL);
        os_purge_many(extents, n, batched);
        arena_pool_purge_done(extents, n);
    }
    return NULL;
}

/* The purges past `retain` pass from the freeing threads to the purger at a safe point, when
 * they are wanted: as it starts, or later if it was started for the idle decay alone (taken
 * over at once instead, they lagged behind the frees of a heap just past `retain`: the large
 * benchmark peaked 5 % higher). */
static _Atomic int purges_wanted, purges_taken;

HAK_COLD void arena_purger_want(int purges)
{
    if (purges)
        atomic_store_explicit(&purges_wanted, 1, memory_order_relaxed);
    int expect = PURGER_NONE;
    atomic_compare_exchange_strong(&purger_state, &expect, PURGER_WANTED);
}

HAK_COLD int arena_purger_running(void)
{
    return atomic_load_explicit(&purger_state, memory_order_acquire) == PURGER_RUNNING;
}

HAK_COLD int arena_purger_purges(void)
{
    return atomic_load_explicit(&purges_taken, memory_order_acquire);
}

HAK_COLD void arena_purger_poll(void)
{
    int expect = PURGER_WANTED;
    int state = atomic_load_explicit(&purger_state, memory_order_relaxed);
    if (state == PURGER_RUNNING && !atomic_load_explicit(&purges_taken, memory_order_relaxed)
        && atomic_load_explicit(&purges_wanted, memory_order_relaxed))
        atomic_store_explicit(&purges_taken, 1, memory_order_release);
    if (likely(state != expect) ||
        !atomic_compare_exchange_strong(&purger_state, &expect, PURGER_STARTING))
        return;
    /* Every signal blocked, so none of the program's is delivered to a thread it never made. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_t t;
    int ok = pthread_attr_init(&attr) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, PURGER_STACK);
        ok = pthread_create(&t, &attr, purger_main, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ok)
        pthread_setname_np(t, "hakmem-purge");
    /* Refused (a thread limit, a seccomp filter): the freeing threads go on purging. */
    atomic_store_explicit(&purges_taken, ok && atomic_load(&purges_wanted), memory_order_release);
    atomic_store_explicit(&purger_state, ok ? PURGER_RUNNING : PURGER_FAILED, memory_order_release);
}

HAK_COLD void arena_purger_after_fork_child(void)
{
    /* Only the forking thread survives: the child starts its own purger when it needs one. */
    atomic_store_explicit(&purger_state, PURGER_NONE, memory_order_relaxed);
    atomic_store_explicit(&purges_wanted, 0, memory_order_relaxed);
    atomic_store_explicit(&purges_taken, 0, memory_order_relaxed);
}
