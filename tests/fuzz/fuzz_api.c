/* libFuzzer target: the allocation API (hak_* only; malloc is not overridden) against a model.
 *
 * The input is a sequence of operations on a table of 64 slots.  Each op is one opcode byte
 * and its argument bytes (a missing byte reads as 0; the input ends the sequence):
 *   malloc, calloc, realloc, free (or free_sized), posix_memalign, aligned_alloc, memalign,
 *   malloc_usable_size (then the slack up to the usable size is written and kept),
 *   valloc/pvalloc, reallocarray, an impossible request (must fail with ENOMEM/EINVAL
 *   and leave any block it was given intact), and a full check of every live block.
 * Allocating into a live slot frees it first.  Sizes are skewed: mostly tiny, then mid
 * (up to just past 256 KiB), class-boundary sizes, and a few large ones up to ~4.3 MiB;
 * live bytes stay below 64 MiB (a request past that is skipped).
 *
 * The model keeps, per live block, its size and a fill byte no other live block uses, and
 * checks on every op: a new block's alignment (8; 16 for requests >= 16; at least the
 * requested alignment), malloc_usable_size >= size, calloc memory zero, no address handed
 * out twice; before realloc, free or reuse of a slot, its bytes still equal its fill
 * (blocks over 256 KiB sampled before free); after realloc the preserved prefix.  A
 * successful call leaves errno alone; a failing one returns NULL/EINVAL/ENOMEM as POSIX
 * says.  At the end of each input every byte of every live block is checked (distinct
 * fills: an overlap or a stray write shows) and all are freed.
 *
 * The model never frees twice or passes a pointer it does not own, so any misuse report
 * from hakmem is a bug: LLVMFuzzerInitialize switches [safety] on_misuse to abort.
 * HAKMEM_CONFIG=file runs the fuzzer under another policy (slots off, phases off...). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hakmem.h"

#define NSLOTS    64
#define LIVE_MAX  ((size_t)64 << 20)
#define PAGE      4096u
#define SAMPLE_ABOVE ((size_t)256 << 10)

struct block {
    uint8_t *p;
    size_t size;       /* bytes the model owns and checks: requested, or usable after op USABLE */
    uint8_t fill;
};

static struct block slots[NSLOTS];
static size_t live_bytes;
static unsigned fill_used[256];
static unsigned fill_next = 1;
static unsigned long op_index;
static const char *op_name = "";

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "fuzz_api: op %lu (%s): ", op_index, op_name);         \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        abort();                                                               \
    } while (0)

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            FAIL("check failed: " #cond ": " __VA_ARGS__);                     \
    } while (0)

/* ---- input decoding ---- */

struct in {
    const uint8_t *p;
    size_t n;
};

