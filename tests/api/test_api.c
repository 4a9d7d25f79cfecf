/* The malloc family's POSIX contract, tested through the exported names of libhakmem.so
 * (this executable links it, so every malloc in the process is hakmem's). */
#define _GNU_SOURCE
#include <check.h>
#include "check_run.h"
#include "config.h"
#include "hakmem.h"
#include "testutil.h"
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "variant_check.h"

/* Sizes on both sides of every class boundary, then large ones. */
static size_t boundary_sizes(size_t *out)
{
    static const size_t classes[] = { 8, 16, 32, 64, 128, 256, 512, 1024, 1280, 1536, 1792, 2048,
        2560, 3072, 3584, 4096, 5120, 8192, 10240, 16384, 20480, 32768, 40960, 65536, 81920,
        131072, 163840, 196608, 229376, 262144, 262145, 524288, 1048576, 4194304 };
    size_t n = 0;
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        out[n++] = classes[i] - 1;
        out[n++] = classes[i];
        out[n++] = classes[i] + 1;
    }
    return n;
}

START_TEST(test_is_hakmem)
{
    void *p = malloc(100);
    /* hakmem's class size, or the exact request in hardened builds; glibc says 104 */
    ck_assert_uint_eq(malloc_usable_size(p), HAK_HARDENED ? 100 : 112);
    free(p);
}
END_TEST

START_TEST(test_alignment_16)
{
    void *keep[4096];
    for (size_t n = 16; n < 4096 + 16; n++) {
        keep[n - 16] = malloc(n);
        ck_assert_ptr_nonnull(keep[n - 16]);
        ck_assert_uint_eq((uintptr_t)keep[n - 16] % 16, 0);
    }
    for (size_t n = 16; n < 4096 + 16; n++)
        free(keep[n - 16]);
    for (size_t n = 4096; n < ((size_t)8 << 20); n = n * 5 / 4 + 3) {
        void *p = malloc(n);
        ck_assert_ptr_nonnull(p);               /* NULL would pass the modulo */
        ck_assert_uint_eq((uintptr_t)p % 16, 0);
        free(p);
    }
    for (size_t n = 1; n < 16; n++) {          /* smaller requests: aligned to their class */
        void *p = malloc(n);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % (n <= 8 ? 8 : 16), 0);
        free(p);
    }
}
END_TEST

START_TEST(test_malloc_zero)
{
    void *a = malloc(0), *b = malloc(0);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    free(a);
    free(b);
}
END_TEST

/* A thread's first call of each kind with size 0: a new thread starts on the static
 * empty heap, whose size table once sent malloc(0) to a slot top outside the heap. */
static void *first_call_zero(void *arg)
{
    int kind = (int)(intptr_t)arg;
    void *p = kind == 0 ? malloc(0) : kind == 1 ? realloc(NULL, 0)
            : kind == 2 ? calloc(0, 0) : reallocarray(NULL, 0, 0);
    if (p != NULL)
        memset(p, 0, malloc_usable_size(p));
    free(p);
    return p;
}

START_TEST(test_zero_as_first_call)
{
    for (int kind = 0; kind < 4; kind++) {
        pthread_t t;
        void *p = NULL;
        ck_assert_int_eq(pthread_create(&t, NULL, first_call_zero, (void *)(intptr_t)kind), 0);
        ck_assert_int_eq(pthread_join(t, &p), 0);
        ck_assert_msg(p != NULL, "kind %d: a zero-size request returned NULL", kind);
    }
}
END_TEST

START_TEST(test_enomem)
{
    size_t sizes[] = { SIZE_MAX, SIZE_MAX - 4096, (size_t)PTRDIFF_MAX + 1, (size_t)1 << 62, (size_t)1 << 50 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = 0;
        ck_assert_ptr_null(malloc(sizes[i]));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(calloc(1, sizes[i]));
        ck_assert_int_eq(errno, ENOMEM);
        void *p = malloc(10);
        errno = 0;
        ck_assert_ptr_null(realloc(p, sizes[i]));
        ck_assert_int_eq(errno, ENOMEM);
        free(p);                                /* the original block survived */
        void *q = NULL;
        ck_assert_int_eq(posix_memalign(&q, 64, sizes[i]), ENOMEM);
    }
}
END_TEST

