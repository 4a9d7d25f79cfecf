/* The programs tests/prof/check-prof.py profiles: the leak (64 MiB in 1 KiB blocks
 * from one function while another churns 100 MiB), and threads, fork, _exit, a signal and
 * every allocation call with each block sampled.  Plain libc calls: run under LD_PRELOAD. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEAK_BYTES (64u << 20)
#define CHURN_BYTES (100u << 20)

static void *volatile sink;

__attribute__((noinline)) static void leak_kib(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        char *p = malloc(1024);
        memset(p, 0x5a, 64);
        sink = p;                           /* kept by no one: a leak */
    }
}

__attribute__((noinline)) static void churn(size_t bytes)
{
    void *ring[512] = { 0 };
    size_t done = 0;
    for (unsigned i = 0; done < bytes; i++) {
        size_t n = 16 + (i * 2654435761u) % 2000;
        free(ring[i % 512]);
        ring[i % 512] = malloc(n);
        memset(ring[i % 512], 1, 8);
        done += n;
    }
    for (unsigned i = 0; i < 512; i++)
        free(ring[i]);
}

static void leak_shape(void)
{
    for (unsigned r = 0; r < 8; r++) {         /* interleaved, so neither phase stands alone */
        leak_kib(LEAK_BYTES / 1024 / 8);
        churn(CHURN_BYTES / 8);
    }
}

__attribute__((noinline)) static void *leak_in_thread(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < 4096; i++)
        sink = malloc(4096);               /* 16 MiB a thread */
    churn(8u << 20);
    return NULL;
}

static int threads(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, leak_in_thread, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return 0;
}

__attribute__((noinline)) static void child_leak(void)
{
    for (unsigned i = 0; i < 16384; i++)
        sink = malloc(2048);                /* 32 MiB: twice what it inherits */
}

static int forked(void)
{
    leak_kib(16384);
    pid_t pid = fork();
    if (pid == 0) {
        child_leak();
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child %d\n", (int)pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static int fail(const char *what)
{
    fprintf(stderr, "prof_prog: %s\n", what);
    return 1;
}

struct ring { void *p[64]; };

static void *free_ring(void *arg)
{
    struct ring *r = arg;
    for (int i = 0; i < 64; i++)
        free(r->p[i]);
    return NULL;
}

/* Every call that makes or resizes a block, each block sampled ([prof] sample = 1): the data
 * and the contracts hold, and once all is freed the profile holds nothing live. */
static int every_call(void)
{
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hak_prof_dump");
    for (unsigned round = 0; round < 200; round++) {
        size_t n = 1 + (round * 977u) % 5000;
        unsigned char *c = calloc(1, n);
        for (size_t i = 0; i < n; i++)
            if (c[i])
                return fail("calloc: a byte not zero");
        char *p = malloc(24);
        memcpy(p, "0123456789abcdefghijklm", 24);
        for (size_t s = 32; s < 400000; s = s * 3 + 7) {
            p = realloc(p, s);
            if (memcmp(p, "0123456789abcdefghijklm", 24))
                return fail("realloc: the data moved wrong");
        }
        if (malloc_usable_size(p) < 24)
            return fail("malloc_usable_size of a sampled block");
        void *a = memalign(4096, 100), *b = NULL;
        if (posix_memalign(&b, 256, 3000) || ((uintptr_t)a & 4095) || ((uintptr_t)b & 255))
            return fail("aligned blocks");
        void *big = malloc((size_t)(round % 3 + 1) << 20);
        free(big);
        free(a);
        free(b);
        free(p);
        free(c);
    }
    struct ring r;                          /* frees by another thread */
    for (int i = 0; i < 64; i++)
        r.p[i] = malloc(16 + 48 * (size_t)i);
    pthread_t t;
    pthread_create(&t, NULL, free_ring, &r);
    pthread_join(t, NULL);
    return dump && dump(getenv("PROF_PROG_DUMP")) == 0 ? 0 : fail("hak_prof_dump");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "leak";
    if (!strcmp(mode, "leak")) {
        leak_shape();
        return 0;
    }
    if (!strcmp(mode, "threads"))
        return threads();
    if (!strcmp(mode, "fork"))
        return forked();
    if (!strcmp(mode, "exit")) {
        leak_kib(4096);
        _exit(0);
    }
    if (!strcmp(mode, "kill")) {
        leak_kib(4096);
        raise(SIGKILL);
    }
    if (!strcmp(mode, "signal")) {         /* [prof] signal = USR2: a profile, and it goes on */
        leak_kib(4096);
        raise(SIGUSR2);
        puts("alive");
        return 0;
    }
    if (!strcmp(mode, "every"))
        return every_call();
    if (!strcmp(mode, "dump")) {           /* hak_prof_dump's answer, whatever the library */
        int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hak_prof_dump");
        leak_kib(4096);
        int r = dump ? dump(argv[2]) : -2;
        printf("dump %d %s\n", r, r == -1 ? strerrorname_np(errno) : "-");
        return 0;
    }
    return fail("unknown mode");
}
