/* Chunk arenas: regions of every class are extents of chunks in a few big mappings, so a
 * region freed by one class is reused by any other, and the OS sees few mmap/munmap calls. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include "chunks.h"
#include "../common/common.h"
#include "../class/class.h"
#include "../os/os.h"

#define ARENA_CHUNKS  1024u                 /* 64 MiB: one mapping serves many regions */
#define ARENA_WORDS   (ARENA_CHUNKS / 64)
#define ARENA_MAX     4096u                 /* 256 GiB of arenas */

struct arena {
    uintptr_t base;                         /* 0: slot unused */
    unsigned  nchunks;                      /* ARENA_CHUNKS, or fewer when the OS refused a full one */
    int       huge;                         /* advised for transparent huge pages (Phase 94) */
    unsigned  nfree;
    unsigned  ndirty;                       /* chunks free && dirty: a take or sweep skips an arena without */
    uint64_t  free[ARENA_WORDS];            /* chunk not in any region */
    uint64_t  dirty[ARENA_WORDS];           /* free chunk whose pages may be resident */
    uint64_t  busy[ARENA_WORDS];            /* handed to the purger (Phase 99): neither free nor in use */
    unsigned  nbusy;
    /* The kernel mappings the arena is cut into (arena_maps): pages the donor moved in are
     * a mapping of their own (foreign) until purged; seam: chunk i - 1 and i, both foreign,
     * came in two moves. */
    uint64_t  foreign[ARENA_WORDS];
    uint64_t  seam[ARENA_WORDS];
    uint32_t  freed_ms[ARENA_CHUNKS];       /* when a dirty chunk was released (arena_now_ms) */
};

/* Each arena's record is mapped when the arena is first made: a table of them all in BSS was
 * 19.5 MiB of address space in every process, which a limit on it (ulimit -v) counts. */
static struct arena *arenas[ARENA_MAX];
static unsigned arenas_n;                   /* slots in use or once used, each mapped */
static size_t resident_free;                /* bytes of free && dirty chunks */
static size_t free_total;                   /* chunks free in all arenas */
static size_t used_total;                   /* chunks in regions and large blocks */
static uint32_t last_sweep_ms;              /* arena_sweep() runs at most once per tick */

static int bit_get(const uint64_t *w, unsigned i)
{
    return (int)((w[i >> 6] >> (i & 63)) & 1);
}

static void bits_set(uint64_t *w, unsigned i, unsigned n, int v)
{
    for (unsigned j = i; j < i + n; j++) {
        if (v)
            w[j >> 6] |= (uint64_t)1 << (j & 63);
        else
            w[j >> 6] &= ~((uint64_t)1 << (j & 63));
    }
}

static unsigned bits_count(const uint64_t *w, unsigned i, unsigned n)
{
    unsigned c = 0;
    for (unsigned j = i; j < i + n; j++)
        c += (unsigned)bit_get(w, j);
    return c;
}

/* First run of k set bits among the first nbits (bits beyond are 0); -1 if none.
 * Runs of up to 64 (every region, and most large blocks) are found a word at a time: over
 * the word and the next, bit p survives m &= m >> s for growing s while bits p .. p+k-1
 * are all set.  A fragmented arena's many short runs cost a take no more than its words,
 * where a bit at a time cost one step each. */
static int bits_find_run(const uint64_t *w, unsigned nbits, unsigned k)
{
    if (k <= 64) {
        unsigned nw = (nbits + 63) / 64;
        for (unsigned i = 0; i < nw; i++) {
            if (w[i] == 0)
                continue;
            unsigned __int128 m = w[i];
            if (i + 1 < nw)
                m |= (unsigned __int128)w[i + 1] << 64;
            for (unsigned len = 1; len < k;) {
                unsigned s = len < k - len ? len : k - len;
                m &= m >> s;
                len += s;
            }
            uint64_t starts = (uint64_t)m;      /* runs that start in word i */
            if (starts)
                return (int)(i * 64 + (unsigned)__builtin_ctzll(starts));
        }
        return -1;
    }
    unsigned i = 0;
    while (i < nbits) {
        uint64_t x = w[i >> 6] >> (i & 63);
        if (x == 0) {
            i = (i | 63) + 1;
            continue;
        }
        i += (unsigned)__builtin_ctzll(x);
        unsigned start = i;
        for (;;) {
            uint64_t y = ~(w[i >> 6] >> (i & 63));    /* the shift's zeros end the run at the word's end */
            unsigned c = y ? (unsigned)__builtin_ctzll(y) : 64;
            i += c;
            if (i - start >= k)
                return (int)start;
            if (c == 0 || (i & 63) || i >= nbits)
                break;
        }
    }
    return -1;
}