START_TEST(test_calloc_reallocarray_overflow)
{
    volatile size_t half = SIZE_MAX / 2, big = (size_t)1 << 33;   /* volatile: no compile-time warning */
    errno = 0;
    ck_assert_ptr_null(calloc(half, 3));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(calloc(big, big));
    ck_assert_int_eq(errno, ENOMEM);
    char *p = malloc(32);
    strcpy(p, "still here");
    errno = 0;
    ck_assert_ptr_null(reallocarray(p, half, 3));
    ck_assert_int_eq(errno, ENOMEM);
    ck_assert_str_eq(p, "still here");
    p = reallocarray(p, 100, 10);
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p, "still here");
    ck_assert_uint_ge(malloc_usable_size(p), 1000);
    free(p);
}
END_TEST

START_TEST(test_posix_memalign_einval)
{
    size_t bad[] = { 0, 1, 2, 3, 4, 12, 24, 48, 100, 4097, (size_t)1 << 63 | 1 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *p = (void *)0x1234;
        ck_assert_int_eq(posix_memalign(&p, bad[i], 64), EINVAL);
        ck_assert_ptr_eq(p, (void *)0x1234);      /* untouched on failure */
    }
    errno = 0;
    volatile size_t not_pow2 = 24;      /* through a variable: clang warns on a constant */
    ck_assert_ptr_null(aligned_alloc(not_pow2, 64));
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_alignments_up_to_4mib)
{
    size_t sizes[] = { 0, 1, 8, 24, 100, 1000, 5000, 70000, 300000, 2000000 };
    for (size_t al = sizeof(void *); al <= ((size_t)4 << 20); al <<= 1) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p = NULL;
            ck_assert_int_eq(posix_memalign(&p, al, sizes[i]), 0);
            ck_assert_ptr_nonnull(p);               /* NULL would pass the modulo */
            ck_assert_uint_eq((uintptr_t)p % al, 0);
            ck_assert_uint_ge(malloc_usable_size(p), sizes[i]);
            memset(p, 0xCD, sizes[i]);
            free(p);
            p = aligned_alloc(al, sizes[i]);
            ck_assert_ptr_nonnull(p);
            ck_assert_uint_eq((uintptr_t)p % al, 0);
            free(p);
            p = memalign(al, sizes[i]);
            ck_assert_ptr_nonnull(p);
            ck_assert_uint_eq((uintptr_t)p % al, 0);
            free(p);
        }
    }
    void *v = valloc(100), *pv = pvalloc(5000);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(pv);
    ck_assert_uint_eq((uintptr_t)v % 4096, 0);
    ck_assert_uint_eq((uintptr_t)pv % 4096, 0);
    ck_assert_uint_ge(malloc_usable_size(pv), 8192);
    free(v);
    free(pv);
}
END_TEST

START_TEST(test_usable_size_writable)
{
    ck_assert_uint_eq(malloc_usable_size(NULL), 0);
    for (size_t n = 0; n < ((size_t)3 << 20); n = n < 64 ? n + 1 : n * 9 / 8) {
        unsigned char *p = malloc(n);
        ck_assert_ptr_nonnull(p);
        size_t u = malloc_usable_size(p);
        ck_assert_uint_ge(u, n);
        /* every usable byte holds what was written (a usable size of 0 only for 0 bytes) */
        ck_assert_msg(u > 0 || n == 0, "malloc(%zu): usable size 0", n);
        memset(p, 0xEE, u);
        for (size_t k = 0; k < u; k++)
            if (p[k] != 0xEE)
                ck_abort_msg("malloc(%zu): usable byte %zu of %zu not writable", n, k, u);
        free(p);
    }
}
END_TEST

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + seed);
}

static void verify(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + seed))
            ck_abort_msg("byte %zu of %zu lost", i, n);
}

