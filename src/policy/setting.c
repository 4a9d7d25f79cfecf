/* One setting by its name ("purge.retain", "route.C5"), as hak_policy_set is given it: the
 * same parsing, ranges and messages as the INI file and the environment. */
#include <stdio.h>
#include <string.h>
#include "policy.h"

int policy_set_reported(struct policy *p, enum policy_key_id k, unsigned cls, const char *value, uint8_t source,
                        const char *what, const char *outcome, policy_report_fn report, void *ctx)
{
    char line[1024];
    const char *warn = NULL;
    const char *err = policy_set(p, k, cls, value, source, 0, &warn);
    if (err) {
        snprintf(line, sizeof line, "error: %s: %s; %s", what, err, outcome);
        report(ctx, 1, line);
        return 1;
    }
    if (warn) {
        snprintf(line, sizeof line, "warning: %s: %s", what, warn);
        report(ctx, 0, line);
    }
    return 0;
}

int policy_apply_setting(struct policy *p, const char *name, const char *value, policy_report_fn report,
                         void *ctx)
{
    char line[512], section[32], near[96];
    const char *dot = name ? strchr(name, '.') : NULL;
    if (dot == NULL || dot == name || (size_t)(dot - name) >= sizeof section || value == NULL) {
        snprintf(line, sizeof line, "error: hak_policy_set(%s, %s): expected SECTION.KEY and a value, as "
                 "`hakmem config show` names them; policy unchanged", name ? name : "NULL", value ? value : "NULL");
        report(ctx, 1, line);
        return 1;
    }
    memcpy(section, name, (size_t)(dot - name));
    section[dot - name] = 0;
    enum policy_key_id k;
    unsigned cls;
    if (!policy_find(section, dot + 1, &k, &cls)) {
        const char *s = policy_suggest(section, dot + 1, near, sizeof near);
        snprintf(line, sizeof line, "error: hak_policy_set: unknown key %s%s%s; policy unchanged (see `hakmem "
                 "config list`)", name, s ? ", did you mean " : "", s ? s : "");
        report(ctx, 1, line);
        return 1;
    }
    char what[384];
    snprintf(what, sizeof what, "hak_policy_set: %s = %s", name, value);
    if (policy_set_reported(p, k, cls, value, SRC_API, what, "policy unchanged", report, ctx))
        return 1;
    policy_finalize(p);
    return 0;
}