static int arena_find(struct arena *ar, unsigned chunks, int resident_only)
{
    if (ar->base == 0 || ar->nfree < chunks || (resident_only && ar->ndirty < chunks))
        return -1;
    if (!resident_only)
        return bits_find_run(ar->free, ar->nchunks, chunks);
    uint64_t w[ARENA_WORDS];
    for (unsigned i = 0; i < ARENA_WORDS; i++)
        w[i] = ar->free[i] & ar->dirty[i];
    return bits_find_run(w, ar->nchunks, chunks);
}

static uintptr_t arena_claim(struct arena *ar, unsigned i, unsigned chunks, int *clean)
{
    unsigned d = bits_count(ar->dirty, i, chunks);
    *clean = d == 0;
    resident_free -= (size_t)d << HAK_CHUNK_SHIFT;
    ar->ndirty -= d;
    bits_set(ar->free, i, chunks, 0);
    bits_set(ar->dirty, i, chunks, 0);
    ar->nfree -= chunks;
    free_total -= chunks;
    used_total += chunks;
    return ar->base + ((uintptr_t)i << HAK_CHUNK_SHIFT);
}

HAK_COLD uintptr_t arena_take(unsigned chunks, int *clean)
{
    /* Resident chunks first, in any arena: reusing them costs no page faults. */
    for (int pass = 1; pass >= 0; pass--) {
        for (unsigned a = 0; a < arenas_n; a++) {
            int i = arena_find(arenas[a], chunks, pass);
            if (i >= 0)
                return arena_claim(arenas[a], (unsigned)i, chunks, clean);
        }
    }
    return 0;
}

static struct arena *arena_of(uintptr_t a)
{
    for (unsigned i = 0; i < arenas_n; i++)
        if (arenas[i]->base && a - arenas[i]->base < ((uintptr_t)arenas[i]->nchunks << HAK_CHUNK_SHIFT))
            return arenas[i];
    return NULL;
}

/* A test may stop the clock, so that what it releases falls in one tick (arena_clock_set). */
static _Atomic int clock_frozen;
static _Atomic uint32_t clock_frozen_ms;

void arena_clock_set(int frozen, uint32_t ms)
{
    atomic_store(&clock_frozen_ms, ms);
    atomic_store(&clock_frozen, frozen);
}

/* Milliseconds from a coarse clock (a vDSO read, no syscall); wraps after 49 days, which
 * unsigned differences absorb. */
