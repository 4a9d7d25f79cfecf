/* Whether hakmem visits other threads' heaps here (src/cold/visit.c): Phase 103 compiled in
 * and not switched off by its variable, and the kernel's private expedited membarrier,
 * which a sandbox may refuse (a TSan build needs none). */
#ifndef HAK_TEST_VISITS_H
#define HAK_TEST_VISITS_H

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "config.h"

/* Phase 103 compiled in and not switched off by its variable. */
static inline int visits_enabled(void)
{
    const char *v = getenv("HAKMEM_PHASE103");
    return HAK_PHASE103 && !(v && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcmp(v, "false") == 0));
}

static inline int visits_possible(void)
{
    if (!visits_enabled())
        return 0;
#if defined(__SANITIZE_THREAD__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    return 1;
#endif
#endif
    long q = syscall(SYS_membarrier, 0, 0, 0);      /* MEMBARRIER_CMD_QUERY: the commands known */
    return q > 0 && (q & (1 << 3));                 /* MEMBARRIER_CMD_PRIVATE_EXPEDITED */
}

#endif
