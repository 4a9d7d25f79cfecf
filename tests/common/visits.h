/* Whether hakmem can visit another thread's heap here (src/cold/visit.c): it needs the
 * kernel's private expedited membarrier, which a sandbox may refuse (a TSan build none). */
#ifndef HAK_TEST_VISITS_H
#define HAK_TEST_VISITS_H

#include <sys/syscall.h>
#include <unistd.h>

static inline int visits_possible(void)
{
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
