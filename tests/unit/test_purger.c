/* Phase 99: the purger thread starts once more than [purge] retain of free memory is
 * resident, gives it back to the OS (also in an idle program), and a fork child gets its own. */
#include <check.h>
#include "check_run.h"
#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hakmem.h"
#include "testutil.h"
#include "cold/cold.h"

#define MB ((size_t)1 << 20)
#define NBLK 32768u

static void *blk[NBLK];

static int phase99(void)
{
    return HAK_PHASE99 && policy_now()->phase99;
}

/* Threads of this process named as the purger names itself. */
static unsigned purger_threads(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) && strncmp(comm, "hakmem-purge", 12) == 0)
            n++;
        fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

/* The purger threads once there are `want`, or after test_ms(ms) of waiting. */
static unsigned purger_threads_wait(unsigned want, unsigned ms)
{
    unsigned n = purger_threads();
    ms = test_ms(ms);
    for (unsigned t = 0; n != want && t < ms; t += 10) {
        usleep(10000);
        n = purger_threads();
    }
    return n;
}

static size_t blk_size(unsigned i)
{
    return 4096 + (i * 7919u) % (28 << 10);
}

/* Block i's fill byte: neighbours differ, so a block handed out twice (or overlapping
 * another) shows in blocks_intact(). */
static unsigned char blk_byte(unsigned i)
{
    return (unsigned char)(0xA5 ^ (i * 151u + (i >> 8)));
}

/* `total` bytes of 4-32 KiB mid blocks (whole regions, so they empty when freed), written. */
static unsigned fill(size_t total)
{
    unsigned i = 0;
    size_t sum = 0;
    for (; sum < total && i < NBLK; i++) {
        size_t n = blk_size(i);
        blk[i] = hak_malloc(n);
        ck_assert_ptr_nonnull(blk[i]);
        memset(blk[i], blk_byte(i), n);
        sum += n;
    }
    return i;
}

/* Every byte of the first n blocks still holds its block's fill byte: no two blocks share
 * memory.  The index of the first block that does not, or n. */
static unsigned blocks_intact(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        const unsigned char *b = blk[i];
        for (size_t k = 0; k < blk_size(i); k++)
            if (b[k] != blk_byte(i))
                return i;
    }
    return n;
}

static void drain(unsigned n)
{
    while (n)
        hak_free(blk[--n]);
}

/* A malloc that misses every cache (heap_malloc_slow's entry): where the purger is started. */
static void safe_point(void)
{
    hak_free(hak_malloc(HAK_MID_MAX + 1));
}

/* Free memory past `retain` and past the bound on what may wait: the purger starts at the
 * next malloc, takes the purge over, and RSS comes down without another call. */
START_TEST(test_purger_takes_over)
{
    size_t start = rss_bytes();
    const struct policy *p = policy_now();
    size_t keep = 2 * p->purge_cap + 48 * MB;
    for (int round = 0; round < 3; round++) {
        unsigned n = fill(320 * MB);
        ck_assert_uint_gt(rss_bytes(), start + 250 * MB);
        drain(n);
        safe_point();
        size_t end = rss_wait_below(start + keep, 10000);
        ck_assert_msg(end < start + keep, "round %d: RSS start %zu MiB, after free %zu MiB (bound +%zu MiB)",
                      round, start >> 20, end >> 20, keep >> 20);
    }
    ck_assert_uint_eq(purger_threads_wait(phase99() ? 1 : 0, 5000), phase99() ? 1 : 0);
    ck_assert_int_eq(arena_purger_running(), phase99());
}
END_TEST

/* A small program never gets the thread. */
START_TEST(test_small_program_no_purger)
{
    unsigned n = fill(8 * MB);
    drain(n);
    safe_point();
    ck_assert_uint_eq(purger_threads(), 0);
    ck_assert_int_eq(arena_purger_running(), 0);
}
END_TEST

/* Past `retain` but within the bound, freed memory waits its delay; the purger then purges
 * it though the program makes no further call (idle).  Without the purger it would stay
 * until the next release. */
START_TEST(test_idle_program_purged)
{
    const struct policy *p = policy_now();
    unsigned n = fill(320 * MB);        /* starts the purger: more than retain comes free */
    drain(n);
    safe_point();
    struct timespec nap = { 0, (long)(p->purge_delay_ms + 200) * 1000000L };
    nanosleep(&nap, NULL);              /* down to `retain`, resident and free */
    ck_assert_int_eq(arena_purger_running(), 1);
    size_t base = rss_bytes();
    n = fill(p->purge_cap + 48 * MB);
    size_t peak = rss_bytes();
    ck_assert_uint_gt(peak, base + 40 * MB);     /* retain's 64 MiB reused, 48 fresh */
    drain(n);                           /* retain + 48 MiB free: below twice retain, it waits */
    nanosleep(&nap, NULL);
    /* Down to `retain` resident: what was fresh is given back (left alone, it all stays). */
    size_t end = rss_wait_below(peak - 32 * MB, 10000);
    ck_assert_msg(end < peak - 32 * MB && end < base + p->purge_cap + 16 * MB,
                  "RSS base %zu MiB, peak %zu, idle %zu MiB", base >> 20, peak >> 20, end >> 20);
}
END_TEST

