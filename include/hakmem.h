/* hakmem: a malloc replacement built to be measured.  The hak_* functions are the
 * allocator itself; the shared library also exports them under the standard names. */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>

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

#ifdef __cplusplus
}
#endif

#endif
