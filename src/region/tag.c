/* The out-of-line copy of the tag write, used when Phase 90 is switched off at run time,
 * so one binary can A/B the inlined write against the call it replaced. */
#include <string.h>
#include "region.h"

HAK_NOINLINE void *region_tag_set_live_call(struct region *r, void *p)
{
    region_tag_set_live(r, p);
    return p;
}

/* Hardened builds: a free-list link that does not lead to a free block of the right
 * region or class was overwritten.  The list is cut there: leaking its tail is better
 * than handing out memory an attacker chose. */
HAK_COLD void *region_link_bad(struct region *r, void *blk, void *next)
{
    (void)next;
    class_misuse("malloc", blk, "heap corruption: free-list link overwritten (list cut)", r->cls);
    return NULL;
}

HAK_COLD void *region_link_check(struct region *r, void *blk, void *next)
{
    uintptr_t a = (uintptr_t)next;
    unsigned b = region_map_get(a);
    if (region_map_is_region(b)) {
        struct region *nr = region_from_map(a, b);
        uintptr_t off = a - (uintptr_t)nr;
        if (nr->cls == r->cls && off >= nr->blocks_off && !(off & nr->gmask)
            && *region_tag(nr, a) != nr->live_tag)          /* free, or carved and never used */
            return next;
    }
    return region_link_bad(r, blk, next);
}

HAK_COLD void region_report_block(const char *call, struct region *r, uintptr_t p, uint8_t tag)
{
    uintptr_t off = p - (uintptr_t)r;
    int cls = r->cls;
    if ((off & (((uintptr_t)1 << r->gshift) - 1)) || off < r->blocks_off)
        class_misuse(call, (void *)p, "invalid pointer (not the start of a block)", cls);
    else if (tag == TAG_FREE || tag == TAG_HOME || (r->cls == HAK_CLS_SPAN && (tag == TAG_REMOTE || tag == TAG_CACHED || tag == TAG_DETACHED)))
        class_misuse(call, (void *)p, strcmp(call, "free") ? "use after free (block already freed)" : "double free", cls);
    else
        class_misuse(call, (void *)p, "invalid pointer (not the start of an allocated block)", cls);
}
