/* Loading and publishing a policy: defaults <- INI <- environment, then a new epoch.
 * Publishing overwrites every live heap's snapshot routes with ROUTE_NONE, so each thread's
 * next malloc or free misses into the cold path and rebuilds its snapshot: that is the bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../../include/hakmem.h"
#include "cold.h"
#include "os.h"

static void report_stderr(void *ctx, int is_error, const char *line)
{
    (void)is_error;
    if (ctx)                 /* quiet: this layer was reported before */
        return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "hakmem: %s\n", line);
    if (n > (int)sizeof buf - 1)
        n = (int)sizeof buf - 1, buf[n - 1] = '\n';
    ssize_t w = write(2, buf, (size_t)n);
    (void)w;
}

/* Start-up: compiled defaults and the environment, before anything allocates. */
HAK_COLD void cold_policy_initial(void)
{
    struct policy p;
    policy_defaults(&p);
    policy_apply_env(&p, report_stderr, NULL);
    policy_install_initial(&p);
}

HAK_COLD static int policy_publish(const struct policy *p)
{
    struct policy *copy = os_map(sizeof *copy);     /* kept forever: readers may hold the old one */
    if (copy == NULL)
        return -1;
    *copy = *p;
    cold_heap_lock();
    policy_swap(copy);
    atomic_fetch_add(&policy_epoch, 1);
    cold_heap_invalidate_all();
    cold_heap_unlock();
    return 0;
}

static int policy_load(const char *path, int env_quiet)
{
    cold_init();
    struct policy p;
    policy_defaults(&p);
    int errors = policy_apply_ini(&p, path, report_stderr, NULL);
    if (p.file[0] == 0)                 /* the file was not loaded at all */
        return -1;
    policy_apply_env(&p, report_stderr, env_quiet ? (void *)1 : NULL);
    if (policy_publish(&p) < 0)
        return -1;
    return errors ? -1 : 0;
}

/* HAKMEM_CONFIG, loaded once the core is up (iniparser allocates through us). */
HAK_COLD void cold_policy_load_config(void)
{
    const char *path = getenv("HAKMEM_CONFIG");
    if (path && *path)
        policy_load(path, 1);
}

HAK_EXPORT int hak_policy_load(const char *path)
{
    if (path == NULL)
        return -1;
    return policy_load(path, 1);
}

HAK_EXPORT void hak_policy_foreach(hak_policy_fn fn, void *ctx)
{
    cold_init();
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
