/* libhakmem-trace.so: under LD_PRELOAD, every call of the malloc family is served by glibc
 * and written to a trace (trace.h) that hakmem-replay runs again under any allocator. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "trace.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

#define BUF_RECS 8192
static struct trace_rec buf[BUF_RECS];
static unsigned nbuf;
static int out_fd = -1;
static int off;                         /* nothing more is recorded (a write failed, a child) */
static atomic_flag lock_flag = ATOMIC_FLAG_INIT;

/* HAKMEM_TRACE_OUT, with %p replaced by the process id (default hakmem-trace.%p.bin):
 * every process of a program that forks or execs writes its own. */
static void open_out(void)
{
    const char *pat = getenv("HAKMEM_TRACE_OUT");
    char path[4096];
    size_t n = 0;
    if (pat == NULL || *pat == 0)
        pat = "hakmem-trace.%p.bin";
    for (const char *s = pat; *s && n < sizeof path - 24; s++) {
        if (s[0] == '%' && s[1] == 'p') {       /* no snprintf: it may call malloc */
            char d[16];
            int k = 0;
            for (unsigned v = (unsigned)getpid(); k == 0 || v; v /= 10)
                d[k++] = (char)('0' + v % 10);
            while (k)
                path[n++] = d[--k];
            s++;
        } else {
            path[n++] = *s;
        }
    }
    path[n] = 0;
    out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char magic[16] = TRACE_MAGIC;
    if (out_fd < 0 || write(out_fd, magic, sizeof magic) != (ssize_t)sizeof magic) {
        off = 1;
        static const char msg[] = "libhakmem-trace: cannot write the trace file; nothing is recorded\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
    }
}

static void flush(void)
{
    if (out_fd >= 0 && nbuf && write(out_fd, buf, nbuf * sizeof buf[0]) != (ssize_t)(nbuf * sizeof buf[0]))
        off = 1;
    nbuf = 0;
}

static void lock(void)
{
    while (atomic_flag_test_and_set_explicit(&lock_flag, memory_order_acquire))
        ;
}

static void unlock(void)
{
    atomic_flag_clear_explicit(&lock_flag, memory_order_release);
}

static void append(uint32_t op, uint32_t align, uint64_t size, const void *old, const void *ret)
{
    if (off)
        return;
    if (out_fd < 0)
        open_out();
    buf[nbuf++] = (struct trace_rec){op, align, size, (uintptr_t)old, (uintptr_t)ret};
    if (nbuf == BUF_RECS)
        flush();
}

static void record(uint32_t op, uint32_t align, uint64_t size, const void *old, const void *ret)
{
    lock();
    append(op, align, size, old, ret);
    unlock();
}

/* A child of fork() shares the parent's file: it records nothing (with %p in the path, a
 * child that execs records into its own file). */
static void after_fork_child(void)
{
    nbuf = 0;
    off = 1;
    atomic_flag_clear(&lock_flag);
}

__attribute__((constructor)) static void trace_start(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

__attribute__((destructor)) static void trace_stop(void)
{
    lock();
    flush();
    off = 1;
    unlock();
}

static void *trace_malloc(size_t n)
{
    void *p = __libc_malloc(n);
    record(TRACE_MALLOC, 0, n, NULL, p);
    return p;
}

static void *trace_calloc(size_t a, size_t b)
{
    void *p = __libc_calloc(a, b);
    record(TRACE_CALLOC, 0, (uint64_t)a * b, NULL, p);
    return p;
}

/* Under the lock: q is free once glibc's realloc has moved it, and another thread's malloc
 * returning q must not be recorded before this call. */
static void *trace_realloc(void *q, size_t n)
{
    lock();
    void *p = __libc_realloc(q, n);
    append(TRACE_REALLOC, 0, n, q, p);
    unlock();
    return p;
}

static void *trace_reallocarray(void *q, size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return trace_realloc(q, n);
}

/* Recorded before the block is free: a malloc that returns it again comes after. */
static void trace_free(void *q)
{
    if (q != NULL)
        record(TRACE_FREE, 0, 0, q, NULL);
    __libc_free(q);
}

static void *trace_memalign(size_t al, size_t n)
{
    void *p = __libc_memalign(al, n);
    record(TRACE_MEMALIGN, (uint32_t)al, n, NULL, p);
    return p;
}

static void *trace_aligned_alloc(size_t al, size_t n)
{
    return trace_memalign(al, n);
}

static int trace_posix_memalign(void **r, size_t al, size_t n)
{
    if (al < sizeof(void *) || (al & (al - 1)))
        return EINVAL;
    void *p = trace_memalign(al, n);
    if (p == NULL)
        return ENOMEM;
    *r = p;
    return 0;
}

static void *trace_valloc(size_t n)
{
    return trace_memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

/* glibc's, looked up in libc.so.6 itself: a program that links another allocator
 * (Debian's redis-server links jemalloc) would otherwise ask that one about glibc's blocks. */
static size_t trace_usable_size(void *p)
{
    static size_t (*fn)(void *);
    if (fn == NULL) {
        void *h = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_NOW);
        fn = h ? (size_t (*)(void *))dlsym(h, "malloc_usable_size") : NULL;
    }
    return p && fn ? fn(p) : 0;
}

/* The names a program calls, as aliases (as libhakmem.so exports its own): the functions
 * above keep names of their own, so no caller of malloc reads as a caller of this file. */
#define TRACE_ALIAS(name) __attribute__((visibility("default"), alias(#name)))
void  *malloc(size_t) TRACE_ALIAS(trace_malloc);
void   free(void *) TRACE_ALIAS(trace_free);
void  *calloc(size_t, size_t) TRACE_ALIAS(trace_calloc);
void  *realloc(void *, size_t) TRACE_ALIAS(trace_realloc);
void  *reallocarray(void *, size_t, size_t) TRACE_ALIAS(trace_reallocarray);
void  *memalign(size_t, size_t) TRACE_ALIAS(trace_memalign);
void  *aligned_alloc(size_t, size_t) TRACE_ALIAS(trace_aligned_alloc);
int    posix_memalign(void **, size_t, size_t) TRACE_ALIAS(trace_posix_memalign);
void  *valloc(size_t) TRACE_ALIAS(trace_valloc);
size_t malloc_usable_size(void *) TRACE_ALIAS(trace_usable_size);
