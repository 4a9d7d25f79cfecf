/* Visits: the purger takes in what other threads freed into the regions and spans of a
 * thread that has gone idle, so those they empty go back to the arenas without it. */
#include "cold.h"

/* Only the owner may collect its regions' remote frees, merge its spans and take an emptied
 * region off its lists, and an owner that sleeps after other threads freed its blocks (a
 * producer whose consumers drained it) would keep their regions, spans and headers
 * resident for as long as it slept.  The owner marks every path that touches them
 * (heap_enter); the purger asks for a visit, makes every thread of the process pass a
 * full barrier (membarrier), and then finds the owner either in such a path (no visit) or
 * out of it, in which case the owner's next heap_enter sees the request and waits until
 * the visit ends.  malloc_trim visits every other heap the same way.  The owner's side
 * costs a store and a load on each cold path, no atomic read-modify-write; the visitor's
 * a system call per visit (Phase 103; docs/DESIGN-NOTES.md). */

static int visits_on(void)
{
    return HAK_PHASE103 && policy_now()->phase103;
}

static void visit_end(struct heap_thread *t)
{
    atomic_store_explicit(&t->visit, 0, memory_order_release);
}

/* Asks for t's heap: 1 if its thread is out of every path that touches it and stays out
 * until visit_end. */
static int visit_begin(struct heap_thread *t)
{
    atomic_store_explicit(&t->visit, 1, memory_order_seq_cst);
#ifndef HAK_TSAN
    int fenced = os_membarrier();
#else
    int fenced = 1;
#endif
    if (!fenced || (atomic_load_explicit(&t->cold, memory_order_seq_cst) & 1)) {
        visit_end(t);
        return 0;
    }
    return 1;
}

/* The owner met a visit on its way in: out again (`entered` + 1, even) until it ends. */
HAK_COLD uint32_t heap_enter_wait(uint32_t entered)
{
    struct heap_thread *t = &heap_thread;
    do {
        atomic_store_explicit(&t->cold, entered + 1, memory_order_release);
        while (atomic_load_explicit(&t->visit, memory_order_acquire))
            os_yield();
        entered += 2;
        heap_mark_inside(t, entered);
    } while (atomic_load_explicit(&t->visit, memory_order_seq_cst));
    return entered;
}

/* What malloc_trim does in the owner (heap_trim), done by the visitor: other threads'
 * frees taken in, and the regions and spans they empty given back.  The heap lock is held,
 * so h's thread cannot exit meanwhile (heap_retire takes it first). */
static int visit_locked(struct heap *h)
{
    struct heap_thread *t = h->thread;
    if (!h->live || t == NULL || !visit_begin(t))
        return 0;
    heap_outbox_flush(h);                   /* Phase 107: what it holds for others goes */
    heap_inbox_forward_visited(h);          /* ... and what others sent it comes home */
    heap_visit_collect(h);
    span_merge_pending(h);
    visit_end(t);
    stats_visit();
    return 1;
}

/* Other threads have freed into h since its thread last looked (a tiny region's remote
 * frees stay marked until its owner refills the class: a visit may take none of them). */
static int visit_wanted(struct heap *h)
{
    return atomic_load_explicit(&h->remote_scan, memory_order_relaxed)
           || atomic_load_explicit(&h->span_remote, memory_order_relaxed)
           || atomic_load_explicit(&h->inbox, memory_order_relaxed)
           || atomic_load_explicit(&h->inbox_local, memory_order_relaxed)
           || atomic_load_explicit(&h->out_held, memory_order_relaxed);
}

struct visit_pass {
    uint32_t now, idle;
};

/* An idle heap is visited again at most this often (the wait doubles from the delay). */
#define VISIT_WAIT_MAX 60000u

/* h is visited once other threads have freed into it and its thread has entered no path
 * that touches it for `idle` ms; while that lasts, again after twice as long each time
 * (a tiny region partly freed by others stays marked for its owner, so an idle heap may
 * stay wanted: it is not woken every pass for it). */
static void visit_if_idle(struct heap *h, void *arg)
{
    const struct visit_pass *v = arg;
    if (!h->live || h->thread == NULL) {
        heap_inbox_forward(h);              /* batches that came after its thread left */
        return;
    }
    uint32_t c = atomic_load_explicit(&h->thread->cold, memory_order_relaxed);
    if (c != h->visit_cold) {
        h->visit_cold = c;
        h->visit_ms = v->now;
        h->visit_wait = v->idle;
        return;
    }
    if (v->now - h->visit_ms < h->visit_wait || !visit_wanted(h))
        return;
    if (visit_locked(h)) {
        h->visit_ms = v->now;
        h->visit_wait = h->visit_wait >= VISIT_WAIT_MAX / 2 ? VISIT_WAIT_MAX : 2 * h->visit_wait + 1;
    }
}

/* Phase 107 without visits: the batches that came to a heap whose thread has entered no
 * cold path for `idle` ms go home the old way, by their tags (that needs no visit: the
 * inbox is taken with one exchange, as its owner takes it; what the owner took off it
 * before it went idle waits for it). */
static void forward_if_idle(struct heap *h, void *arg)
{
    const struct visit_pass *v = arg;
    if (atomic_load_explicit(&h->inbox, memory_order_relaxed) == NULL)
        return;
    if (!h->live || h->thread == NULL) {
        heap_inbox_forward(h);
        return;
    }
    uint32_t c = atomic_load_explicit(&h->thread->cold, memory_order_relaxed);
    if (c != h->visit_cold) {
        h->visit_cold = c;
        h->visit_ms = v->now;
    } else if (v->now - h->visit_ms >= v->idle) {
        heap_inbox_forward(h);
    }
}

/* The purger, after a sparse pass. */
HAK_COLD void heap_visit_idle(uint32_t now_ms, uint32_t idle_ms)
{
    struct visit_pass v = { now_ms, idle_ms };
    if (visits_on())
        heap_foreach(visit_if_idle, &v);
    else if (HAK_PHASE107)
        heap_foreach(forward_if_idle, &v);
}

static void visit_other(struct heap *h, void *arg)
{
    struct heap **self = arg;
    if (h != *self && !h->live)
        heap_inbox_forward(h);
    else if (h != *self && visit_wanted(h))
        visit_locked(h);
}

/* malloc_trim: every other thread's heap that is out of its cold paths now, idle or not,
 * as glibc's trims every arena. */
HAK_COLD void heap_visit_others(struct heap *self)
{
    if (visits_on())
        heap_foreach(visit_other, &self);
}

/* Phase 107: a thread that holds other threads' blocks in its outbox and has entered no
 * cold path since the last look (HELP_MS, cold/batch.c) is visited and its outbox sent;
 * batches that came to heaps whose threads have gone are forwarded. */
static void visit_sender(struct heap *h, void *arg)
{
    struct heap **self = arg;
    if (h == *self)
        return;
    if (!h->live) {
        heap_inbox_forward(h);
        return;
    }
    if (h->thread == NULL || !atomic_load_explicit(&h->out_held, memory_order_relaxed))
        return;
    uint32_t c = atomic_load_explicit(&h->thread->cold, memory_order_relaxed);
    if (c != h->out_cold) {
        h->out_cold = c;                    /* busy since: it sends its own */
        return;
    }
    if (visit_begin(h->thread)) {
        heap_outbox_flush(h);
        visit_end(h->thread);
    }
}

HAK_COLD void heap_visit_senders(struct heap *self)
{
    if (visits_on())
        heap_foreach(visit_sender, &self);
}
