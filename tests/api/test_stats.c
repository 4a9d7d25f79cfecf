/* malloc.h's statistics and trim calls and hakmem's process totals, through the names
 * libhakmem.so exports (this executable links it): answers from hakmem, not glibc's idle heap. */
#define _GNU_SOURCE
#include <check.h>
#include "check_run.h"
#include "config.h"
#include "hakmem.h"
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
/* meson.build runs this with [purge] retain = 16M and a delay no test waits out, so what
 * stays resident after the frees is what the policy retains, not what a clock purged. */
#define RETAIN (16 * MIB)

/* Resident bytes, as the kernel counts them (the second field of /proc/self/statm). */
static size_t rss(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    ck_assert_int_gt(n, 0);
    buf[n] = 0;
    unsigned long size, resident;
    ck_assert_int_eq(sscanf(buf, "%lu %lu", &size, &resident), 2);
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* 200 MB of mid blocks (spans and regions) and large blocks (arena extents and mappings of
 * their own, which the large page cache keeps), touched, then freed: malloc_trim(0) gives
 * back at once what the arenas and the cache retained. */
START_TEST(test_trim_gives_back_at_once)
{
    static void *mid[800], *large[16];
    unsigned nm = 0, nl = 0;
    size_t base = rss();
    for (unsigned i = 0; i < 400; i++)
        mid[nm++] = malloc(128 * 1024);
    for (unsigned i = 0; i < 200; i++)
        mid[nm++] = malloc(250 * 1024);
    for (unsigned i = 0; i < 12; i++)
        large[nl++] = malloc(4 * MIB);
    for (unsigned i = 0; i < 2; i++)
        large[nl++] = malloc(24 * MIB);
    for (unsigned i = 0; i < nm; i++) {
        ck_assert_ptr_nonnull(mid[i]);
        memset(mid[i], 1, malloc_usable_size(mid[i]));
    }
    for (unsigned i = 0; i < nl; i++) {
        ck_assert_ptr_nonnull(large[i]);
        memset(large[i], 1, malloc_usable_size(large[i]));
    }
    ck_assert_uint_gt(rss(), base + 190 * MIB);
    for (unsigned i = 0; i < nm; i++)
        free(mid[i]);
    for (unsigned i = 0; i < nl; i++)
        free(large[i]);
    size_t before = rss();
    ck_assert_msg(before > base + RETAIN, "the frees kept only %zu MiB: nothing for the test to trim",
                  (before - base) / MIB);
    ck_assert_int_eq(malloc_trim(0), 1);
    size_t after = rss();
    ck_assert_msg(after <= base + RETAIN, "after malloc_trim(0) RSS is %zu MiB above the start (was %zu MiB; cap %zu)",
                  after > base ? (after - base) / MIB : 0, (before - base) / MIB, RETAIN / MIB);
    struct hak_totals t;
    hak_totals_get(&t);
    ck_assert_uint_eq(t.retained, 0);
    ck_assert_uint_gt(t.purged, 0);
    ck_assert_int_eq(malloc_trim(0), 0);           /* nothing left to give back */
}
END_TEST

START_TEST(test_trim_keeps_pad)
{
    void *p[64];
    for (unsigned i = 0; i < 64; i++)
        p[i] = malloc(250 * 1024);
    for (unsigned i = 0; i < 64; i++)
        memset(p[i], 1, 250 * 1024);
    for (unsigned i = 0; i < 64; i++)
        free(p[i]);
    malloc_trim(4 * MIB);
    struct hak_totals t;
    hak_totals_get(&t);
    ck_assert_uint_le(t.retained, 4 * MIB);
}
END_TEST

START_TEST(test_totals_and_mallinfo2)
{
    struct hak_totals t0, t1, t2;
    hak_totals_get(&t0);
    void *p = malloc(40 * MIB);                    /* a mapping of its own */
    void *q = malloc(3 * MIB);                     /* arena chunks */
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    memset(p, 1, 40 * MIB);
    hak_totals_get(&t1);
    ck_assert_uint_eq(t1.large_blocks, t0.large_blocks + 2);
    ck_assert_uint_ge(t1.large_bytes, t0.large_bytes + 43 * MIB);
    ck_assert_uint_ge(t1.in_use, t0.in_use + 43 * MIB);
    ck_assert_uint_ge(t1.mapped, t1.in_use);
    ck_assert_uint_eq(t1.resident, t1.in_use + t1.retained);
    ck_assert_uint_ge(t1.peak, t1.resident);
    ck_assert_uint_ge(t1.heaps, 1);
    struct mallinfo2 m = mallinfo2();
    ck_assert_uint_eq(m.hblks, t1.large_blocks);
    ck_assert_uint_ge(m.hblkhd, 43 * MIB);
    ck_assert_uint_ge(m.uordblks, 43 * MIB);
    ck_assert_uint_ge(m.arena, m.uordblks);
    /* glibc deprecates mallinfo, but programs still call it: hakmem answers it too */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo m1 = mallinfo();
#pragma GCC diagnostic pop
    ck_assert_int_eq(m1.hblks, (int)m.hblks);
    free(p);
    free(q);
    hak_totals_get(&t2);
    ck_assert_uint_eq(t2.large_blocks, t0.large_blocks);
    ck_assert_uint_ge(t2.peak, t1.resident);
}
END_TEST

/* The kernel's peak of this process's resident memory (VmHWM), in bytes. */
static size_t vm_hwm(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb << 10;
}

/* The peak is the peak of what is resident: pages given back inside regions (the sparse
 * pass, here malloc_trim's) do not count in it, so a heap that thinned out and then grew
 * elsewhere does not report more than the kernel ever saw (it did, by the pages given back).
 * 48 MiB of 256 B blocks, all but one in 64 freed (one a 16 KiB), trimmed, then 48 MiB more. */
START_TEST(test_peak_is_resident)
{
    enum { N = (48 << 20) / 256 };
    static char *b[N];
    for (unsigned i = 0; i < N; i++) {
        b[i] = malloc(256);
        ck_assert_ptr_nonnull(b[i]);
        memset(b[i], 3, 256);
    }
    for (unsigned i = 0; i < N; i++)
        if (i % 64 != 5)
            free(b[i]), b[i] = NULL;
    malloc_trim(0);
    struct hak_totals t;
    hak_totals_get(&t);
    ck_assert_uint_gt(t.sparse_out, (size_t)(24 << 20) / 4096);    /* most pages went back */
    char *more = malloc(48 * MIB);
    ck_assert_ptr_nonnull(more);
    memset(more, 4, 48 * MIB);
    hak_totals_get(&t);
    size_t hwm = vm_hwm();
    /* hakmem's figure counts region tails not yet touched and its metadata; the process's
     * own pages (libraries, stack) count only in the kernel's: 4 MiB either way */
    ck_assert_msg(t.peak <= hwm + 4 * MIB, "peak %zu KiB against VmHWM %zu KiB (resident %zu KiB)",
                  (size_t)t.peak >> 10, hwm >> 10, (size_t)t.resident >> 10);
    ck_assert_uint_ge(t.peak, t.resident);
    free(more);
    for (unsigned i = 0; i < N; i++)
        free(b[i]);
}
END_TEST

START_TEST(test_malloc_info_xml)
{
    free(malloc(5 * MIB));
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(malloc_info(0, f), 0);
    rewind(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "<malloc version=\"1\">"));
    ck_assert_ptr_nonnull(strstr(buf, "<total type=\"mmap\" count=\""));
    ck_assert_ptr_nonnull(strstr(buf, "</malloc>\n"));
    struct hak_totals t;
    hak_totals_get(&t);
    char want[96];
    snprintf(want, sizeof want, "<aspace type=\"total\" size=\"%llu\"/>", (unsigned long long)t.mapped);
    ck_assert_msg(strstr(buf, want) != NULL, "%s lacks %s", buf, want);
    errno = 0;
    ck_assert_int_eq(malloc_info(1, stdout), -1);
    ck_assert_int_eq(errno, EINVAL);
}
END_TEST

