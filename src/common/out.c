/* The allocation-free writer (out.h): misuse reports, the heap profile and the statistics
 * share it, so one loop knows how to get bytes out through write(2). */
#include <errno.h>
#include <unistd.h>
#include "out.h"

void out_flush(struct out *o)
{
    size_t off = 0;
    while (o->fd >= 0 && off < o->n && !o->err) {
        ssize_t w = write(o->fd, o->buf + off, o->n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            o->err = w < 0 ? errno : EIO;
        else
            off += (size_t)w;
    }
    o->n = 0;
}

void out_str(struct out *o, const char *s)
{
    for (; *s; s++) {
        if (o->n == o->cap) {
            if (o->fd < 0)
                return;
            out_flush(o);
        }
        o->buf[o->n++] = *s;
    }
}

void out_num(struct out *o, uint64_t v, unsigned base, unsigned width)
{
    char t[66];                         /* 64 binary digits at most, and the terminator */
    unsigned i = sizeof t;
    t[--i] = 0;
    do {
        t[--i] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (sizeof t - 1 - i < width && i > 0)
        t[--i] = '0';
    out_str(o, t + i);
}