uint32_t arena_now_ms(void)
{
    if (unlikely(atomic_load_explicit(&clock_frozen, memory_order_relaxed)))
        return atomic_load_explicit(&clock_frozen_ms, memory_order_relaxed);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

/* Runs waiting for their purge: gathered by a sweep and given back in one call, so the
 * kernel flushes the TLB once for all of them (a TLB flush is most of a madvise's cost on
 * a virtual machine).  Filled and emptied under the pool's lock. */
#define PURGE_BATCH 256u
static struct iovec purge_runs[PURGE_BATCH];
static unsigned purge_n;
static int purge_batched;                   /* Phase 95, for this sweep */

static void purge_flush(void)
{
    if (purge_n)
        os_purge_many(purge_runs, purge_n, purge_batched);
    purge_n = 0;
}

static void purge_add(uintptr_t p, size_t len)
{
    purge_runs[purge_n].iov_base = (void *)p;
    purge_runs[purge_n].iov_len = len;
    if (++purge_n == PURGE_BATCH)
        purge_flush();
}

/* Where a sweep's extents go when the purger collects them (Phase 99): out of the free
 * bitmaps into the busy ones until it has purged them, so no taker sees an extent before it
 * reads as zero.  NULL: the sweep purges them itself. */
static struct iovec *hand_out;
static unsigned hand_max, hand_n;

/* The kernel mappings the arena spans at most: its own, cut by each run of foreign chunks
 * (two more each) and by each seam inside one. */
static unsigned arena_maps(const struct arena *ar)
{
    unsigned n = 1;
    uint64_t carry = 0;
    for (unsigned w = 0; w < ARENA_WORDS; w++) {
        uint64_t f = ar->foreign[w], before = (f << 1) | carry;   /* bit i: chunk i - 1 is foreign */
        n += 2 * (unsigned)__builtin_popcountll(f & ~before);
        n += (unsigned)__builtin_popcountll(f & before & ar->seam[w]);
        carry = f >> 63;
    }
    return n;
}

/* Pages of [i, i + n), free or busy, about to be given back: if any is foreign, the whole
 * extent becomes the arena's own mapping again instead (os_heal, which purges it too).  1 if
 * so, 0 if none is foreign, -1 if the kernel lost the extent in a refused heal: then its
 * chunks are out of the free and busy ones for good, counted in use, so none is handed out
 * and the arena is never unmapped over whatever took the hole. */
static int arena_heal(struct arena *ar, unsigned i, unsigned n)
{
    if (bits_count(ar->foreign, i, n) == 0)
        return 0;
    int healed = os_heal((void *)(ar->base + ((uintptr_t)i << HAK_CHUNK_SHIFT)), (size_t)n << HAK_CHUNK_SHIFT, ar->huge);
    if (healed > 0)
        bits_set(ar->foreign, i, n, 0);
    if (healed >= 0)
        return 1;                       /* healed, or purged and still foreign */
    if (bit_get(ar->busy, i)) {
        bits_set(ar->busy, i, n, 0);
        ar->nbusy -= n;
    } else {
        bits_set(ar->free, i, n, 0);
        ar->nfree -= n;
        free_total -= n;
    }
    used_total += n;
    return -1;
}

/* One extent of a sweep: purged now, or handed out.  0 when the hand-out is full. */
static int sweep_extent(struct arena *ar, unsigned i, unsigned n)
{
    uintptr_t p = ar->base + ((uintptr_t)i << HAK_CHUNK_SHIFT);
    size_t len = (size_t)n << HAK_CHUNK_SHIFT;
    if (arena_heal(ar, i, n))           /* here and now, not in the batch or by the purger */
        return 1;
    if (hand_out == NULL) {
        purge_add(p, len);
        return 1;
    }
    hand_out[hand_n].iov_base = (void *)p;
    hand_out[hand_n].iov_len = len;
    bits_set(ar->free, i, n, 0);
    bits_set(ar->busy, i, n, 1);
    ar->nfree -= n;
    ar->nbusy += n;
    free_total -= n;
    return ++hand_n < hand_max;
}

/* Purges free resident chunks released at least `delay` ms ago, in address order, until
 * at most `target` bytes stay resident; each extent of such chunks is one entry of the
 * batch.  Only chunks that have waited go, so what was freed last (and is likeliest to
 * be taken again) stays; delay 0 takes any. */
static void arena_sweep(uint32_t now, uint32_t delay, size_t target)
{
    int more = 1;
    for (unsigned a = 0; a < arenas_n && resident_free > target && more; a++) {
        struct arena *ar = arenas[a];
        if (ar->ndirty == 0)
            continue;
        for (unsigned i = 0; i < ar->nchunks && resident_free > target && more;) {
            uint64_t m = (ar->free[i >> 6] & ar->dirty[i >> 6]) >> (i & 63);
            if (m == 0) {                   /* no resident free chunk in the rest of this word */
                i = (i | 63) + 1;
                continue;
            }
            i += (unsigned)__builtin_ctzll(m);
            if (now - ar->freed_ms[i] < delay) {
                i++;
                continue;
            }
            size_t excess = (resident_free - target + HAK_CHUNK_SIZE - 1) >> HAK_CHUNK_SHIFT;
            unsigned j = i + 1;
            while (j < ar->nchunks && j - i < excess && bit_get(ar->free, j) && bit_get(ar->dirty, j)
                   && now - ar->freed_ms[j] >= delay)
                j++;
            bits_set(ar->dirty, i, j - i, 0);
            ar->ndirty -= j - i;
            resident_free -= (size_t)(j - i) << HAK_CHUNK_SHIFT;
            more = sweep_extent(ar, i, j - i);
            i = j;
        }
    }
    purge_flush();
}

HAK_COLD size_t arena_purge_now(size_t keep, int batched)
{
    size_t before = resident_free;
    purge_batched = batched;
    arena_sweep(arena_now_ms(), 0, keep);     /* delay 0: every chunk has waited long enough */
    return before - resident_free;
}

/* The `more` chunks right after a's extent of `chunks`, when all are free in the same arena:
 * taken (a large block grows in place).  1 on success. */
HAK_COLD int arena_extend(uintptr_t a, unsigned chunks, unsigned more)
{
    struct arena *ar = arena_of(a);
    if (ar == NULL)
        return 0;
    unsigned i = (unsigned)((a - ar->base) >> HAK_CHUNK_SHIFT) + chunks;
    if (i + more > ar->nchunks || bits_count(ar->free, i, more) != more)
        return 0;
    int clean;
    arena_claim(ar, i, more, &clean);
    return 1;
}

HAK_COLD int arena_chunk_free(uintptr_t a)
{
    struct arena *ar = arena_of(a);
    unsigned i = ar ? (unsigned)((a - ar->base) >> HAK_CHUNK_SHIFT) : 0;
    return ar && (bit_get(ar->free, i) || bit_get(ar->busy, i));
}

HAK_COLD size_t arena_in_use(void)
{
    return used_total << HAK_CHUNK_SHIFT;
}

HAK_COLD size_t arena_resident_free(void)
{
    return resident_free;
}

HAK_COLD unsigned arena_busy(void)
{
    unsigned n = 0;
    for (unsigned a = 0; a < arenas_n; a++)
        n += arenas[a]->nbusy;
    return n;
}

/* How much freed memory may stay resident waiting out its delay: twice `retain`, or as
 * much as is in use when that is more.  An amount and a share of what is live, checked on
 * every release, so the bound holds when the process goes idle (a time-based decay, as
 * jemalloc's, keeps gigabytes in a sleeping process), while a program with a big
 * working set (the large benchmark's blocks) reuses what it frees instead of faulting it
 * back in. */
static size_t arena_wait_max(size_t retain)
{
    size_t used = used_total << HAK_CHUNK_SHIFT;
    return used > 2 * retain ? used : 2 * retain;
}

/* An arena left wholly free, when the others have room to spare: back to the OS.  1 if so. */
static int arena_unmap_if_empty(struct arena *ar)
{
    if (ar->nfree != ar->nchunks || free_total - ar->nfree < ar->nchunks)
        return 0;
    resident_free -= (size_t)bits_count(ar->dirty, 0, ar->nchunks) << HAK_CHUNK_SHIFT;
    free_total -= ar->nchunks;
    os_unmap((void *)ar->base, (size_t)ar->nchunks << HAK_CHUNK_SHIFT);
    memset(ar, 0, sizeof *ar);
    return 1;
}

HAK_COLD int arena_release(uintptr_t a, unsigned chunks, size_t retain, uint32_t delay, int batched,
                           int deferred)
{
    struct arena *ar = arena_of(a);
    size_t size = (size_t)chunks << HAK_CHUNK_SHIFT;
    unsigned i = (unsigned)((a - ar->base) >> HAK_CHUNK_SHIFT);
    bits_set(ar->free, i, chunks, 1);
    ar->nfree += chunks;
    free_total += chunks;
    used_total -= chunks;
    if (arena_unmap_if_empty(ar))
        return ARENA_PURGED;
    if (delay == 0 && resident_free + size > retain) {
        if (!arena_heal(ar, i, chunks))
            os_purge((void *)a, size);
        return ARENA_PURGED;
    }
    /* Past `retain`, a released extent is purged once it has stayed free `delay` ms: memory
     * freed and soon needed again (a program's working set moving between classes) is not
     * purged and faulted back in. */
    uint32_t now = delay ? arena_now_ms() : 0;
    bits_set(ar->dirty, i, chunks, 1);
    ar->ndirty += chunks;
    for (unsigned j = i; j < i + chunks; j++)
        ar->freed_ms[j] = now;
    resident_free += size;
    if (resident_free <= retain)
        return 0;
    purge_batched = batched;
    /* arena_wait_max() bounds what waits.  Past it by an eighth, what has waited goes down
     * to `retain`, then any extent down to the bound: an eighth of the bound or more at a
     * time, so a program freeing its heap (frag's end) purges in a few sweeps, not one
     * call per region as it frees them.  `deferred`: the purger does it, unless it has
     * fallen so far behind that the freeing thread must. */
    size_t wait = arena_wait_max(retain);
    if (resident_free > wait + wait / 8) {
        if (deferred && resident_free <= ARENA_BEHIND * (wait + wait / 8))
            return ARENA_SWEEP_DUE;
        arena_sweep(now, delay, retain);
        arena_sweep(now, 0, wait);
        last_sweep_ms = now;
        return ARENA_PURGED;
    }
    if (now != last_sweep_ms) {             /* at most once per tick */
        last_sweep_ms = now;
        if (deferred)
            return ARENA_SWEEP_DUE;
        arena_sweep(now, delay, retain);
    }
    return 0;
}

HAK_COLD unsigned arena_purge_collect(struct iovec *out, unsigned max, size_t retain, uint32_t delay,
                                      uint32_t *age_ms)
{
    uint32_t now = arena_now_ms();
    size_t wait = arena_wait_max(retain);
    hand_out = out;
    hand_max = max;
    hand_n = 0;
    if (resident_free > retain)
        arena_sweep(now, delay, retain);
    if (hand_n < max && resident_free > wait)
        arena_sweep(now, 0, wait);
    hand_out = NULL;
    /* Nothing has waited long enough, yet more than `retain` waits: it will have in `delay`. */
    *age_ms = hand_n == 0 && resident_free > retain ? delay : 0;
    return hand_n;
}

HAK_COLD unsigned arena_donate_collect(struct iovec *out, unsigned max, size_t chunks, unsigned min)
{
    unsigned n = 0;
    for (unsigned a = 0; a < arenas_n && n < max && chunks >= min; a++) {
        struct arena *ar = arenas[a];
        if (ar->ndirty < min)
            continue;
        for (unsigned i = 0; i < ar->nchunks && n < max && chunks >= min;) {
            uint64_t m = (ar->free[i >> 6] & ar->dirty[i >> 6]) >> (i & 63);
            if (m == 0) {                   /* no resident free chunk in the rest of this word */
                i = (i | 63) + 1;
                continue;
            }
            i += (unsigned)__builtin_ctzll(m);
            unsigned j = i + 1, f = (unsigned)bit_get(ar->foreign, i);
            while (j < ar->nchunks && j - i < chunks && bit_get(ar->free, j) && bit_get(ar->dirty, j)
                   && (unsigned)bit_get(ar->foreign, j) == f && !(f && bit_get(ar->seam, j)))
                j++;
            if (j - i >= min) {
                bits_set(ar->dirty, i, j - i, 0);
                ar->ndirty -= j - i;
                resident_free -= (size_t)(j - i) << HAK_CHUNK_SHIFT;
                bits_set(ar->free, i, j - i, 0);
                bits_set(ar->busy, i, j - i, 1);
                ar->nfree -= j - i;
                ar->nbusy += j - i;
                free_total -= j - i;
                out[n].iov_base = (void *)(ar->base + ((uintptr_t)i << HAK_CHUNK_SHIFT));
                out[n++].iov_len = (size_t)(j - i) << HAK_CHUNK_SHIFT;
                chunks -= j - i;
            }
            i = j;
        }
    }
    return n;
}

HAK_COLD int arena_foreign_add(uintptr_t a, unsigned chunks)
{
    struct arena *ar = arena_of(a);
    if (ar == NULL)                     /* not the arenas' (a test's mapping): nothing to cut */
        return 1;
    unsigned i = (unsigned)((a - ar->base) >> HAK_CHUNK_SHIFT);
    if (arena_maps(ar) + 2 > ARENA_MAPS_MAX)
        return 0;
    bits_set(ar->foreign, i, chunks, 1);
    bits_set(ar->seam, i, chunks, 0);
    bits_set(ar->seam, i, 1, 1);
    if (i + chunks < ar->nchunks)
        bits_set(ar->seam, i + chunks, 1, 1);
    return 1;
}

HAK_COLD void arena_purge_done(const struct iovec *extents, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        uintptr_t a = (uintptr_t)extents[k].iov_base;
        struct arena *ar = arena_of(a);
        unsigned i = (unsigned)((a - ar->base) >> HAK_CHUNK_SHIFT);
        unsigned c = (unsigned)(extents[k].iov_len >> HAK_CHUNK_SHIFT);
        if (arena_heal(ar, i, c) < 0)   /* a donated run's pages moved out of a foreign mapping */
            continue;
        bits_set(ar->busy, i, c, 0);
        bits_set(ar->free, i, c, 1);
        ar->nbusy -= c;
        ar->nfree += c;
        free_total += c;
        arena_unmap_if_empty(ar);
    }
}