START_TEST(test_mallopt)
{
    ck_assert_int_eq(mallopt(M_ARENA_MAX, 1), 1);
    ck_assert_int_eq(mallopt(M_MMAP_THRESHOLD, 1 << 20), 1);
    ck_assert_int_eq(mallopt(M_TRIM_THRESHOLD, 0), 1);
    ck_assert_int_eq(mallopt(12345, 0), 0);
}
END_TEST

/* stderr, while fn runs, into buf. */
static void capture_stderr(void (*fn)(void), char *buf, size_t len)
{
    char path[] = "/tmp/hak-stats-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
}

START_TEST(test_malloc_stats_prints_totals)
{
    char out[8192];
    capture_stderr(malloc_stats, out, sizeof out);
    ck_assert_msg(strstr(out, "hakmem ") && strstr(out, " totals (pid "), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "\n  in use "));
    ck_assert_ptr_nonnull(strstr(out, "\n  retained "));
    ck_assert_ptr_nonnull(strstr(out, "\n  peak "));
    capture_stderr(hak_stats_print, out, sizeof out);
    ck_assert_ptr_nonnull(strstr(out, "\n  mapped "));
}
END_TEST

/* The probe (exit_probe.c) under LD_PRELOAD with Phase 106 `phase`: its library's
 * destructor, which runs after hakmem's, prints what was retained then and how many
 * pages of a freed 4 MiB block were still resident.  Its own policy: retain enough that
 * nothing but the exit gives the 24 MiB it frees back. */
