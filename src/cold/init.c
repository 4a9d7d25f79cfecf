/* Start-up: the core comes up on compiled defaults without allocating, then the parts that
 * may allocate (thread key, fork handlers) run with re-entrant calls allowed to succeed. */
#include <stdlib.h>
#include "cold.h"

pthread_key_t init_thread_key;
_Atomic int init_key_ready;

static _Atomic int core_state;       /* 0 not started, 1 being set up, 2 ready */
static _Atomic int late_state;       /* same for the parts that may allocate */

static void fork_prepare(void)
{
    heap_lock();
    heap_batch_lock();
    arena_pool_lock();
    large_lock();
    prof_lock();
}

static void fork_parent(void)
{
    prof_unlock();
    large_unlock();
    arena_pool_unlock();
    heap_batch_unlock();
    heap_unlock();
}

static void fork_child(void)
{
    prof_after_fork_child();
    large_reset_lock();
    arena_pool_after_fork_child();
    heap_after_fork_child();
    heap_batch_after_fork_child();
    arena_purger_after_fork_child();
}

HAK_COLD void init_core(void)
{
    int expect = 0;
    if (atomic_compare_exchange_strong(&core_state, &expect, 1)) {
        class_table_init(sizeof(struct region));
        arena_set_donor(large_donate);
        arena_set_visitor(heap_visit_idle);
        arena_set_idle(large_idle_trim);
        policy_publish_initial();
        atomic_store(&core_state, 2);
        return;
    }
    while (atomic_load(&core_state) != 2)   /* another thread is mid-way: it does not allocate */
        ;
}

HAK_COLD void init_late(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&late_state, &expect, 1))
        return;                             /* done, or in progress on a call that re-entered us */
    if (pthread_key_create(&init_thread_key, heap_thread_exit) == 0)
        atomic_store(&init_key_ready, 1);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atomic_store(&late_state, 2);
}

HAK_COLD void init_process(void)
{
    if (likely(atomic_load_explicit(&late_state, memory_order_acquire) == 2))
        return;
    init_core();
    init_late();
}

/* Bring the allocator up before main so the first malloc is not the one paying.  First of
 * the library's constructors (the lowest priority number runs first): the others read the
 * policy this one loads. */
__attribute__((constructor(101))) static void hak_constructor(void)
{
    init_process();
    policy_publish_config();
    if (policy_now()->verbose)
        policy_report_verbose();
}

/* Phase 106.  A program's libraries fault their destructors' code and data in at exit,
 * after the program has freed its heap: glibc has given those pages back by then, hakmem
 * keeps them for reuse, and the two add up at the end of the peak RSS.  This destructor
 * runs before theirs (a preloaded library is finalised right after the program, one
 * linked in with the program's own), and last of hakmem's (the lowest number): the
 * statistics and the heap profile at exit are written first. */
__attribute__((destructor(101))) static void hak_destructor(void)
{
    if (HAK_PHASE106 && policy_now()->phase106) {
        arena_exit_purge();
        large_exit_trim();
    }
}
