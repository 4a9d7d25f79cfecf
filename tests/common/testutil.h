/* Helpers shared by the Check suites: capturing what hakmem reports on stderr,
 * loading a policy from text, and reading the process's resident set size. */
#ifndef HAK_TESTUTIL_H
#define HAK_TESTUTIL_H

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hakmem.h"

/* A child with a pipe to its parent: 0 in the child, *fd the pipe's write end; the child's
 * pid in the parent, *fd its read end; -1 if the pipe or the fork failed. */
static inline pid_t fork_piped(int *fd)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    close(p[pid == 0 ? 0 : 1]);
    *fd = p[pid == 0 ? 1 : 0];
    return pid;
}

/* Redirects fd 2 into a temporary file until stderr_capture_end(). */
struct capture {
    int saved;
    int fd;
};

static inline void stderr_capture_begin(struct capture *c)
{
    char path[] = "/tmp/hak-stderr-XXXXXX";
    fflush(stderr);
    c->fd = mkstemp(path);
    unlink(path);
    c->saved = dup(2);
    dup2(c->fd, 2);
}

/* Restores stderr; copies what was written into buf (NUL-terminated). */
static inline size_t stderr_capture_end(struct capture *c, char *buf, size_t cap)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    lseek(c->fd, 0, SEEK_SET);
    ssize_t n = read(c->fd, buf, cap - 1);
    close(c->fd);
    if (n < 0)
        n = 0;
    buf[n] = 0;
    return (size_t)n;
}

/* Loads a policy file holding `text` (hak_policy_load's result): the policy changes at
 * each thread's next malloc or free.  "" goes back to the defaults. */
static inline int policy_load_text(const char *text)
{
    char path[] = "/tmp/hak-policy-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    int r = ok ? hak_policy_load(path) : -1;
    unlink(path);
    return r;
}

/* hak_free(p); returns what hakmem reported (in buf, "" if nothing). */
static inline const char *hak_free_reported(void *p, char *buf, size_t cap)
{
    struct capture c;
    stderr_capture_begin(&c);
    hak_free(p);
    stderr_capture_end(&c, buf, cap);
    return buf;
}

/* hak_free(p) on a thread of its own, a remote free; returns what hakmem reported there
 * (in buf, "" if nothing). */
struct free_elsewhere {
    void *p;
    char *buf;
    size_t cap;
};

static void *free_elsewhere_main(void *arg)
{
    struct free_elsewhere *f = arg;
    hak_free_reported(f->p, f->buf, f->cap);
    return NULL;
}

static inline const char *hak_free_elsewhere(void *p, char *buf, size_t cap)
{
    struct free_elsewhere f = { p, buf, cap };
    pthread_t t;
    buf[0] = 0;
    if (pthread_create(&t, NULL, free_elsewhere_main, &f) == 0)
        pthread_join(t, NULL);
    return buf;
}

/* Resident set size in bytes, from /proc/self/statm. */
static inline size_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* The factor a wait inside a test is scaled by: CK_TIMEOUT_MULTIPLIER, which also scales
 * Check's per-test timeouts (scripts/run-tests.sh gives meson --timeout-multiplier the
 * same); at least 1.  A loaded machine gets longer bounds everywhere at once, and no test
 * depends on a fixed wall clock. */
static inline double test_time_scale(void)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    double v = m && *m ? atof(m) : 1.0;
    return v > 1.0 ? v : 1.0;
}

/* `ms` milliseconds scaled by test_time_scale(). */
static inline unsigned test_ms(unsigned ms)
{
    return (unsigned)(ms * test_time_scale());
}

/* RSS once it is below `limit`, or after test_ms(ms) milliseconds of waiting for it: the
 * purger thread (Phase 99) gives memory back while the test goes on.  `ms` is a bound for
 * a failing run, not a speed asked of a passing one: make it generous. */
static inline size_t rss_wait_below(size_t limit, unsigned ms)
{
    size_t r = rss_bytes();
    ms = test_ms(ms);
    for (unsigned t = 0; r >= limit && t < ms; t += 10) {
        usleep(10000);
        r = rss_bytes();
    }
    return r;
}

#endif
