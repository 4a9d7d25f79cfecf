/* A writer that never allocates, for what hakmem prints from inside malloc, at exit or on
 * misuse: text formatted by hand into the caller's buffer and written with write(2). */
#ifndef HAK_COMMON_OUT_H
#define HAK_COMMON_OUT_H

#include <stddef.h>
#include <stdint.h>

/* fd < 0 only formats: what does not fit in the buffer is cut (a misuse report is one
 * line, one write).  Otherwise a full buffer is written out; err keeps the first error,
 * after which nothing more is written. */
struct out {
    char  *buf;
    size_t cap, n;
    int    fd, err;
};

#define OUT_INIT(array, fd_) { .buf = (array), .cap = sizeof(array), .n = 0, .fd = (fd_), .err = 0 }

void out_str(struct out *o, const char *s);
void out_num(struct out *o, uint64_t v, unsigned base, unsigned width);   /* width: zero-padded */
void out_flush(struct out *o);          /* all of it, write(2) retried on EINTR and partial writes */

#endif
