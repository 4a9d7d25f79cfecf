/* Loading and publishing a policy: defaults <- INI <- environment, then a new epoch.
 * Publishing overwrites every live heap's snapshot routes with ROUTE_NONE, so each thread's
 * next malloc or free misses into the cold path and rebuilds its snapshot: that is the bound. */
#define _GNU_SOURCE                         /* secure_getenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cold.h"

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
HAK_COLD void policy_publish_initial(void)
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
    heap_lock();
    policy_swap(copy);
    atomic_fetch_add(&policy_epoch, 1);
    heap_invalidate_all();
    heap_unlock();
    return 0;
}

HAK_COLD int policy_publish_file(const char *path, int env_quiet)
{
    init_process();
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
HAK_COLD void policy_publish_config(void)
{
    const char *path = secure_getenv("HAKMEM_CONFIG");    /* as every setting (policy/env.c) */
    if (path && *path)
        policy_publish_file(path, 1);
}
