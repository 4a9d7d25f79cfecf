/* The calling thread's stack for the profiler, by libunwind's unwinder (the DWARF unwind
 * tables, so programs built without frame pointers unwind too).  The profiling library only. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include "prof.h"

unsigned prof_stack(void **pcs, unsigned max)
{
    int n = unw_backtrace(pcs, (int)max);
    return n > 0 ? (unsigned)n : 0;
}