START_TEST(test_realloc_every_boundary)
{
    size_t s[128];
    size_t ns = boundary_sizes(s);
    /* grow through every boundary, then shrink back through them */
    unsigned char *p = malloc(1);
    fill(p, 1, 3);
    size_t have = 1;
    for (size_t i = 0; i < ns; i++) {
        p = realloc(p, s[i]);
        ck_assert_ptr_nonnull(p);
        verify(p, have < s[i] ? have : s[i], 3);
        fill(p, s[i], 3);
        have = s[i];
    }
    for (size_t i = ns; i-- > 0;) {
        p = realloc(p, s[i]);
        verify(p, s[i], 3);
        have = s[i];
    }
    free(p);
    /* every pair of boundaries, both ways */
    for (size_t i = 0; i < ns; i += 2)
        for (size_t j = 1; j < ns; j += 3) {
            unsigned char *q = malloc(s[i]);
            fill(q, s[i], (unsigned)j);
            q = realloc(q, s[j]);
            verify(q, s[i] < s[j] ? s[i] : s[j], (unsigned)j);
            free(q);
        }
    ck_assert_ptr_null(realloc(malloc(10), 0));
    void *r = realloc(NULL, 77);
    ck_assert_uint_ge(malloc_usable_size(r), 77);
    free(r);
}
END_TEST

START_TEST(test_calloc_zeroes_dirty_blocks)
{
    size_t s[128];
    size_t ns = boundary_sizes(s);
    for (size_t i = 0; i < ns; i++) {
        for (int round = 0; round < 3; round++) {
            unsigned char *d = malloc(s[i]);
            memset(d, 0xFF, malloc_usable_size(d));
            free(d);
            unsigned char *z = calloc(1, s[i]);
            ck_assert_ptr_nonnull(z);
            for (size_t k = 0; k < s[i]; k++)
                if (z[k])
                    ck_abort_msg("calloc(%zu) byte %zu not zero (reused %d)", s[i], k, z == d);
            free(z);
        }
    }
    ck_assert_ptr_nonnull(calloc(0, 0));
}
END_TEST

START_TEST(test_errno_untouched_on_success)
{
    for (size_t n = 1; n < ((size_t)2 << 20); n *= 3) {
        errno = 1234;
        void *p = malloc(n);
        p = realloc(p, n * 2);
        free(p);
        void *q = calloc(n, 1);
        free(q);
        ck_assert_int_eq(errno, 1234);
    }
}
END_TEST

/* glibc's __libc_* names are hakmem's too: a block crosses between them and the standard
 * names (glibc would abort on a pointer it did not allocate). hak_malloc_usable_size()
 * reports a pointer that is not hakmem's and returns 0. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void __libc_cfree(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

START_TEST(test_libc_names)
{
    char *a = __libc_malloc(100);
    ck_assert_uint_ge(hak_malloc_usable_size(a), 100);
    memset(a, 'a', 100);
    a = realloc(a, 5000);
    ck_assert_uint_ge(hak_malloc_usable_size(a), 5000);
    ck_assert_int_eq(a[99], 'a');
    free(a);

    char *b = malloc(100);
    memset(b, 'b', 100);
    b = __libc_realloc(b, 300);
    ck_assert_uint_ge(hak_malloc_usable_size(b), 300);
    ck_assert_int_eq(b[99], 'b');
    __libc_free(b);

    unsigned char *c = __libc_calloc(64, 64);
    ck_assert_uint_ge(hak_malloc_usable_size(c), 64 * 64);
    for (size_t i = 0; i < 64 * 64; i++)
        ck_assert_uint_eq(c[i], 0);
    __libc_cfree(c);
    errno = 0;
    ck_assert_ptr_null(__libc_calloc(SIZE_MAX / 2, 3));
    ck_assert_int_eq(errno, ENOMEM);

    void *m = __libc_memalign(4096, 100);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq((uintptr_t)m % 4096, 0);
    ck_assert_uint_ge(hak_malloc_usable_size(m), 100);
    free(m);
    void *v = __libc_valloc(10);
    void *pv = __libc_pvalloc(5000);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_nonnull(pv);
    ck_assert_uint_eq((uintptr_t)v % 4096, 0);
    ck_assert_uint_eq((uintptr_t)pv % 4096, 0);
    ck_assert_uint_ge(hak_malloc_usable_size(pv), 8192);
    __libc_free(v);
    __libc_free(pv);
    __libc_free(NULL);
}
END_TEST

/* C23's free_sized and free_aligned_sized free the block (glibc 2.36 has neither, so
 * without hakmem's they would not link). */
