/* Loading and publishing a policy: defaults <- INI <- environment, then a new epoch.
 * Publishing overwrites every live heap's snapshot routes with ROUTE_NONE, so each thread's
 * next malloc or free misses into the cold path and rebuilds its snapshot: that is the bound. */
#define _GNU_SOURCE                         /* secure_getenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cold.h"
#include "hakmem_version.h"

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

/* The heap lock held: it orders publishes (a setting is read, changed and published under
 * it, so two at once both land) and fork takes it first. */
HAK_COLD static int policy_publish_locked(const struct policy *p)
{
    struct policy *copy = os_map(sizeof *copy);     /* kept forever: readers may hold the old one */
    if (copy == NULL)
        return -1;
    *copy = *p;
    policy_swap(copy);
    atomic_fetch_add(&policy_epoch, 1);
    heap_invalidate_all();
    return 0;
}

HAK_COLD static int policy_publish(const struct policy *p)
{
    heap_lock();
    int r = policy_publish_locked(p);
    heap_unlock();
    return r;
}

/* hak_policy_set: one setting over the policy in force, as the INI file would set it
 * (until the next hak_policy_load, which starts again from the defaults). */
HAK_COLD int policy_publish_setting(const char *name, const char *value)
{
    init_process();
    heap_lock();
    struct policy p = *policy_now();
    int r = policy_apply_setting(&p, name, value, report_stderr, NULL) ? -1 : policy_publish_locked(&p);
    heap_unlock();
    return r;
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

static void verbose_write(const char *s, size_t n)
{
    ssize_t w = write(2, s, n);
    (void)w;
}

static void verbose_setting(const char *name, const char *value, const char *source, void *ctx)
{
    (void)ctx;
    /* 53 routes that follow [slots] classes say nothing [slots] classes does not */
    if (!strncmp(name, "route.", 6) && !strcmp(source, "default"))
        return;
    char line[768];
    int n = snprintf(line, sizeof line, "hakmem:   %-22s = %-12s (%s)\n", name, value, source);
    verbose_write(line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
}

/* [stats] verbose, as MIMALLOC_VERBOSE: what this process runs with and why, once. */
HAK_COLD void policy_report_verbose(void)
{
    const struct policy *p = policy_now();
    char line[768];
    int n = snprintf(line, sizeof line, "hakmem: version %s, pid %d, policy epoch %llu; %s%s\n", HAK_VERSION,
                     (int)getpid(), (unsigned long long)atomic_load(&policy_epoch),
                     p->file[0] ? "INI file " : "no INI file (HAKMEM_CONFIG unset or not loaded)", p->file);
    verbose_write(line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
    static const char head[] = "hakmem: settings (default, ini FILE:LINE or env VARIABLE):\n";
    verbose_write(head, sizeof head - 1);
    policy_describe(p, verbose_setting, NULL);
    size_t in = (size_t)snprintf(line, sizeof line, "hakmem: compiled in:");
    for (unsigned k = 0; k < PK_COUNT && in < sizeof line - 40; k++)
        if (*policy_keys[k].meson && policy_keys[k].compiled && strcmp(policy_keys[k].meson, "observe") != 0)
            in += (size_t)snprintf(line + in, sizeof line - in, " %s", policy_keys[k].meson);
    in += (size_t)snprintf(line + in, sizeof line - in, "%s%s; compiled out:", HAK_OBSERVE ? " observe" : "",
                           HAK_HARDENED ? " hardened" : "");
    for (unsigned k = 0; k < PK_COUNT && in < sizeof line - 40; k++)
        if (*policy_keys[k].meson && !policy_keys[k].compiled && strcmp(policy_keys[k].meson, "observe") != 0)
            in += (size_t)snprintf(line + in, sizeof line - in, " %s", policy_keys[k].meson);
    in += (size_t)snprintf(line + in, sizeof line - in, "%s\n", HAK_OBSERVE ? "" : " observe");
    verbose_write(line, in < sizeof line ? in : sizeof line - 1);
}

/* HAKMEM_CONFIG, loaded once the core is up (iniparser allocates through us). */
HAK_COLD void policy_publish_config(void)
{
    const char *path = secure_getenv("HAKMEM_CONFIG");    /* as every setting (policy/env.c) */
    if (path && *path)
        policy_publish_file(path, 1);
}
