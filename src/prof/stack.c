/* The calling thread's stack for the profiler, by libunwind's unwinder (the DWARF unwind
 * tables, so programs built without frame pointers unwind too).  The profiling library only. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include "prof.h"

#if defined(__SANITIZE_THREAD__)
#define PROF_STEP_FRAMES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PROF_STEP_FRAMES 1
#endif
#endif

unsigned prof_stack(void **pcs, unsigned max)
{
#ifdef PROF_STEP_FRAMES
    /* Under ThreadSanitizer, frame by frame: unw_backtrace's per-thread trace cache is freed
     * by a thread-specific-data destructor that runs after TSan has torn the exiting thread
     * down, and its mutex hook then crashes.  Stepping keeps no per-thread state. */
    unw_context_t uc;
    unw_cursor_t c;
    unsigned n = 0;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&c, &uc) != 0)
        return 0;
    do {
        unw_word_t ip;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0)
            break;
        pcs[n++] = (void *)(uintptr_t)ip;
    } while (n < max && unw_step(&c) > 0);
    return n;
#else
    int n = unw_backtrace(pcs, (int)max);
    return n > 0 ? (unsigned)n : 0;
#endif
}
