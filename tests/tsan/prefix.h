/* Forced into the thread tests for the ThreadSanitizer build: their malloc-family calls
 * become hak_* calls, so TSan watches hakmem's own synchronisation while it keeps the
 * real malloc for itself (a sanitizer cannot run under an overriding malloc). */
#include <stddef.h>
#include <stdlib.h>
#include <malloc.h>
#include "hakmem.h"
/* TSan keeps shadow memory for everything touched: RSS bounds mean little here. */
#define RSS_SLACK ((size_t)8 << 30)
/* TSan runs 5-15x slower: smaller workloads, the same interleavings. */
#define PC_PER_PROD 500000
#define SL_BATCHES 8
#define DF_ROUNDS 400
#define CH_THREADS 400
#define malloc(n)               hak_malloc(n)
#define free(p)                 hak_free(p)
#define calloc(n, s)            hak_calloc(n, s)
#define realloc(p, n)           hak_realloc(p, n)
#define posix_memalign(o, a, n) hak_posix_memalign(o, a, n)
#define malloc_usable_size(p)   hak_malloc_usable_size(p)
#define malloc_trim(n)          hak_malloc_trim(n)
