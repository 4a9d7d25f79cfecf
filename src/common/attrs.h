/* Compiler attributes in one place, so code reads `if unlikely(x)` and says its
 * intent (hot inline, cold out of line) instead of raw __attribute__ soup. */
#ifndef HAK_ATTRS_H
#define HAK_ATTRS_H

#include "config.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define HAK_INLINE   static inline __attribute__((always_inline))
#define HAK_NOINLINE __attribute__((noinline))
/* Slow paths: never inlined, placed in .text.unlikely away from the hot code. */
#define HAK_COLD     __attribute__((noinline, cold))
#define HAK_EXPORT   __attribute__((visibility("default")))
#define HAK_TLS      __thread __attribute__((tls_model("initial-exec")))
#define HAK_ALIGNED(n) __attribute__((aligned(n)))

/* Phase 90: the region-id tag write/check is forced inline on the hot paths;
 * without it the compiler decides (as in the reference before Phase 90). */
#if HAK_PHASE90
#define HAK_TAG_INLINE HAK_INLINE
#else
#define HAK_TAG_INLINE static inline
#endif

#define HAK_CACHE_LINE 64

#endif
