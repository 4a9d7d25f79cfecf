/* Misuse reports: one line on stderr naming the call, the pointer, the block and the fault,
 * written with write(2) and a local formatter, so reporting never allocates. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "report.h"
#include "attrs.h"

struct line {
    char buf[256];
    size_t n;
};

static void put(struct line *l, const char *s)
{
    while (*s && l->n < sizeof l->buf - 1)
        l->buf[l->n++] = *s++;
}

static void put_num(struct line *l, uintptr_t v, unsigned base)
{
    char tmp[24];
    int i = 0;
    do {
        tmp[i++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (i && l->n < sizeof l->buf - 1)
        l->buf[l->n++] = tmp[--i];
}

static _Atomic int report_abort;

void report_set_abort(int on)
{
    atomic_store_explicit(&report_abort, on, memory_order_relaxed);
}

HAK_COLD void report_misuse(const char *call, const void *p, const char *what, int cls, size_t size)
{
    struct line l = { .n = 0 };
    put(&l, "hakmem: ");
    put(&l, call);
    put(&l, "(0x");
    put_num(&l, (uintptr_t)p, 16);
    put(&l, "): ");
    put(&l, what);
    if (cls == REPORT_LARGE_BLOCK) {
        put(&l, " (large block)");
    } else if (cls == REPORT_MID_BLOCK) {
        put(&l, " (mid block)");
    } else if (cls >= 0) {
        put(&l, " (class C");
        put_num(&l, (uintptr_t)cls, 10);
        put(&l, ", ");
        put_num(&l, size, 10);
        put(&l, " bytes)");
    }
    int abort_now = atomic_load_explicit(&report_abort, memory_order_relaxed);
    put(&l, abort_now ? "; aborting\n" : "; ignored\n");
    ssize_t w = write(2, l.buf, l.n);
    (void)w;
    if (abort_now)
        abort();
}