/* Idle decay, with the default policy: memory freed within `retain` (kept for the program's
 * next allocations while it is busy) goes back once nothing has been taken or given back for
 * [purge] idle, without a call.  48 MiB of mid blocks freed leave their regions' chunks free
 * and resident; the bound is what a region per class and the heap's own structures keep. */
START_TEST(test_idle_decay)
{
    const struct policy *p = policy_now();
    size_t base = rss_bytes();
    unsigned n = fill(48 * MB);         /* within retain: no purge is due */
    size_t peak = rss_bytes();
    ck_assert_uint_gt(peak, base + 40 * MB);
    drain(n);
    safe_point();                       /* more than 16 MiB free: the purger starts here */
    ck_assert_uint_gt(rss_bytes(), base + 40 * MB);    /* kept while the program may be busy */
    unsigned wait = p->purge_idle_ms + 2 * p->purge_sparse_ms + 5000;
    struct hak_totals t;
    hak_totals_get(&t);
    ck_assert_uint_gt(t.retained, 40 * MB);
    /* hakmem's own count first: what it keeps free and resident goes to nothing */
    for (unsigned ms = 0; ms < test_ms(wait) && t.retained >= MB; ms += 10) {
        usleep(10000);
        hak_totals_get(&t);
    }
    ck_assert_msg(t.retained < MB, "after %u ms idle %zu KiB still retained", wait, (size_t)t.retained >> 10);
    /* then the kernel's, but under AddressSanitizer, whose shadow of the freed pages stays */
    size_t end = rss_wait_below(base + 4 * MB, 1000);
    if (!HAK_ASAN)
        ck_assert_msg(end < base + 4 * MB, "RSS base %zu KiB, peak %zu KiB, after %u ms idle %zu KiB",
                      base >> 10, peak >> 10, wait, end >> 10);
    ck_assert_int_eq(arena_purger_running(), 1);
}
END_TEST

/* malloc_trim(0) gives back what the purger has in its hands too: it waits for the batch in
 * flight (here held half a second between taken and purged, as a purger descheduled under
 * load holds it) instead of returning with it resident. */
START_TEST(test_trim_waits_for_the_purger)
{
    size_t start = rss_bytes();
    unsigned n = fill(320 * MB);        /* starts the purger at the safe point */
    drain(n);
    safe_point();
    ck_assert_int_eq(arena_purger_running(), 1);
    arena_purger_pause(500);
    n = fill(320 * MB);
    drain(n);                           /* past the bound: the purger takes it */
    unsigned busy = 0;
    for (unsigned t = 0; t < test_ms(5000) && (busy = arena_pool_busy()) == 0; t++)
        usleep(1000);
    ck_assert_uint_gt(busy, 0);
    ck_assert_int_eq(hak_malloc_trim(0), 1);
    ck_assert_uint_eq(arena_pool_busy(), 0);
    size_t end = rss_bytes();
    arena_purger_pause(0);
    /* Under AddressSanitizer the poisoning keeps shadow pages resident: no RSS compare. */
    if (!HAK_ASAN)
        ck_assert_msg(end < start + 48 * MB, "RSS %zu MiB over the start after malloc_trim(0)", (end - start) >> 20);
}
END_TEST

/* fork() while the purger runs, some of the time with runs in its hands: the child has no
 * purger until it needs one, gets all its memory back, and starts its own. */
START_TEST(test_fork_with_purger)
{
    unsigned n = fill(320 * MB);
    drain(n);
    safe_point();
    for (int k = 0; k < 4; k++) {
        n = fill(200 * MB);
        drain(n);                       /* the purger is busy with these */
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            alarm((unsigned)test_ms(50000) / 1000);     /* not left behind if the test is killed */
            if (purger_threads() != 0 || arena_purger_running())
                _exit(1);
            size_t start = rss_bytes(), keep = 2 * policy_now()->purge_cap + 48 * MB;
            unsigned m = fill(320 * MB);
            drain(m);
            safe_point();
            if (rss_wait_below(start + keep, 10000) >= start + keep)
                _exit(2);
            if (purger_threads_wait(phase99() ? 1 : 0, 5000) != (phase99() ? 1u : 0u))
                _exit(3);
            /* What the purger held in the parent is free again in the child, and handed
             * out once: 64 MiB of blocks, all written, then all read back whole (a run
             * both free and still counted elsewhere would give two blocks one memory). */
            m = fill(64 * MB);
            if (blocks_intact(m) != m)
                _exit(4);
            drain(m);
            _exit(0);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", k, st);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("purger");
    TCase *tc = tcase_create("purger");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_small_program_no_purger);
    tcase_add_test(tc, test_purger_takes_over);
    if (phase99()) {
        tcase_add_test(tc, test_idle_program_purged);
        if (policy_now()->purge_idle_ms)
            tcase_add_test(tc, test_idle_decay);
        tcase_add_test(tc, test_trim_waits_for_the_purger);
    }
    tcase_add_test(tc, test_fork_with_purger);
    suite_add_tcase(su, tc);
    return check_run(su);
}
