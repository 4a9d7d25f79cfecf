/* Misuse reports: one line on stderr naming the call, the pointer, the class and the fault.
 * Written with write(2) and a local formatter, so reporting never allocates. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cold.h"
#include "../route/classes.h"

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

HAK_COLD void cold_misuse(const char *call, const void *p, const char *what, int cls)
{
    struct line l = { .n = 0 };
    put(&l, "hakmem: ");
    put(&l, call);
    put(&l, "(0x");
    put_num(&l, (uintptr_t)p, 16);
    put(&l, "): ");
    put(&l, what);
    if (cls == HAK_NCLASSES) {
        put(&l, " (large block)");
    } else if (cls == HAK_CLS_SPAN) {
        put(&l, " (mid block)");
    } else if (cls >= 0 && cls < HAK_NCLASSES) {
        put(&l, " (class C");
        put_num(&l, (uintptr_t)cls, 10);
        put(&l, ", ");
        put_num(&l, route_classes[cls].size, 10);
        put(&l, " bytes)");
    }
    put(&l, policy_now()->on_misuse_abort ? "; aborting\n" : "; ignored\n");
    ssize_t w = write(2, l.buf, l.n);
    (void)w;
    if (policy_now()->on_misuse_abort)
        abort();
}
