/* Phase 104: a program that touches every page of its large blocks gets each new block's
 * fresh pages in a few MADV_POPULATE_WRITE calls, not a fault per page (two where it reads first). */
#include <stdatomic.h>
#include "large_dense.h"
#include "../os/os.h"
#include "../policy/policy.h"

/* A block is judged by one page in every DENSE_STEP bytes (from its first page on), which
 * a populate leaves out: what it populated would otherwise read as touched, and a program
 * that stopped filling its blocks would never be seen to. */
#define DENSE_STEP ((size_t)256 << 10)

/* The watched block: the last one handed out, until it is looked at or freed.  Two words
 * without a lock (none to reset in a fork's child): threads racing here may pair one
 * block's address with another's length, and mincore then reports a hole or a wrong hint. */
static _Atomic uintptr_t dense_last;
static _Atomic size_t dense_last_len;
static _Atomic int dense_verdict;       /* 1: the last block looked at was almost all touched */

/* Touched means 15 of every 16 sample pages resident: a program that leaves a few pages
 * of each block alone still gains, one that leaves a quarter does not pay. */
static void dense_look(uintptr_t p, size_t len)
{
    size_t held = os_resident((const void *)p, len, DENSE_STEP);
    if (held == (size_t)-1)             /* unmapped since: freed, and no longer a block */
        return;
    size_t samples = (len + DENSE_STEP - 1) / DENSE_STEP;
    atomic_store_explicit(&dense_verdict, held * 16 >= samples * 15, memory_order_relaxed);
}

static int dense_on(size_t len)
{
    return HAK_PHASE104 && len >= LARGE_DENSE_MIN && policy_now()->phase104;
}

HAK_COLD void large_dense_freeing(uintptr_t p, size_t len)
{
    if (!dense_on(len))
        return;
    uintptr_t mine = p;
    atomic_compare_exchange_strong_explicit(&dense_last, &mine, 0, memory_order_relaxed,
                                            memory_order_relaxed);
    dense_look(p, len);
}

/* The fresh pages [from, to) of the block at `block`, but its sample pages. */
static void dense_populate(uintptr_t block, uintptr_t from, uintptr_t to)
{
    while (from < to) {
        size_t in = (from - block) % DENSE_STEP;
        if (in == 0) {                  /* a sample page: left to the program */
            from += OS_PAGE;
            continue;
        }
        uintptr_t next = from - in + DENSE_STEP;
        if (next > to)
            next = to;
        os_populate((void *)from, next - from);
        from = next;
    }
}

HAK_COLD void large_dense_handout(uintptr_t p, size_t len, uintptr_t fresh)
{
    if (!dense_on(len))
        return;
    size_t prev_len = atomic_exchange_explicit(&dense_last_len, len, memory_order_relaxed);
    uintptr_t prev = atomic_exchange_explicit(&dense_last, p, memory_order_relaxed);
    /* The previous block may be freed and its pages reused by now: then this looks at
     * whatever holds them, a wrong hint and no harm (mincore reads, it never faults).  It
     * is looked at even when this block has no fresh page. */
    if (prev)
        dense_look(prev, prev_len);
    uintptr_t end = p + os_page_round(len);
    if (atomic_load_explicit(&dense_verdict, memory_order_relaxed) && fresh < end)
        dense_populate(p, fresh, end);
}
