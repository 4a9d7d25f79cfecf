/* The policy half of the public API: loading a policy file at run time, and reading the
 * policy in force key by key with where each setting came from. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "../../include/hakmem.h"
#include "../cold/cold.h"

HAK_EXPORT int hak_policy_load(const char *path)
{
    if (path == NULL)
        return -1;
    return policy_publish_file(path, 1);
}

HAK_EXPORT int hak_policy_set(const char *name, const char *value)
{
    return policy_publish_setting(name, value);
}

HAK_EXPORT void hak_policy_foreach(hak_policy_fn fn, void *ctx)
{
    init_process();
    policy_describe(policy_now(), fn, ctx);
}

struct get_ctx {
    const char *name;
    char *value, *source;
    size_t vlen, slen;
    int found;
};

static void get_visit(const char *name, const char *value, const char *source, void *ctx)
{
    struct get_ctx *g = ctx;
    if (g->found || strcasecmp(name, g->name))
        return;
    g->found = 1;
    if (g->value && g->vlen)
        snprintf(g->value, g->vlen, "%s", value);
    if (g->source && g->slen)
        snprintf(g->source, g->slen, "%s", source);
}

HAK_EXPORT int hak_policy_get(const char *name, char *value, size_t vlen, char *source, size_t slen)
{
    struct get_ctx g = { name, value, source, vlen, slen, 0 };
    if (name == NULL)
        return -1;
    hak_policy_foreach(get_visit, &g);
    return g.found ? 0 : -1;
}

HAK_EXPORT uint64_t hak_policy_epoch(void)
{
    return atomic_load(&policy_epoch);
}
