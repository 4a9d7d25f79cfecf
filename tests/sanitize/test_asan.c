/* In an AddressSanitizer build hakmem poisons what it does not hand out, so ASan sees
 * inside regions: a use after free, a write past a block, or a read of carved-but-unused
 * memory is reported by ASan itself.  Each case runs in a child that ASan must stop. */
#include <check.h>
#include "check_run.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hakmem.h"
#include "testutil.h"

static volatile char sink;

/* Runs fn in a child with stderr captured; returns what the child printed. */
static const char *child_report(void (*fn)(void), int *status)
{
    static char out[8192];
    char path[] = "/tmp/hak-asan-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        fn();
        _exit(0);
    }
    waitpid(pid, status, 0);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, out, sizeof out - 1);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    return out;
}

static void use_after_free(void)
{
    char *p = hak_malloc(100);
    hak_free(p);
    sink = p[10];
}

static void overflow_into_next(void)
{
    char *p = hak_malloc(128);
    sink = p[128 + 130];                /* inside the region, in a block nobody was given */
}

static void mid_use_after_free(void)
{
    char *p = hak_malloc(5000);
    hak_free(p);
    p[4000] = 1;
}

START_TEST(test_asan_sees_inside_regions)
{
    void (*cases[])(void) = { use_after_free, overflow_into_next, mid_use_after_free };
    for (unsigned i = 0; i < 3; i++) {
        int st = 0;
        const char *out = child_report(cases[i], &st);
        ck_assert_msg(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "case %u: ASan did not stop the child", i);
        ck_assert_msg(strstr(out, "AddressSanitizer") != NULL, "case %u: %s", i, out);
    }
}
END_TEST

START_TEST(test_clean_use_passes)
{
    for (size_t n = 1; n < 300000; n = n * 2 + 1) {
        char *p = hak_malloc(n);
        memset(p, 1, n);
        p = hak_realloc(p, n * 2);
        memset(p, 2, n * 2);
        hak_free(p);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("asan");
    TCase *tc = tcase_create("asan");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_asan_sees_inside_regions);
    tcase_add_test(tc, test_clean_use_passes);
    suite_add_tcase(su, tc);
    return check_run(su);
}
