/* Large and huge blocks, above the mid sizes: extents of arena chunks up to [large] arena_max,
 * page-granular mappings above, with a registry of live blocks and a cache of freed pages. */
#ifndef HAK_LARGE_H
#define HAK_LARGE_H

#include <stddef.h>
#include <stdint.h>
#include "../common/common.h"

void  *large_alloc(size_t n, size_t align, int zero);
int    large_free(void *p, const char *call);   /* 0: not a live large block (reported) */
size_t large_usable(void *p);                   /* 0: not a live large block */
int    large_mark_sampled(void *p, int on);     /* 1: p's profiler mark changed to on */
void  *large_realloc(void *p, size_t n);
void   large_lock(void);
void   large_unlock(void);
void   large_reset_lock(void);
size_t large_cached_bytes(void);
size_t large_trim(size_t keep);                 /* malloc_trim: the page cache down to keep bytes */
void   large_exit_trim(void);                   /* Phase 106: all of it, if the lock is free */
void   large_idle_trim(void);                   /* idle decay: all of it (arena_set_idle) */
/* large_share.c: resident free pages between the large page cache and the arenas; registered
 * with arena_set_donor at start-up */
int    large_donate(uintptr_t dst, size_t len);   /* 1: a free range's pages now back dst */

#endif