static void exit_probe(const char *phase, size_t *retained, size_t *resident, size_t *pages)
{
    const char *probe = getenv("HAK_TEST_EXIT_PROBE"), *lib = getenv("HAK_TEST_LIB");
    ck_assert_msg(probe != NULL && lib != NULL, "meson.build sets HAK_TEST_EXIT_PROBE and HAK_TEST_LIB");
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char preload[4096], dirs[4096], ph[64];
        const char *slash = strrchr(lib, '/');
        /* ld.so splits LD_PRELOAD at spaces: such a library goes in by name from its folder */
        if (strchr(lib, ' ') && slash) {
            snprintf(preload, sizeof preload, "LD_PRELOAD=%s", slash + 1);
            snprintf(dirs, sizeof dirs, "LD_LIBRARY_PATH=%.*s", (int)(slash - lib), lib);
        } else {
            snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
            snprintf(dirs, sizeof dirs, "LD_LIBRARY_PATH=");
        }
        snprintf(ph, sizeof ph, "HAKMEM_PHASE106=%s", phase);
        char *env[] = {preload, dirs, ph, "HAKMEM_PURGE_RETAIN=64M", "HAKMEM_PURGE_DELAY=10000", NULL};
        dup2(fd[1], 1);
        close(fd[0]);
        execle(probe, probe, (char *)NULL, env);
        _exit(127);
    }
    close(fd[1]);
    char out[256];
    ssize_t n = 0, r;
    while (n < (ssize_t)sizeof out - 1 && (r = read(fd[0], out + n, sizeof out - 1 - n)) > 0)
        n += r;
    close(fd[0]);
    out[n > 0 ? n : 0] = 0;
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the probe failed (status %d): %s", st, out);
    ck_assert_msg(sscanf(out, "retained %zu resident %zu of %zu", retained, resident, pages) == 3,
                  "the probe printed: %s", out);
}

/* Phase 106: what the program freed goes back before its libraries' destructors run. */
START_TEST(test_exit_gives_back)
{
    size_t retained, resident, pages;
    exit_probe("off", &retained, &resident, &pages);
    ck_assert_msg(retained >= 16 * MIB && resident == pages,
                  "phase off: %zu bytes retained, %zu of %zu pages resident (the probe sees nothing to give back)",
                  retained, resident, pages);
    exit_probe("on", &retained, &resident, &pages);
    if (HAK_PHASE106) {
        ck_assert_uint_eq(retained, 0);
        ck_assert_msg(resident == 0, "%zu of the freed block's %zu pages still resident at exit", resident, pages);
    } else {
        ck_assert_uint_ge(retained, 16 * MIB);             /* compiled out: as off */
    }
}
END_TEST

START_TEST(test_version)
{
    ck_assert_str_eq(hak_version(), HAK_TEST_VERSION);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_trim_gives_back_at_once);
    tcase_add_test(tc, test_trim_keeps_pad);
    tcase_add_test(tc, test_totals_and_mallinfo2);
    tcase_add_test(tc, test_malloc_info_xml);
    if (HAK_PHASE101)       /* the trim gives pages back inside regions by Phase 101's pass */
        tcase_add_test(tc, test_peak_is_resident);
    tcase_add_test(tc, test_mallopt);
    tcase_add_test(tc, test_malloc_stats_prints_totals);
    tcase_add_test(tc, test_exit_gives_back);
    tcase_add_test(tc, test_version);
    suite_add_tcase(s, tc);
    return check_run(s);
}
