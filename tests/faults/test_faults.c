/* Fault injection: when the OS refuses memory (a test hook in the OS layer, or RLIMIT_AS
 * in a child), every allocating call returns NULL with ENOMEM, nothing crashes, the heap
 * stays intact, and allocation works again once memory is back. */
#include <check.h>
#include "check_run.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hakmem.h"
#include "cold/cold.h"
#include "os/os.h"

#define ASSERT_ENOMEM(expr)                  \
    do {                                     \
        errno = 0;                           \
        void *q_ = (expr);                   \
        ck_assert_ptr_null(q_);              \
        ck_assert_int_eq(errno, ENOMEM);     \
    } while (0)

START_TEST(test_every_call_fails_cleanly)
{
    char *keep = hak_malloc(100);             /* a live block from before the outage */
    memset(keep, 0x5A, 100);
    os_fail_after(0);
    ASSERT_ENOMEM(hak_malloc(1 << 20));       /* large: a new mapping */
    ASSERT_ENOMEM(hak_calloc(1, 3 << 20));
    ASSERT_ENOMEM(hak_aligned_alloc(1 << 16, 1 << 20));
    void *p = NULL;
    ck_assert_int_eq(hak_posix_memalign(&p, 4096, 2 << 20), ENOMEM);
    ck_assert_ptr_null(p);
    errno = 0;
    ck_assert_ptr_null(hak_realloc(keep, 5 << 20));
    ck_assert_int_eq(errno, ENOMEM);
    for (int i = 0; i < 100; i++)             /* the old block survived the failed realloc */
        ck_assert_uint_eq((unsigned char)keep[i], 0x5A);
    /* tiny blocks: served until the arena space already mapped runs out, then ENOMEM */
    enum { MAX = 1 << 20 };
    void **tiny = malloc(MAX * sizeof *tiny);
    size_t n = 0;
    for (; n < MAX; n++) {
        errno = EDOM;                         /* a sentinel: the failing call must set ENOMEM */
        if ((tiny[n] = hak_malloc(1024)) == NULL)
            break;
        ck_assert_int_eq(errno, EDOM);        /* a success leaves errno alone */
    }
    ck_assert_uint_lt(n, MAX);
    ck_assert_int_eq(errno, ENOMEM);
    /* mid: no chunk is left for a new region either */
    ASSERT_ENOMEM(hak_malloc(100000));
    ASSERT_ENOMEM(hak_calloc(1000, 100));
    /* memory is back: everything works, and nothing handed out twice */
    os_fail_after(-1);
    char *big = hak_malloc(1 << 20);
    ck_assert_ptr_nonnull(big);
    memset(big, 1, 1 << 20);
    void *more = hak_malloc(16);
    ck_assert_ptr_nonnull(more);
    for (size_t i = 0; i < n; i++)
        ck_assert_ptr_ne(tiny[i], more);
    for (size_t i = 0; i < n; i++)
        hak_free(tiny[i]);
    hak_free(more);
    hak_free(big);
    hak_free(keep);
    free(tiny);
}
END_TEST

START_TEST(test_fail_midway_through_refills)
{
    /* the n-th mapping fails, for many n: whatever state the allocator was in, it recovers */
    for (long after = 0; after < 24; after++) {
        void *blk[512];
        unsigned got = 0;
        os_fail_after(after);
        for (unsigned i = 0; i < 512; i++) {
            size_t sz = (size_t)16 << (i % 15);          /* 16 B .. 256 KiB, then large */
            errno = EDOM;                             /* not left over from the last failure */
            blk[i] = hak_malloc(sz + (i % 3 == 0 ? 300000 : 0));
            if (blk[i])
                memset(blk[i], (int)i, 16), got++;
            else
                ck_assert_int_eq(errno, ENOMEM);
        }
        os_fail_after(-1);
        for (unsigned i = 0; i < 512; i++)
            if (blk[i]) {
                ck_assert_uint_eq(((unsigned char *)blk[i])[15], (unsigned char)i);
                hak_free(blk[i]);
            }
        void *ok = hak_malloc(200000);
        ck_assert_ptr_nonnull(ok);
        hak_free(ok);
        if (after >= 4)                       /* by then the heap and some regions exist */
            ck_assert_uint_gt(got, 0);
    }
}
END_TEST

/* A refused mremap that hakmem works around (a fresh mapping, pages moved) is no failure
 * of the caller's: a successful realloc leaves errno as it was. */
START_TEST(test_refused_remap_keeps_errno)
{
    size_t old = (size_t)1 << 20, big = (size_t)100 << 20;   /* beyond any cached span */
    char *p = hak_malloc(old);
    ck_assert_ptr_nonnull(p);
    memset(p, 0x3C, old);
    errno = 4242;
    os_fail_once_after(0);                    /* the mremap fails, the mmap after it works */
    char *q = hak_realloc(p, big);
    os_fail_after(-1);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(errno, 4242);
    for (size_t i = 0; i < old; i += 4096)
        ck_assert_uint_eq((unsigned char)q[i], 0x3C);
    memset(q, 1, big);
    hak_free(q);
}
END_TEST

static size_t vm_size(void)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

START_TEST(test_rlimit_as_child)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = { vm_size() + (256u << 20), vm_size() + (256u << 20) };
        if (setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(10);
        static void *blk[4096];
        size_t n = 0;
        for (; n < 4096; n++) {
            errno = EDOM;                         /* a sentinel, not a leftover ENOMEM */
            if ((blk[n] = hak_malloc(1 << 20)) == NULL)
                break;
            memset(blk[n], 7, 4096);
        }
        if (n == 4096 || errno != ENOMEM)
            _exit(11);                            /* the limit never bit, or wrong errno */
        size_t small = 0;
        void *s;
        for (;;) {
            errno = EDOM;
            if ((s = hak_malloc(3000)) == NULL || ++small >= (1u << 22))
                break;
        }
        if (s != NULL)
            _exit(14);                            /* 4 Mi blocks of 3000 bytes under the limit */
        if (errno != ENOMEM)
            _exit(12);
        for (size_t i = 0; i < n; i++)
            hak_free(blk[i]);
        void *again = hak_malloc(1 << 20);        /* memory is back */
        if (again == NULL)
            _exit(13);
        memset(again, 1, 1 << 20);
        hak_free(again);
        _exit(0);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_call_fails_cleanly);
    tcase_add_test(tc, test_fail_midway_through_refills);
    tcase_add_test(tc, test_refused_remap_keeps_errno);
    tcase_add_test(tc, test_rlimit_as_child);
    suite_add_tcase(su, tc);
    return check_run(su);
}