static unsigned get8(struct in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static unsigned get16(struct in *in)
{
    unsigned a = get8(in);
    return a | get8(in) << 8;
}

static unsigned get24(struct in *in)
{
    unsigned a = get16(in);
    return a | get8(in) << 16;
}

static const size_t edge_sizes[] = {
    0, 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 127, 128, 129, 255, 256, 257,
    511, 512, 513, 1023, 1024, 1025, 1279, 1280, 1281, 1536, 1792, 2047, 2048, 2049, 3072,
    4095, 4096, 4097, 8192, 16383, 16384, 65535, 65536, 65537, 131072, 196608,
    262143, 262144, 262145, 266240, 524288, 1048575, 1048576, 1048577, 2097152, 4194304,
};

/* Mostly tiny, then mid, class edges, and now and then a large block. */
static size_t get_size(struct in *in)
{
    unsigned b = get8(in);
    if (b < 96)
        return get8(in);                                  /* 0..255 */
    if (b < 160)
        return get16(in) % 1025;                          /* tiny, up to 1 KiB */
    if (b < 208)
        return 1024 + (size_t)get16(in) * 4;              /* mid, to just past 256 KiB */
    if (b < 240)
        return edge_sizes[get8(in) % (sizeof edge_sizes / sizeof edge_sizes[0])];
    return (256u << 10) + get24(in) % (4u << 20);         /* large, up to ~4.3 MiB */
}

/* Requests nothing can satisfy: must fail cleanly. */
static const size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX - 4096, SIZE_MAX - 65536,
    (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX - 4096,
    (size_t)1 << 62, (size_t)1 << 61,
};

/* ---- the model ---- */

static uint8_t take_fill(void)
{
    for (unsigned i = 0; i < 255; i++) {
        unsigned f = (fill_next + i) % 255 + 1;        /* 1..255 */
        if (!fill_used[f]) {
            fill_used[f] = 1;
            fill_next = f + 1;
            return (uint8_t)f;
        }
    }
    FAIL("no free fill byte");
}

static size_t first_diff(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return i;
    return n;
}

/* All n bytes equal v. */
static int all_eq(const uint8_t *p, size_t n, uint8_t v)
{
    return n == 0 || (p[0] == v && memcmp(p, p + 1, n - 1) == 0);
}

static void check_bytes(unsigned i, size_t n, uint8_t v, const char *what)
{
    const uint8_t *p = slots[i].p;
    if (!all_eq(p, n, v)) {
        size_t at = first_diff(p, n, v);
        FAIL("slot %u %p (size %zu): %s: byte %zu is 0x%02x, expected 0x%02x", i, (void *)p,
             slots[i].size, what, at, p[at], v);
    }
}

static void check_align(const void *p, size_t size, size_t align)
{
    size_t want = size >= 16 ? 16 : 8;
    if (align > want)
        want = align;
    CHECK(((uintptr_t)p & (want - 1)) == 0, "%p (size %zu) not aligned to %zu", p, size, want);
}

static void check_usable(unsigned i)
{
    size_t u = hak_malloc_usable_size(slots[i].p);
    CHECK(u >= slots[i].size, "slot %u %p: usable %zu < size %zu", i, (void *)slots[i].p, u, slots[i].size);
}

static void drop(unsigned i)
{
    fill_used[slots[i].fill] = 0;
    live_bytes -= slots[i].size;
    slots[i].p = NULL;
    slots[i].size = 0;
}

/* Before a free: every byte of blocks up to 256 KiB; of larger ones the first and last
 * 4 KiB and 64 bytes of every page between (the end of the input checks every byte). */
static void check_before_free(unsigned i)
{
    size_t n = slots[i].size;
    uint8_t v = slots[i].fill;
    if (n <= SAMPLE_ABOVE) {
        check_bytes(i, n, v, "before free");
        return;
    }
    const uint8_t *p = slots[i].p;
    int ok = all_eq(p, PAGE, v) && all_eq(p + n - PAGE, PAGE, v);
    for (size_t off = PAGE; ok && off + PAGE < n; off += PAGE)
        ok = all_eq(p + off + (off / PAGE * 64) % PAGE, 64, v);
    if (!ok)
        check_bytes(i, n, v, "before free");          /* finds and reports the first bad byte */
}

static void release(unsigned i)
{
    if (!slots[i].p)
        return;
    check_before_free(i);
    if (op_index & 1)                   /* C23's sized free must do what free does */
        hak_free_sized(slots[i].p, slots[i].size);
    else
        hak_free(slots[i].p);
    drop(i);
}

/* A fresh block in slot i: check what the allocator returned, then fill it. */
static void adopt(unsigned i, void *p, size_t size, size_t align, int zeroed)
{
    CHECK(p != NULL, "NULL for size %zu align %zu (errno %d)", size, align, errno);
    CHECK(errno == 4242, "errno changed to %d by a successful call", errno);
    check_align(p, size, align);
    for (unsigned j = 0; j < NSLOTS; j++)
        CHECK(slots[j].p != p, "%p handed out again while live in slot %u", p, j);
    slots[i].p = p;
    slots[i].size = size;
    slots[i].fill = take_fill();
    live_bytes += size;
    if (zeroed)
        check_bytes(i, size, 0, "calloc memory not zero");
    check_usable(i);
    memset(p, slots[i].fill, size);
}

static int fits(size_t size)
{
    return size <= LIVE_MAX - live_bytes;
}

/* ---- operations ---- */

enum { OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_FREE, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC, OP_MEMALIGN,
       OP_USABLE, OP_VALLOC, OP_REALLOCARRAY, OP_IMPOSSIBLE, OP_CHECK_ALL, OP_COUNT };

static const char *const op_names[OP_COUNT] = {
    "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
    "malloc_usable_size", "valloc/pvalloc", "reallocarray", "impossible request", "check all",
};

/* realloc (n == 0: plain realloc of elem bytes) or reallocarray(n, elem) of slot i. */
static void do_realloc(unsigned i, int array, size_t n, size_t elem)
{
    size_t size = array ? n * elem : elem;
    void *old_p = slots[i].p;
    size_t old = old_p ? slots[i].size : 0;
    if (size > old && !fits(size - old))
        return;
    if (old_p)
        check_bytes(i, old, slots[i].fill, "before realloc");
    errno = 4242;
    void *p = array ? hak_reallocarray(old_p, n, elem) : hak_realloc(old_p, size);
    if (!old_p) {                                         /* realloc(NULL, size) is malloc(size) */
        adopt(i, p, size, 0, 0);
        return;
    }
    if (size == 0) {                                      /* frees and returns NULL, as glibc */
        CHECK(p == NULL, "realloc(%p, 0) returned %p", old_p, p);
        drop(i);
        return;
    }
    CHECK(p != NULL, "realloc(%p, %zu) failed (errno %d)", old_p, size, errno);
    CHECK(errno == 4242, "errno changed to %d by a successful realloc", errno);
    check_align(p, size, 0);
    for (unsigned j = 0; j < NSLOTS; j++)
        CHECK(j == i || slots[j].p != p, "realloc gave %p, live in slot %u", p, j);
    slots[i].p = p;
    slots[i].size = size;
    live_bytes = live_bytes - old + size;
    check_bytes(i, old < size ? old : size, slots[i].fill, "prefix after realloc");
    check_usable(i);
    memset(p, slots[i].fill, size);
}

static void do_impossible(struct in *in, unsigned i)
{
    size_t huge = huge_sizes[get8(in) % (sizeof huge_sizes / sizeof huge_sizes[0])];
    unsigned which = get8(in) % 9;
    void *p = (void *)1;
    errno = 0;
    switch (which) {
    case 0: p = hak_malloc(huge); break;
    case 1: p = hak_calloc(huge, 2); break;
    case 2: p = hak_calloc(2 + get8(in), huge / 2 + 1); break;
    case 3: p = hak_aligned_alloc(64, huge); break;
    case 4: p = hak_memalign(4096, huge); break;
    case 5: p = hak_valloc(huge); break;
    case 6: p = hak_pvalloc(huge); break;
    case 7: {
        void *out = (void *)1;
        int r = hak_posix_memalign(&out, 32, huge);
        CHECK(r == ENOMEM, "posix_memalign(%zu) returned %d", huge, r);
        CHECK(out == (void *)1, "posix_memalign changed *out on failure");
        return;
    }
    case 8:                       /* realloc / reallocarray of a live block (or NULL) */
        if (slots[i].p)
            check_bytes(i, slots[i].size, slots[i].fill, "before impossible realloc");
        p = get8(in) & 1 ? hak_realloc(slots[i].p, huge) : hak_reallocarray(slots[i].p, 3, huge / 3 + 1);
        CHECK(p == NULL, "realloc(%p, %zu) returned %p", (void *)slots[i].p, huge, p);
        CHECK(errno == ENOMEM, "impossible realloc: errno %d", errno);
        if (slots[i].p) {
            check_bytes(i, slots[i].size, slots[i].fill, "after failed realloc");
            check_usable(i);
        }
        return;
    }
    CHECK(p == NULL, "impossible request %u of %zu returned %p", which, huge, p);
    CHECK(errno == ENOMEM, "impossible request %u of %zu: errno %d", which, huge, errno);
}

static void run_op(struct in *in)
{
    unsigned op = get8(in) % OP_COUNT;
    unsigned i = get8(in) % NSLOTS;
    op_name = op_names[op];
    switch (op) {
    case OP_MALLOC: {
        size_t size = get_size(in);
        release(i);
        if (!fits(size))
            return;
        errno = 4242;
        adopt(i, hak_malloc(size), size, 0, 0);
        break;
    }
    case OP_CALLOC: {
        unsigned nb = get8(in);
        size_t size = get_size(in);
        release(i);
        if (nb == 255) {                                  /* n * size overflows */
            errno = 0;
            void *p = hak_calloc(SIZE_MAX / (size | 2) + 1, size | 2);
            CHECK(p == NULL && errno == ENOMEM, "overflowing calloc gave %p, errno %d", p, errno);
            return;
        }
        size_t n = nb % 17;
        if (n > 1)
            size /= n;                                    /* keep the total in the size's range */
        if (!fits(n * size))
            return;
        errno = 4242;
        adopt(i, hak_calloc(n, size), n * size, 0, 1);
        break;
    }
    case OP_REALLOC:
        do_realloc(i, 0, 0, get_size(in));
        break;
    case OP_REALLOCARRAY: {
        unsigned nb = get8(in);
        size_t size = get_size(in);
        if (nb == 255) {                                  /* n * size overflows: block kept */
            errno = 0;
            void *p = hak_reallocarray(slots[i].p, SIZE_MAX / 3 + 1, 4);
            CHECK(p == NULL && errno == ENOMEM, "overflowing reallocarray gave %p, errno %d", p, errno);
            if (slots[i].p)
                check_bytes(i, slots[i].size, slots[i].fill, "after failed reallocarray");
            return;
        }
        size_t n = nb % 9;
        do_realloc(i, 1, n, n > 1 ? size / n : size);
        break;
    }
    case OP_FREE:
        if (slots[i].p)
            release(i);
        else
            hak_free(NULL);
        break;
    case OP_POSIX_MEMALIGN: {
        unsigned a = get8(in);
        size_t size = get_size(in);
        release(i);
        if (a >= 0xE0) {                                  /* not a power of two or < sizeof(void *) */
            static const size_t bad[] = { 0, 1, 2, 4, 12, 24, 48, 96, 4097, 65535, SIZE_MAX,
                                          (size_t)1 << 63 | 8 };
            void *out = (void *)1;
            int r = hak_posix_memalign(&out, bad[a % (sizeof bad / sizeof bad[0])], size);
            CHECK(r == EINVAL, "posix_memalign(bad alignment %zu) returned %d",
                  bad[a % (sizeof bad / sizeof bad[0])], r);
            CHECK(out == (void *)1, "posix_memalign changed *out on failure");
            return;
        }
        size_t align = (size_t)8 << (a % 19);             /* 8 .. 2 MiB */
        if (!fits(size + align))
            return;
        void *out = NULL;
        errno = 4242;
        int r = hak_posix_memalign(&out, align, size);
        CHECK(r == 0, "posix_memalign(%zu, %zu) returned %d", align, size, r);
        adopt(i, out, size, align, 0);
        break;
    }
    case OP_ALIGNED_ALLOC: {
        unsigned a = get8(in);
        size_t size = get_size(in);
        release(i);
        if (a >= 0xF0) {                                  /* not a power of two */
            size_t align = (size_t)3 << (a % 16);
            errno = 0;
            void *p = hak_aligned_alloc(align, size);
            CHECK(p == NULL && errno == EINVAL, "aligned_alloc(%zu) gave %p, errno %d", align, p, errno);
            return;
        }
        size_t align = (size_t)1 << (a % 22);             /* 1 .. 2 MiB */
        if (!fits(size + align))
            return;
        errno = 4242;
        adopt(i, hak_aligned_alloc(align, size), size, align, 0);
        break;
    }
    case OP_MEMALIGN: {
        size_t align = get16(in) % 5000;                  /* any value: rounded up to a power of two */
        size_t size = get_size(in);
        release(i);
        size_t want = 1;
        while (want < align)
            want <<= 1;
        if (!fits(size + want))
            return;
        errno = 4242;
        adopt(i, hak_memalign(align, size), size, want, 0);
        break;
    }
    case OP_USABLE:
        if (!slots[i].p) {
            CHECK(hak_malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) != 0");
            return;
        }
        {
            size_t u = hak_malloc_usable_size(slots[i].p);
            CHECK(u >= slots[i].size, "usable %zu < size %zu", u, slots[i].size);
            if (u - slots[i].size > LIVE_MAX - live_bytes)
                return;
            check_bytes(i, slots[i].size, slots[i].fill, "before writing the slack");
            memset(slots[i].p + slots[i].size, slots[i].fill, u - slots[i].size);   /* ours to use */
            live_bytes += u - slots[i].size;
            slots[i].size = u;
        }
        break;
    case OP_VALLOC: {
        unsigned pv = get8(in) & 1;
        size_t size = get_size(in);
        release(i);
        if (pv)
            size = size ? (size + PAGE - 1) / PAGE * PAGE : PAGE;   /* pvalloc gives whole pages */
        if (!fits(size + PAGE))
            return;
        errno = 4242;
        adopt(i, pv ? hak_pvalloc(size) : hak_valloc(size), size, PAGE, 0);
        break;
    }
    case OP_IMPOSSIBLE:
        do_impossible(in, i);
        break;
    case OP_CHECK_ALL:
        for (unsigned j = 0; j < NSLOTS; j++)
            if (slots[j].p) {
                check_bytes(j, slots[j].size, slots[j].fill, "check all");
                check_usable(j);
            }
        break;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* Misuse reports abort: the model never misuses, so a report is a bug.  The variable is
     * applied on top of HAKMEM_CONFIG (or of a minimal file) by hak_policy_load(). */
    setenv("HAKMEM_ON_MISUSE", "abort", 0);
    const char *cfg = getenv("HAKMEM_CONFIG");
    char path[64];
    if (!cfg || !*cfg) {
        static const char text[] = "[safety]\non_misuse = abort\n";
        int fd = memfd_create("fuzz_api.ini", MFD_CLOEXEC);
        CHECK(fd >= 0 && write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "memfd");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        cfg = path;
    }
    CHECK(hak_policy_load(cfg) == 0, "cannot load policy %s", cfg);
    char v[64], src[320];
    CHECK(hak_policy_get("safety.on_misuse", v, sizeof v, src, sizeof src) == 0, "policy_get");
    if (strcmp(v, "abort"))
        fprintf(stderr, "fuzz_api: warning: on_misuse = %s (%s): misuse reports will not abort\n", v, src);
    char classes[64], cap[16], p90[8], p91[8];
    hak_policy_get("slots.classes", classes, sizeof classes, NULL, 0);
    hak_policy_get("slots.capacity", cap, sizeof cap, NULL, 0);
    hak_policy_get("phases.phase90", p90, sizeof p90, NULL, 0);
    hak_policy_get("phases.phase91", p91, sizeof p91, NULL, 0);
    fprintf(stderr, "fuzz_api: policy %s: slots %s x%s, phase90 %s, phase91 %s, on_misuse %s\n",
            cfg == path ? "(defaults)" : cfg, classes, cap, p90, p91, v);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = { data, size };
    op_index = 0;
    while (in.n > 0) {
        run_op(&in);
        op_index++;
    }
    op_name = "end of input";
    for (unsigned j = 0; j < NSLOTS; j++)
        if (slots[j].p) {
            check_bytes(j, slots[j].size, slots[j].fill, "end of input");
            check_usable(j);
        }
    for (unsigned j = 0; j < NSLOTS; j++)
        if (slots[j].p) {
            hak_free(slots[j].p);
            drop(j);
        }
    CHECK(live_bytes == 0, "live bytes %zu after freeing everything", live_bytes);
    return 0;
}
