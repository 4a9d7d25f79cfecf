/* Profiles out of the profiler's tables: gperftools' heap-profile text (heap_v2, which
 * google-pprof reads and scales back) with the process's mappings, and the leak report. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "../common/common.h"
#include "table.h"

/* Nothing here may allocate: the profile is written from inside malloc and at exit
 * (common/out.h formats by hand and writes with write(2)). */
#define DUMP_BUF 8192

static void dump_pcs(struct out *o, const uintptr_t *pcs, unsigned depth)
{
    out_str(o, " @");
    for (unsigned i = 0; i < depth; i++) {
        out_str(o, " 0x");
        out_num(o, pcs[i], 16, 16);
    }
    out_str(o, "\n");
}

/* "count: bytes [count: bytes]" */
static void dump_pair(struct out *o, uint64_t n1, uint64_t b1, uint64_t n2, uint64_t b2)
{
    out_num(o, n1, 10, 0);
    out_str(o, ": ");
    out_num(o, b1, 10, 0);
    out_str(o, " [");
    out_num(o, n2, 10, 0);
    out_str(o, ": ");
    out_num(o, b2, 10, 0);
    out_str(o, "]");
}

/* One line per live sample, so pprof scales each by its own size; one per stack for the
 * samples since freed, which only the allocation columns count. */
static void write_samples(struct out *o)
{
    uint64_t ln = 0, lb = 0, an = 0, ab = 0;
    for (uint32_t i = 1; i < prof_tab.nstacks; i++) {
        ln += prof_tab.stacks[i].live_n;
        lb += prof_tab.stacks[i].live_bytes;
        an += prof_tab.stacks[i].total_n;
        ab += prof_tab.stacks[i].total_bytes;
    }
    out_str(o, "heap profile: ");
    dump_pair(o, ln, lb, an, ab);
    out_str(o, " @ heap_v2/");
    out_num(o, prof_tab.rate, 10, 0);
    out_str(o, "\n");
    for (size_t i = 0; i < prof_tab.cap; i++) {
        const struct prof_block *b = &prof_tab.blocks[i];
        if (b->p == 0)
            continue;
        const struct prof_stack *s = &prof_tab.stacks[b->stack];
        dump_pair(o, 1, b->size, 1, b->size);
        dump_pcs(o, &prof_tab.pcs[s->first], s->depth);
    }
    for (uint32_t i = 1; i < prof_tab.nstacks; i++) {
        const struct prof_stack *s = &prof_tab.stacks[i];
        if (s->total_n == s->live_n)
            continue;
        dump_pair(o, 0, 0, s->total_n - s->live_n, s->total_bytes - s->live_bytes);
        dump_pcs(o, &prof_tab.pcs[s->first], s->depth);
    }
}

static void write_maps(struct out *o)
{
    out_str(o, "\nMAPPED_LIBRARIES:\n");
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    for (;;) {
        if (o->n == o->cap)
            out_flush(o);
        ssize_t r = read(fd, o->buf + o->n, o->cap - o->n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        o->n += (size_t)r;
    }
    close(fd);
}

int prof_path(char *out, size_t len, const char *pattern, unsigned seq)
{
    char buf[DUMP_BUF];
    struct out o = OUT_INIT(buf, -1);       /* only the formatter: nothing is written */
    for (const char *s = pattern; *s && o.n < o.cap - 32; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            out_num(&o, (uint64_t)getpid(), 10, 0);
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            o.buf[o.n++] = '%';
            s++;
        } else {
            o.buf[o.n++] = *s;
        }
    }
    if (seq > 0) {
        int heap = o.n >= 5 && !memcmp(o.buf + o.n - 5, ".heap", 5);
        if (heap)
            o.n -= 5;
        o.buf[o.n++] = '.';
        out_num(&o, seq, 10, 0);
        if (heap)
            out_str(&o, ".heap");
    }
    if (o.n >= len || o.n >= o.cap - 32)
        return 0;
    memcpy(out, o.buf, o.n);
    out[o.n] = 0;
    return 1;
}

/* The profile goes to a file no one can see until it is whole: an unnamed file in the
 * target's directory, linked in under a temporary name and renamed over the target.  A
 * process killed half-way leaves nothing (or, where the file system has no O_TMPFILE,
 * the temporary name, never a partial profile under the name asked for). */
HAK_COLD int prof_dump(const char *path)
{
    char dir[PROF_PATH_MAX], tmp[PROF_PATH_MAX + 32], proc[64];
    size_t len = strlen(path);
    if (!prof_active()) {
        errno = ENOTSUP;
        return -1;
    }
    if (len == 0 || len >= PROF_PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, path, (size_t)(slash - path) + 1);
        dir[slash - path + 1] = 0;
    }
    char buf[DUMP_BUF];
    struct out o = OUT_INIT(buf, -1);
    memcpy(o.buf, path, len);
    o.n = len;
    out_str(&o, ".tmp.");
    out_num(&o, (uint64_t)getpid(), 10, 0);
    memcpy(tmp, o.buf, o.n);
    tmp[o.n] = 0;
    o.n = 0;
    int named = 0;
    o.fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (o.fd < 0) {
        named = 1;
        o.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (o.fd < 0)
            return -1;
    }
    prof_lock();
    write_samples(&o);
    prof_unlock();
    write_maps(&o);
    out_flush(&o);
    if (!o.err && !named) {
        char pbuf[64];
        struct out p = OUT_INIT(pbuf, -1);
        out_str(&p, "/proc/self/fd/");
        out_num(&p, (uint64_t)o.fd, 10, 0);
        memcpy(proc, p.buf, p.n);
        proc[p.n] = 0;
        unlink(tmp);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) != 0)
            o.err = errno;
        named = !o.err;
    }
    if (close(o.fd) != 0 && !o.err)
        o.err = errno;
    if (!o.err && rename(tmp, path) != 0)
        o.err = errno;
    if (o.err) {
        if (named)
            unlink(tmp);
        errno = o.err;
        return -1;
    }
    return 0;
}

