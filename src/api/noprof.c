/* The library without a profiler (libhakmem.so): its malloc counts no bytes for sampling,
 * so [prof] enabled only earns a warning that names the library that has one. */
#include <errno.h>
#include <unistd.h>
#include "../../include/hakmem.h"
#include "../common/common.h"
#include "../policy/policy.h"
#include "sampler.h"

HAK_EXPORT int hak_prof_dump(const char *path)
{
    (void)path;
    errno = ENOTSUP;
    return -1;
}

/* Only where this library's malloc is the process's: a program may load this library and
 * preload the profiling one over it, and then it is that one which answers. */
__attribute__((constructor(102))) static void noprof_warn(void)
{
    static const char msg[] = "hakmem: warning: [prof] enabled: this library has no profiler; "
                              "preload libhakmem-prof.so (hakmem prof and hakmem run --prof do)\n";
    if (policy_now()->prof && api_malloc_is_ours() && write(2, msg, sizeof msg - 1) < 0)
        return;
}
