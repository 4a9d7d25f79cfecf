/* The hardened build (-Dhardened=true): a write of 1-16 bytes past the end of a block is
 * caught when it is freed, an overwritten free-list link is caught before it is followed,
 * and misuse aborts after its report unless the policy says report. */
#include <check.h>
#include "check_run.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hakmem.h"
#include "testutil.h"
#include "cold/cold.h"
#include "common/sanitize.h"
#include "region/map.h"
#include "route/route.h"

static char report[4096];

START_TEST(test_overflow_caught_on_free)
{
    size_t sizes[] = { 1, 8, 17, 100, 128, 1000, 5000, 70000, 200000 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t over = 1; over <= 16; over++) {
            unsigned char *p = hak_malloc(sizes[i]);
            ck_assert_uint_eq(hak_malloc_usable_size(p), sizes[i]);
            memset(p, 0x11, sizes[i]);
            p[sizes[i] + over - 1] ^= 0xFF;       /* one stray byte, `over` bytes past the end */
            hak_free_reported(p, report, sizeof report);
            ck_assert_msg(strstr(report, "heap overflow") != NULL, "size %zu, %zu past: '%s'", sizes[i], over, report);
            ck_assert_ptr_nonnull(strstr(report, "hakmem: free(0x"));
        }
    }
}
END_TEST

START_TEST(test_clean_blocks_pass)
{
    for (size_t n = 0; n < 300000; n = n * 3 / 2 + 1) {
        unsigned char *p = hak_malloc(n);
        memset(p, 0xAB, n);
        p = hak_realloc(p, n + 1);
        memset(p, 0xCD, n + 1);
        hak_free_reported(p, report, sizeof report);
        ck_assert_str_eq(report, "");
    }
}
END_TEST

START_TEST(test_corrupt_link_caught)
{
    /* C2 (32 B) on the per-thread list: the freed block's first word is its link */
    ck_assert_int_eq(policy_load_text("[route]\nC2 = tlist\n"), 0);
    void *a = hak_malloc(8), *b = hak_malloc(8);
    hak_free(a);
    hak_free(b);                                  /* list: b -> a */
    static char target[64];
    HAK_UNPOISON(b, sizeof(void *));              /* this write is the point: let ASan allow it */
    *(void **)b = target;                         /* an attacker's pointer, unencoded */
    struct capture c;
    stderr_capture_begin(&c);
    void *x = hak_malloc(8), *y = hak_malloc(8);
    stderr_capture_end(&c, report, sizeof report);
    ck_assert_ptr_eq(x, b);
    ck_assert_ptr_ne(y, target);
    ck_assert_ptr_ne(y, a);                       /* the list was cut, not followed */
    ck_assert_ptr_nonnull(strstr(report, "free-list link overwritten"));
    ck_assert_int_eq(policy_load_text(""), 0);
}
END_TEST

START_TEST(test_abort_by_default)
{
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("HAKMEM_ON_MISUSE");            /* back to the hardened default: abort */
        char path[] = "/tmp/hak-hard-XXXXXX";
        int pf = mkstemp(path);
        ck_assert_int_eq(write(pf, "[phases]\nphase91 = on\n", 22), 22);
        close(pf);
        ck_assert_int_eq(hak_policy_load(path), 0);
        unlink(path);
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        char *p = hak_malloc(64);
        hak_free(p);
        hak_free(p);                              /* double free: report, then abort */
        _exit(0);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st));
    ck_assert_int_eq(WTERMSIG(st), SIGABRT);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("hardened");
    TCase *tc = tcase_create("hardened");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_overflow_caught_on_free);
    tcase_add_test(tc, test_clean_blocks_pass);
    tcase_add_test(tc, test_corrupt_link_caught);
    tcase_add_test(tc, test_abort_by_default);
    suite_add_tcase(su, tc);
    return check_run(su);
}
