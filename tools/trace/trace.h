/* The format of an allocation trace: what libhakmem-trace.so writes and hakmem-replay
 * reads, one fixed-size record per call of the malloc family, in the order they ran. */
#ifndef HAK_TRACE_H
#define HAK_TRACE_H

#include <stdint.h>

#define TRACE_MAGIC "hakmem-trace 1\n"   /* the file's first 16 bytes, NUL-padded */

enum trace_op {
    TRACE_MALLOC = 1,       /* size -> ret */
    TRACE_CALLOC = 2,       /* size (count times size) -> ret, zeroed */
    TRACE_REALLOC = 3,      /* old, size -> ret (ret 0: failed, old still live) */
    TRACE_FREE = 4,         /* old */
    TRACE_MEMALIGN = 5,     /* align, size -> ret */
};

struct trace_rec {
    uint32_t op;
    uint32_t align;
    uint64_t size;
    uint64_t old;
    uint64_t ret;
};

#endif