/* Bytes with a binary prefix and one decimal, as the leak report prints them. */
static void dump_bytes(struct out *o, double b)
{
    static const char *unit[] = { " B", " KiB", " MiB", " GiB", " TiB" };
    unsigned u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    uint64_t tenths = (uint64_t)(b * 10.0 + 0.5);
    out_num(o, tenths / 10, 10, 0);
    if (u > 0) {
        out_str(o, ".");
        out_num(o, tenths % 10, 10, 0);
    }
    out_str(o, unit[u]);
}

static void dump_frame(struct out *o, uintptr_t pc)
{
    Dl_info di;
    out_str(o, "hakmem:     0x");
    out_num(o, pc, 16, 0);
    /* pc - 1: a return address may be the first byte of the next function */
    if (dladdr((void *)(pc - 1), &di) && di.dli_fname) {
        if (di.dli_sname) {
            out_str(o, " ");
            out_str(o, di.dli_sname);
            out_str(o, "+0x");
            out_num(o, pc - (uintptr_t)di.dli_saddr, 16, 0);
        }
        out_str(o, " (");
        out_str(o, di.dli_fname);
        out_str(o, " +0x");
        out_num(o, pc - (uintptr_t)di.dli_fbase, 16, 0);
        out_str(o, ")");
    }
    out_str(o, "\n");
}

#define LEAK_TOP 8
#define LEAK_FRAMES 8

HAK_COLD void prof_leak_report(int fd)
{
    struct {
        double bytes, blocks;
        uint64_t samples;
        unsigned depth;
        uintptr_t pcs[LEAK_FRAMES];
    } top[LEAK_TOP];
    unsigned ntop = 0;
    double total = 0, blocks = 0;
    uint64_t samples = 0;
    char buf[DUMP_BUF];
    struct out o = OUT_INIT(buf, fd);
    if (!prof_active())
        return;
    /* Copied out under the lock; named after it, as dladdr takes the loader's lock, which
     * a thread inside dlopen holds while its malloc may wait for ours. */
    prof_lock();
    for (uint32_t i = 1; i < prof_tab.nstacks; i++) {
        const struct prof_stack *s = &prof_tab.stacks[i];
        if (s->live_n == 0)
            continue;
        double nb = s->live_bytes ? s->est_live * (double)s->live_n / (double)s->live_bytes : 0;
        total += s->est_live;
        blocks += nb;
        samples += s->live_n;
        unsigned k;
        if (ntop < LEAK_TOP)
            k = ntop++;
        else if (top[LEAK_TOP - 1].bytes >= s->est_live)
            continue;
        else
            k = LEAK_TOP - 1;
        while (k > 0 && top[k - 1].bytes < s->est_live) {
            top[k] = top[k - 1];
            k--;
        }
        top[k].bytes = s->est_live;
        top[k].blocks = nb;
        top[k].samples = s->live_n;
        top[k].depth = s->depth < LEAK_FRAMES ? s->depth : LEAK_FRAMES;
        memcpy(top[k].pcs, &prof_tab.pcs[s->first], top[k].depth * sizeof(uintptr_t));
    }
    size_t rate = prof_tab.rate;
    prof_unlock();
    out_str(&o, "hakmem: leak report: ~");
    dump_bytes(&o, total);
    out_str(&o, " in ~");
    out_num(&o, (uint64_t)(blocks + 0.5), 10, 0);
    out_str(&o, " blocks still live at exit, estimated from ");
    out_num(&o, samples, 10, 0);
    out_str(&o, " sampled blocks (one per ");
    dump_bytes(&o, (double)rate);
    out_str(&o, " allocated)\n");
    for (unsigned i = 0; i < ntop; i++) {
        out_str(&o, "hakmem: #");
        out_num(&o, i + 1, 10, 0);
        out_str(&o, " ~");
        dump_bytes(&o, top[i].bytes);
        out_str(&o, " in ~");
        out_num(&o, (uint64_t)(top[i].blocks + 0.5), 10, 0);
        out_str(&o, " blocks (");
        out_num(&o, top[i].samples, 10, 0);
        out_str(&o, top[i].samples == 1 ? " sample), allocated at:\n" : " samples), allocated at:\n");
        for (unsigned f = 0; f < top[i].depth; f++)
            dump_frame(&o, top[i].pcs[f]);
    }
    out_flush(&o);
}
