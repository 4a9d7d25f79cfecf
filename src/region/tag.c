/* The out-of-line copy of the tag write, used when Phase 90 is switched off at run time,
 * so one binary can A/B the inlined write against the call it replaced. */
#include "region.h"

HAK_NOINLINE void *region_tag_set_live_call(struct region *r, void *p, unsigned cls)
{
    region_tag_set_live(r, p, cls);
    return p;
}
