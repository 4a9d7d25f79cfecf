/* The environment layer of the policy: HAKMEM_<KEY>=value overlays the INI file.
 * Runs during start-up before anything may allocate, so it uses secure_getenv and stack buffers only. */
#define _GNU_SOURCE                         /* secure_getenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include "policy.h"

extern char **environ;

static int apply_one(struct policy *p, enum policy_key_id k, unsigned cls, const char *var,
                     policy_report_fn report, void *ctx)
{
    /* A setuid or setgid program must not take its settings (an output file it would create)
     * from whoever ran it: secure_getenv says nothing then, as glibc's tunables do. */
    const char *v = secure_getenv(var);
    if (v == NULL)
        return 0;
    char what[320];
    snprintf(what, sizeof what, "%s=%s", var, v);
    return policy_set_reported(p, k, cls, v, SRC_ENV, what, "ignored", report, ctx);
}

static int env_known(const char *name, size_t len)
{
    char var[48];
    if (len == strlen("HAKMEM_CONFIG") && !strncmp(name, "HAKMEM_CONFIG", len))
        return 1;
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        if (pk->type == PT_ROUTE) {
            for (unsigned c = 0; c < HAK_NCLASSES; c++) {
                snprintf(var, sizeof var, "HAKMEM_ROUTE_C%u", c);
                if (strlen(var) == len && !strncmp(var, name, len))
                    return 1;
            }
        } else if (strlen(pk->env) == len && !strncmp(pk->env, name, len)) {
            return 1;
        }
    }
    return 0;
}

int policy_apply_env(struct policy *p, policy_report_fn report, void *ctx)
{
    int errors = 0;
    char var[48];
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        if (pk->type == PT_ROUTE) {
            for (unsigned c = 0; c < HAK_NCLASSES; c++) {
                snprintf(var, sizeof var, "HAKMEM_ROUTE_C%u", c);
                errors += apply_one(p, (enum policy_key_id)k, c, var, report, ctx);
            }
        } else {
            errors += apply_one(p, (enum policy_key_id)k, 0, pk->env, report, ctx);
        }
    }
    /* A misspelt variable would otherwise be silently ignored.  In secure mode every one is
     * ignored, so none is worth a line. */
    for (char **e = getauxval(AT_SECURE) ? NULL : environ; e && *e; e++) {
        if (strncmp(*e, "HAKMEM_", 7))
            continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (!env_known(*e, len)) {
            char line[256];
            snprintf(line, sizeof line, "error: unknown variable %.*s; ignored (see `hakmem config list`)", (int)len, *e);
            report(ctx, 1, line);
            errors++;
        }
    }
    policy_finalize(p);
    return errors;
}