extern void free_sized(void *, size_t);
extern void free_aligned_sized(void *, size_t, size_t);

/* p was freed: hak_malloc_usable_size(p) must say so.  Asked in a child (with on_misuse =
 * abort, the hardened default, the report ends the process): hakmem reports the pointer
 * (a use after free, or no block starting there once a mid block merged with its free
 * neighbours) on stderr and then returns 0 (report) or aborts (abort).  A block still live gives
 * its size and no report, and fails either way. */
static void assert_freed(void *p, const char *what, size_t size)
{
    char mode[32] = "", out[1024];
    ck_assert_int_eq(hak_policy_get("safety.on_misuse", mode, sizeof mode, NULL, 0), 0);
    int abort_expected = strcmp(mode, "abort") == 0;
    int fd;
    pid_t pid = fork_piped(&fd);
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd, 2);                    /* the report goes into the pipe */
        size_t u = hak_malloc_usable_size(p);
        dprintf(fd, "usable=%zu\n", u);
        _exit(0);
    }
    size_t n = 0;
    ssize_t r;
    while (n < sizeof out - 1 && (r = read(fd, out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(fd);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(strstr(out, "hakmem: malloc_usable_size(") != NULL,
                  "%s(%zu bytes): no misuse report for the freed block; child said: %s", what, size, out);
    if (abort_expected)
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
                      "%s(%zu bytes): on_misuse = abort, yet the child went on (status %#x): %s", what, size, st, out);
    else
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "usable=0\n"),
                      "%s(%zu bytes): freed block has a usable size (status %#x): %s", what, size, st, out);
}

START_TEST(test_free_sized)
{
    static const size_t sizes[] = { 1, 16, 100, 1000, 5000, 70000, (size_t)1 << 20 };
    for (int round = 0; round < 2; round++) {
        void *p[7], *q[7];
        for (int i = 0; i < 7; i++) {
            p[i] = malloc(sizes[i]);
            ck_assert_ptr_nonnull(p[i]);
            ck_assert_int_eq(posix_memalign(&q[i], 256, sizes[i]), 0);
            memset(p[i], 1, sizes[i]);
            memset(q[i], 2, sizes[i]);
        }
        for (int i = 0; i < 7; i++) {
            free_sized(p[i], sizes[i]);
            free_aligned_sized(q[i], 256, sizes[i]);
            /* freed, in every build: reported (and 0, or an abort where misuse aborts) */
            assert_freed(p[i], "free_sized", sizes[i]);
            assert_freed(q[i], "free_aligned_sized", sizes[i]);
        }
    }
    free_sized(NULL, 0);
    free_aligned_sized(NULL, 64, 0);
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    variant_check(argv);            /* under tests/equivalence: the variant is in force */
    Suite *su = suite_create("api");
    TCase *tc = tcase_create("posix");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_is_hakmem);
    tcase_add_test(tc, test_alignment_16);
    tcase_add_test(tc, test_malloc_zero);
    tcase_add_test(tc, test_zero_as_first_call);
    tcase_add_test(tc, test_enomem);
    tcase_add_test(tc, test_calloc_reallocarray_overflow);
    tcase_add_test(tc, test_posix_memalign_einval);
    tcase_add_test(tc, test_alignments_up_to_4mib);
    tcase_add_test(tc, test_usable_size_writable);
    tcase_add_test(tc, test_realloc_every_boundary);
    tcase_add_test(tc, test_calloc_zeroes_dirty_blocks);
    tcase_add_test(tc, test_errno_untouched_on_success);
    tcase_add_test(tc, test_libc_names);
    tcase_add_test(tc, test_free_sized);
    suite_add_tcase(su, tc);
    return check_run(su);
}
