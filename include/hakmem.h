/* hakmem: a malloc replacement built to be measured.  The hak_* functions are the
 * allocator itself; the shared library also exports them under the standard names. */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#if defined(__GLIBC__)
#include <malloc.h>             /* struct mallinfo, mallinfo2 */
#endif

#ifdef __cplusplus
extern "C" {
#endif

void  *hak_malloc(size_t size);
void   hak_free(void *ptr);
void  *hak_calloc(size_t nmemb, size_t size);
void  *hak_realloc(void *ptr, size_t size);
void  *hak_reallocarray(void *ptr, size_t nmemb, size_t size);
int    hak_posix_memalign(void **out, size_t alignment, size_t size);
void  *hak_aligned_alloc(size_t alignment, size_t size);
void  *hak_memalign(size_t alignment, size_t size);
void  *hak_valloc(size_t size);
void  *hak_pvalloc(size_t size);
size_t hak_malloc_usable_size(void *ptr);
void   hak_free_sized(void *ptr, size_t size);                           /* C23 */
void   hak_free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* The library's version, meson.build's project version ("0.1.0"); the soname carries its
 * major number (libhakmem.so.0). */
const char *hak_version(void);

/* Policy: compiled defaults <- INI file (HAKMEM_CONFIG) <- HAKMEM_* variables.
 * hak_policy_load() replaces the INI layer at run time and starts a new epoch; each
 * thread follows from its next malloc or free.  Returns 0, or -1 after reporting on
 * stderr what was wrong (a file that cannot be used leaves the policy unchanged). */
int hak_policy_load(const char *path);

/* One setting, as mi_option_set or mallctl change one at run time: NAME as `hakmem config
 * show` prints it ("purge.retain", "phases.phase91", "route.C5"), VALUE as the INI file takes
 * it ("16M", "off").  The same checks and messages as the INI file; a bad name or value is
 * reported on stderr and changes nothing (-1).  It holds until the next hak_policy_load, which
 * starts again from the defaults; each thread follows from its next malloc or free. */
int hak_policy_set(const char *name, const char *value);

/* Every effective setting: name ("slots.capacity", "route.C5" ...), value, and where
 * it came from ("default", "ini FILE:LINE", "env VAR"). */
typedef void (*hak_policy_fn)(const char *name, const char *value, const char *source, void *ctx);
void hak_policy_foreach(hak_policy_fn fn, void *ctx);
int  hak_policy_get(const char *name, char *value, size_t vlen, char *source, size_t slen);
uint64_t hak_policy_epoch(void);

/* OBSERVE counters (build with -Dobserve=true, switch on with [observe] enabled = on
 * or HAKMEM_OBSERVE=1).  cls[] holds the size classes, then one row for large blocks. */
#define HAK_STATS_CLASSES 64
struct hak_class_stats {
    uint64_t size;              /* block size; 0 for the large row */
    uint64_t allocs, frees;
    uint64_t slot_hits;         /* allocations served straight from the thread's cache */
    uint64_t overflows;         /* frees that found the cache full and spilled */
    uint64_t refills;           /* cache refills from regions */
    uint64_t remote_frees;      /* frees by a thread other than the owner */
};
struct hak_stats {
    int compiled_in, enabled;
    unsigned nclasses;          /* rows used in cls[]: the classes, then large */
    struct hak_class_stats cls[HAK_STATS_CLASSES];
    uint64_t regions_mapped, regions_purged;
    uint64_t bytes_live, bytes_peak;   /* peak sampled at cache refills and spills */
};
int  hak_stats_get(struct hak_stats *out);   /* 0, or -1 when compiled out or switched off */

/* Process totals, counted in every build (on cold paths only: a region or extent taken or
 * released, a large block mapped or freed).  HAKMEM_STATS=1 ([stats] enabled) prints them
 * at exit; malloc_stats() and hak_stats_print() on demand; mallinfo2() and malloc_info()
 * answer from them. */
struct hak_totals {
    uint64_t mapped;            /* bytes of every mapping hakmem holds (metadata included) */
    uint64_t resident;          /* in_use + retained: the resident memory as hakmem sees it */
    uint64_t in_use;            /* bytes of regions, spans and large blocks (their free blocks too) */
    uint64_t retained;          /* free bytes kept resident for reuse ([purge] retain, large_cache) */
    uint64_t purged;            /* bytes given back to the OS with madvise, since start */
    uint64_t peak;              /* the most `resident` has been */
    uint64_t heaps;             /* threads' heaps in use */
    uint64_t large_blocks, large_bytes;   /* live blocks above 256 KiB, and their pages */
    uint64_t regions_mapped, regions_purged;
    /* Phase 101: 4 KiB pages of live regions and spans given back (since start), faulted in
     * again by a block handed out over them, and given back now (not in `resident`) */
    uint64_t sparse_purged, sparse_refaulted, sparse_out;
    /* Heaps visited: what other threads freed into a thread's regions taken in for it while
     * it was out of malloc's cold paths (an idle thread, by the purger; any, by malloc_trim) */
    uint64_t visits;
};
void hak_totals_get(struct hak_totals *out);
/* The totals, then the OBSERVE counters, to [observe] output (stderr by default). */
void hak_stats_print(void);

/* Heap profiling ([prof] in the policy; docs/PROFILING.md), in the profiling library
 * libhakmem-prof.so.  hak_prof_dump writes the live sampled blocks and their call stacks
 * to path now (%p: the process id), in the gperftools heap format google-pprof reads: 0, or
 * -1 with errno (ENOTSUP: profiling is off, or this library has no profiler). */
int hak_prof_dump(const char *path);

/* glibc's malloc.h calls, which the shared library also exports under their own names.
 * hak_malloc_trim purges every free chunk retained beyond pad bytes, now: 1 if memory was
 * given back.  hak_mallopt accepts glibc's parameters and ignores them (1; 0 for a
 * parameter glibc does not know): hakmem's settings are its policy keys. */
int    hak_malloc_trim(size_t pad);
void   hak_malloc_stats(void);                  /* the totals, to stderr */
int    hak_malloc_info(int options, FILE *fp);  /* XML as glibc's; options must be 0 */
int    hak_mallopt(int param, int value);
#if defined(__GLIBC__)
struct mallinfo2 hak_mallinfo2(void);
struct mallinfo  hak_mallinfo(void);            /* fields clamped to INT_MAX */
#endif

#ifdef __cplusplus
}
#endif

#endif
