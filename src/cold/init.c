/* Start-up: the core comes up on compiled defaults without allocating, then the parts that
 * may allocate (thread key, fork handlers) run with re-entrant calls allowed to succeed. */
#include <stdlib.h>
#include "cold.h"
#include "../route/classes.h"

pthread_key_t cold_thread_key;
_Atomic int cold_key_ready;

static _Atomic int core_state;       /* 0 not started, 1 being set up, 2 ready */
static _Atomic int late_state;       /* same for the parts that may allocate */

static void fork_prepare(void)
{
    cold_heap_lock();
    region_pool_lock();
    large_lock();
}

static void fork_parent(void)
{
    large_unlock();
    region_pool_unlock();
    cold_heap_unlock();
}

static void fork_child(void)
{
    large_reset_lock();
    region_pool_after_fork_child();
    cold_heap_after_fork_child();
    cold_purger_after_fork_child();
}

HAK_COLD void cold_init_core(void)
{
    int expect = 0;
    if (atomic_compare_exchange_strong(&core_state, &expect, 1)) {
        route_classes_init();
        cold_policy_initial();
        atomic_store(&core_state, 2);
        return;
    }
    while (atomic_load(&core_state) != 2)   /* another thread is mid-way: it does not allocate */
        ;
}

HAK_COLD void cold_init_late(void)
{
    int expect = 0;
    if (!atomic_compare_exchange_strong(&late_state, &expect, 1))
        return;                             /* done, or in progress on a call that re-entered us */
    if (pthread_key_create(&cold_thread_key, cold_heap_thread_exit) == 0)
        atomic_store(&cold_key_ready, 1);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    atomic_store(&late_state, 2);
}

HAK_COLD void cold_init(void)
{
    if (likely(atomic_load_explicit(&late_state, memory_order_acquire) == 2))
        return;
    cold_init_core();
    cold_init_late();
}

/* Bring the allocator up before main so the first malloc is not the one paying. */
__attribute__((constructor)) static void hak_constructor(void)
{
    cold_init();
    cold_policy_load_config();
}
