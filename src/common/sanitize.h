/* AddressSanitizer hooks: in an ASan build hakmem poisons free blocks and unpoisons
 * them when handed out, so ASan sees inside regions; elsewhere these are no-ops. */
#ifndef HAK_SANITIZE_H
#define HAK_SANITIZE_H

#if defined(__SANITIZE_ADDRESS__)
#define HAK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAK_ASAN 1
#endif
#endif

#ifdef HAK_ASAN
#include <sanitizer/asan_interface.h>
#define HAK_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define HAK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define HAK_POISONED(p)    __asan_address_is_poisoned(p)
#else
#define HAK_ASAN 0
#define HAK_POISON(p, n)   ((void)(p), (void)(n))
#define HAK_UNPOISON(p, n) ((void)(p), (void)(n))
#define HAK_POISONED(p)    ((void)(p), 0)
#endif

#endif
