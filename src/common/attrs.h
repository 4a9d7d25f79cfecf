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
/* malloc and free start on a cache line, so each fast path spans as few fetch blocks as it
 * can wherever the linker puts it (FAST PGO's layout had put them in mid-line). */
#define HAK_ENTRY    __attribute__((aligned(64)))

/* Phase 90: the region-id tag write/check is forced inline on the hot paths;
 * without it the compiler decides (as in the reference before Phase 90). */
#if HAK_PHASE90
#define HAK_TAG_INLINE HAK_INLINE
#else
#define HAK_TAG_INLINE static inline
#endif

#define HAK_CACHE_LINE 64

/* x86's variable shifts take their count in cl.  malloc's slot hit indexes with the live
 * tag and shifts by it; left alone, gcc loads it into another register and copies it to
 * rcx, one instruction on every hit.  An empty asm that wants it in rcx from its load on:
 * no code of its own.  (Not for clang, whose code was an instruction longer with it.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAK_IN_SHIFT_REG(x) __asm__("" : "+c"(x))
#else
#define HAK_IN_SHIFT_REG(x) ((void)0)
#endif

/* The same for the block malloc returns: loaded straight into rax, it needs no copy there
 * at the end, and the tag address is computed in the copy that the shift needs anyway
 * (gcc kept the slot's top in rax and copied the block over: one more instruction). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAK_IN_RET_REG(x) __asm__("" : "+a"(x))
#else
#define HAK_IN_RET_REG(x) ((void)0)
#endif

/* A relaxed load of a word another thread may store (a publisher's invalidation).  GCC
 * folds the address arithmetic into a plain load but not into an atomic one, which costs
 * the hot paths an instruction per load; aligned loads up to 8 bytes are single-copy
 * atomic on x86-64, so the plain form is used there, and the builtin elsewhere and under
 * ThreadSanitizer, which must see the access as atomic. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HAK_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define HAK_TSAN 1
#endif
#if defined(__x86_64__) && !defined(HAK_TSAN)
#define HAK_LOAD_RELAXED(x) (x)
#else
#define HAK_LOAD_RELAXED(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#endif

/* The owner's store of a field the purger reads without the owner's lock as a hint (a
 * region's counts, a span's tags and lengths: region/purge.c): plain where that is
 * single-copy atomic anyway, atomic where ThreadSanitizer must see it so. */
#if defined(__x86_64__) && !defined(HAK_TSAN)
#define HAK_STORE_HINT(x, v) ((x) = (v))
#else
#define HAK_STORE_HINT(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#endif

#endif
