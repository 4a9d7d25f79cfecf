/* Misuse reports: one line on stderr naming the call, the pointer, the block and the fault,
 * written with write(2) and a local formatter, so reporting never allocates. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include "out.h"
#include "report.h"
#include "attrs.h"

static _Atomic int report_abort;

void report_set_abort(int on)
{
    atomic_store_explicit(&report_abort, on, memory_order_relaxed);
}

HAK_COLD void report_misuse(const char *call, const void *p, const char *what, int cls, size_t size)
{
    char line[256];
    struct out l = OUT_INIT(line, -1);      /* cut at 256 bytes: one line, one write */
    out_str(&l, "hakmem: ");
    out_str(&l, call);
    out_str(&l, "(0x");
    out_num(&l, (uintptr_t)p, 16, 0);
    out_str(&l, "): ");
    out_str(&l, what);
    if (cls == REPORT_LARGE_BLOCK) {
        out_str(&l, " (large block)");
    } else if (cls == REPORT_MID_BLOCK) {
        out_str(&l, " (mid block)");
    } else if (cls >= 0) {
        out_str(&l, " (class C");
        out_num(&l, (uint64_t)cls, 10, 0);
        out_str(&l, ", ");
        out_num(&l, size, 10, 0);
        out_str(&l, " bytes)");
    }
    int abort_now = atomic_load_explicit(&report_abort, memory_order_relaxed);
    out_str(&l, abort_now ? "; aborting\n" : "; ignored\n");
    l.fd = 2;
    out_flush(&l);
    if (abort_now)
        abort();
}
