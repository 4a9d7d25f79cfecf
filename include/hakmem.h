/* hakmem: a malloc replacement built to be measured.  The hak_* functions are the
 * allocator itself; the shared library also exports them under the standard names. */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>
#include <stdint.h>

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

/* Policy: compiled defaults <- INI file (HAKMEM_CONFIG) <- HAKMEM_* variables.
 * hak_policy_load() replaces the INI layer at run time and starts a new epoch; each
 * thread follows from its next malloc or free.  Returns 0, or -1 after reporting on
 * stderr what was wrong (a file that cannot be used leaves the policy unchanged). */
int hak_policy_load(const char *path);

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
void hak_stats_print(void);                  /* to [observe] output (stderr by default) */

#ifdef __cplusplus
}
#endif

#endif