HAK_COLD void arena_after_fork_child(void)
{
    /* The purger did not come along: what it held goes back as free and maybe resident. */
    uint32_t now = arena_now_ms();
    for (unsigned a = 0; a < arenas_n; a++) {
        struct arena *ar = arenas[a];
        for (unsigned i = 0; ar->nbusy && i < ar->nchunks; i++) {
            if (!bit_get(ar->busy, i))
                continue;
            bits_set(ar->busy, i, 1, 0);
            bits_set(ar->free, i, 1, 1);
            bits_set(ar->dirty, i, 1, 1);
            ar->freed_ms[i] = now;
            ar->nbusy--;
            ar->nfree++;
            ar->ndirty++;
            free_total++;
            resident_free += HAK_CHUNK_SIZE;
        }
    }
}

/* Under a limit on address space (ulimit -v, RLIMIT_AS), an arena reserves a sixteenth of it
 * at most: a whole 64 MiB reserved but mostly untouched counts against the limit as much as
 * memory in use, and left a 100 MB program no room for its next big block. */
#define ARENA_LIMIT_SHARE 16u

HAK_COLD uintptr_t arena_map(unsigned chunks, unsigned *nchunks, int *huge)
{
    size_t limit = os_address_limit() / ARENA_LIMIT_SHARE >> HAK_CHUNK_SHIFT;
    unsigned want = limit < ARENA_CHUNKS ? (unsigned)limit : ARENA_CHUNKS;
    if (want < chunks)
        want = chunks;
    if (want < ARENA_CHUNKS) {
        void *m = os_map_aligned((size_t)want << HAK_CHUNK_SHIFT, HAK_CHUNK_SIZE);
        *nchunks = want;
        *huge = 0;
        return (uintptr_t)m;
    }
    size_t len = (size_t)ARENA_CHUNKS << HAK_CHUNK_SHIFT;
    void *m = os_map_aligned(len, *huge ? OS_HUGE_PAGE : HAK_CHUNK_SIZE);
    if (m != NULL) {
        if (*huge)
            os_advise_huge(m, len);
        *nchunks = ARENA_CHUNKS;
        return (uintptr_t)m;
    }
    /* Short of address space (RLIMIT_AS): an arena just big enough for this region. */
    m = os_map_aligned((size_t)chunks << HAK_CHUNK_SHIFT, HAK_CHUNK_SIZE);
    *nchunks = chunks;
    *huge = 0;
    return (uintptr_t)m;
}

HAK_COLD int arena_add(uintptr_t base, unsigned nchunks, int huge)
{
    unsigned a = 0;
    while (a < arenas_n && arenas[a]->base)
        a++;
    if (a == ARENA_MAX)
        return 0;
    if (a == arenas_n) {
        struct arena *fresh = os_map(sizeof *fresh);     /* reads as zero: an unused slot */
        if (fresh == NULL)
            return 0;
        arenas[a] = fresh;
        arenas_n++;
    }
    struct arena *ar = arenas[a];
    ar->base = base;
    ar->nchunks = nchunks;
    ar->huge = huge;
    ar->nfree = nchunks;
    bits_set(ar->free, 0, nchunks, 1);
    free_total += nchunks;
    return 1;
}
