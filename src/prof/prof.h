/* The heap profiler's records: the sampled blocks still live and the call stacks that
 * allocated them, in mappings of its own; profiles in gperftools' heap format and leak reports. */
#ifndef HAK_PROF_H
#define HAK_PROF_H

#include <stddef.h>
#include <stdint.h>

#define PROF_DEPTH 64                /* frames kept of a stack */
#define PROF_PATH_MAX 512

struct prof_info {
    uint64_t mapped;                 /* bytes of the profiler's own mappings */
    uint64_t stacks;                 /* distinct stacks recorded */
    uint64_t live;                   /* sampled blocks still live */
    uint64_t dropped;                /* samples not kept: a table was full or a mapping failed */
    double   live_bytes;             /* estimated bytes live, scaled back from the samples */
};

/* Profiling on, sampling about one block per `rate` bytes; a numbered profile each time
 * the estimated live bytes grow by `interval` (0: never).  Called once, at start-up. */
void prof_start(size_t rate, uint64_t interval);
int  prof_active(void);
size_t prof_rate(void);

/* A block of n bytes at p sampled, allocated by the stack pcs[0..depth) (innermost first);
 * est: the bytes it stands for, n over its chance of being sampled.  1: recorded, so the
 * caller marks the block for its free to come to prof_forget. */
int  prof_record(uintptr_t p, size_t n, double est, void *const *pcs, unsigned depth);
/* A marked block freed or moved: its sample leaves the live records. */
void prof_forget(uintptr_t p);
/* 1 once the live estimate has grown by the interval since the last numbered profile
 * (and that profile is then counted as written). */
unsigned prof_interval_due(void);
/* The number for a profile asked for now (a signal's); 0 if the tables are busy, perhaps
 * with the caller itself interrupted inside them. */
unsigned prof_seq_try(void);

/* `pattern` with %p the process id and %% a percent sign; seq > 0 goes before a final
 * ".heap" (or at the end) as ".seq".  0 if it does not fit. */
int  prof_path(char *out, size_t len, const char *pattern, unsigned seq);
/* Writes the profile to path (no partial file is ever left under that name).  0, or -1
 * with errno set. */
int  prof_dump(const char *path);
/* The sampled blocks still live, by stack, largest first, on fd. */
void prof_leak_report(int fd);
void prof_read(struct prof_info *out);

void prof_lock(void);
void prof_unlock(void);
void prof_after_fork_child(void);

/* stack.c, in the profiling library only: the caller's stack, innermost first. */
unsigned prof_stack(void **pcs, unsigned max);

#endif
