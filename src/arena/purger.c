/* Phase 99: the purger, a thread that gives free chunks past the retained cap back to the
 * OS, so a free that empties memory does not wait for the kernel, page by page. */
#define _GNU_SOURCE                         /* pthread_setname_np */
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include "arena.h"
#include "../os/os.h"

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

static void *purger_main(void *arg)
{
    (void)arg;
    struct iovec extents[PURGER_BATCH];
    for (;;) {
        int batched, sparse;
        unsigned n = arena_pool_purge_next(extents, PURGER_BATCH, &batched, &sparse);
        if (sparse) {
            arena_sparse_pass(0, 0);
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

HAK_COLD void arena_purger_want(void)
{
    int expect = PURGER_NONE;
    atomic_compare_exchange_strong(&purger_state, &expect, PURGER_WANTED);
}

HAK_COLD int arena_purger_running(void)
{
    return atomic_load_explicit(&purger_state, memory_order_acquire) == PURGER_RUNNING;
}

HAK_COLD void arena_purger_poll(void)
{
    int expect = PURGER_WANTED;
    if (likely(atomic_load_explicit(&purger_state, memory_order_relaxed) != expect) ||
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
    atomic_store_explicit(&purger_state, ok ? PURGER_RUNNING : PURGER_FAILED, memory_order_release);
}

HAK_COLD void arena_purger_after_fork_child(void)
{
    /* Only the forking thread survives: the child starts its own purger when it needs one. */
    atomic_store_explicit(&purger_state, PURGER_NONE, memory_order_relaxed);
}
