/* The slow paths of malloc and free, and the thread and process lifecycle they start: a
 * heap for a thread's first call, thread exit, fork, start-up and publishing a policy. */
#ifndef HAK_COLD_H
#define HAK_COLD_H

#include <pthread.h>
#include <stddef.h>
#include "../common/common.h"
#include "../slots/slots.h"
#include "../span/span.h"
#include "../large/large.h"
#include "../arena/arena.h"
#include "../os/os.h"
#include "../stats/stats.h"
#include "../prof/prof.h"

/* init.c: start-up */
void init_process(void);     /* everything, once; cheap when done */
void init_core(void);        /* never allocates */
void init_late(void);        /* may allocate: call with a heap in place */
extern pthread_key_t init_thread_key;
extern _Atomic int init_key_ready;

/* alloc.c: what the hot paths send out of line (all HAK_COLD) */
void *heap_malloc_slow(struct heap *h, size_t n);
void *heap_malloc_class_slow(struct heap *h, size_t n);   /* a mid block by size class, Phase 100 or not */
void  heap_free_slow(void *p, struct heap *h, struct region *r);   /* not live, or another heap's */
void  heap_free_tiny_slow(void *p, struct heap *h);       /* Phase 93's cache hit, but not live */
void  heap_free_nonregion_slow(void *p, struct heap *h, unsigned mapbyte, const char *call);
void  heap_free_spill_slow(void *p, struct heap *h, struct region *r);
void  heap_refresh(struct heap *h);                       /* the epoch moved: a new snapshot */

void  heap_free_remote_now(void *p, struct region *r);     /* another heap's block, its tag marked now */

/* batch.c (Phase 107): other threads' tiny blocks freed by the batch */
int   heap_outbox_put(struct heap *h, struct heap *o, struct region *r, void *p);   /* 1: batched (or reported) */
void  heap_outbox_flush(struct heap *h);        /* h's thread, or a visit: every batch sent */
void  heap_inbox_take(struct heap *h);          /* h's thread: its batches into its caches */
void  heap_inbox_forward(struct heap *h);       /* any thread: h's batches home by their tags */
void  heap_inbox_forward_visited(struct heap *h);   /* a visit: those h took off too */
void  heap_batch_poll(struct heap *h);          /* a cold path: its inbox, idle threads' outboxes */
void  heap_batch_retire(struct heap *h);        /* thread exit */
void  heap_batch_lock(void);
void  heap_batch_unlock(void);
void  heap_batch_after_fork_child(void);

/* heap.c: per-thread heap lifecycle */
struct heap *heap_acquire(void);
void  heap_thread_exit(void *heap);
void  heap_trim(void);                  /* malloc_trim: every heap takes other threads' frees in */
void  heap_lock(void);
void  heap_unlock(void);
void  heap_snapshot(struct heap *h);
void  heap_after_fork_child(void);
void  heap_invalidate_all(void);     /* caller holds the heap lock */
void  heap_foreach(void (*fn)(struct heap *h, void *ctx), void *ctx);

/* visit.c: the purger may take in what other threads freed into an idle thread's regions
 * and spans, and give those they empty back, while that thread is out of the paths that
 * touch them.  Every such path is bracketed by heap_enter and heap_leave. */
uint32_t heap_enter_wait(uint32_t entered);   /* the token heap_enter returns */
void  heap_visit_idle(uint32_t now_ms, uint32_t idle_ms);
void  heap_visit_others(struct heap *self);     /* malloc_trim: all but self, idle or not */
void  heap_visit_senders(struct heap *self);    /* Phase 107: idle threads' outboxes sent */

/* The thread's mark that it is inside (odd c), before it looks for a visit.  A plain
 * store: the visitor's membarrier orders it before the thread's next load (under
 * ThreadSanitizer, which cannot see that, both sides are sequentially consistent, a
 * Dekker pair it can check). */
HAK_INLINE void heap_mark_inside(struct heap_thread *t, uint32_t c)
{
#ifdef HAK_TSAN
    atomic_store_explicit(&t->cold, c, memory_order_seq_cst);
#else
    atomic_store_explicit(&t->cold, c, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* The thread is in a path that touches its heap's regions: a nonzero token for heap_leave,
 * or 0 where a call it nests in made it so already. */
HAK_INLINE uint32_t heap_enter(void)
{
    if (!HAK_PHASE103)
        return 0;                       /* compiled out: no visits, nothing to mark */
    struct heap_thread *t = &heap_thread;
    uint32_t c = atomic_load_explicit(&t->cold, memory_order_relaxed);
    if (c & 1)
        return 0;
    heap_mark_inside(t, c + 1);
    if (unlikely(atomic_load_explicit(&t->visit, memory_order_seq_cst)))
        return heap_enter_wait(c + 1);
    return c + 1;
}

HAK_INLINE void heap_leave(uint32_t entered)
{
    if (HAK_PHASE103 && entered)
        atomic_store_explicit(&heap_thread.cold, entered + 1, memory_order_release);
}

/* publish.c: loading and publishing policies */
void policy_publish_initial(void);   /* defaults and the environment, at start-up */
void policy_publish_config(void);    /* HAKMEM_CONFIG, once the core is up */
int  policy_publish_file(const char *path, int env_quiet);   /* 0, or -1 with the errors reported */
int  policy_publish_setting(const char *name, const char *value);  /* likewise: hak_policy_set */
void policy_report_verbose(void);    /* [stats] verbose: version, settings and sources, phases */

#endif
