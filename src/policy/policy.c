/* Policy keys from keys.def: defaults, parsing and printing values, finding keys by name,
 * and building a thread's snapshot from the policy in force. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "policy.h"

const struct policy_key policy_keys[PK_COUNT] = {
#define POLICY_KEY(id, meson, name, sec, key, env, type, field, snap, def, lo, hi, compiled, help) \
    [PK_##id] = { meson, name, sec, key, env, type, offsetof(struct policy, field),     \
                  sizeof ((struct policy *)0)->field, def, lo, hi, compiled, help },
#include "keys.def"
#undef POLICY_KEY
};

static struct policy policy_initial;
static const struct policy *_Atomic policy_current = &policy_initial;
_Atomic uint64_t policy_epoch = 1;

const struct policy *policy_now(void)
{
    return atomic_load_explicit(&policy_current, memory_order_acquire);
}

void policy_install_initial(const struct policy *p)
{
    policy_initial = *p;
    atomic_store(&policy_current, &policy_initial);
    report_set_abort(p->on_misuse_abort);
}

void policy_swap(const struct policy *p)
{
    atomic_store(&policy_current, p);
    report_set_abort(p->on_misuse_abort);
}

void policy_defaults(struct policy *p)
{
    memset(p, 0, sizeof *p);
    for (unsigned k = 0; k < PK_COUNT; k++)
        if (policy_keys[k].type != PT_ROUTE)
            policy_set(p, (enum policy_key_id)k, 0, policy_keys[k].def, SRC_DEFAULT, 0, NULL);
    policy_finalize(p);
}

/* Effective routes: an explicit [route] Cn wins, else [slots] classes decides. */
void policy_finalize(struct policy *p)
{
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        if (p->route_set[c])
            p->route[c] = p->route_set[c];
        else if (c < HAK_NTINY)
            p->route[c] = (p->slots_mask >> c) & 1 ? ROUTE_SLOTS : ROUTE_TLIST;
        else
            p->route[c] = ROUTE_MID;
    }
}

static int parse_bool(const char *v, int *out)
{
    static const char *yes[] = { "on", "yes", "true", "1" }, *no[] = { "off", "no", "false", "0" };
    for (unsigned i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return *out = 1, 1;
        if (!strcasecmp(v, no[i]))
            return *out = 0, 1;
    }
    return 0;
}

static int parse_uint(const char *v, uint64_t *out, int with_suffix)
{
    uint64_t x = 0;
    const char *s = v;
    if (!isdigit((unsigned char)*s))
        return 0;
    for (; isdigit((unsigned char)*s); s++) {
        if (x > (UINT64_MAX - 9) / 10)
            return 0;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    if (with_suffix && *s) {
        unsigned shift = 0;
        switch (tolower((unsigned char)*s)) {
        case 'k': shift = 10; break;
        case 'm': shift = 20; break;
        case 'g': shift = 30; break;
        case 't': shift = 40; break;
        default: return 0;
        }
        s++;
        if (!strcasecmp(s, "ib") || !strcasecmp(s, "b"))
            s += strlen(s);
        if (x > (UINT64_MAX >> shift))
            return 0;
        x <<= shift;
    }
    if (*s)
        return 0;
    *out = x;
    return 1;
}

/* "Cn": n a tiny class number without leading zeros; the end of it in *end. */
static int parse_class_name(const char *s, unsigned *cls, const char **end)
{
    if (toupper((unsigned char)s[0]) != 'C' || s[1] < '0' || s[1] > '9')
        return 0;
    unsigned n = (unsigned)(s[1] - '0');
    s += 2;
    if (n && *s >= '0' && *s <= '9')
        n = n * 10 + (unsigned)(*s++ - '0');
    if (n >= HAK_NTINY || (*s >= '0' && *s <= '9'))
        return 0;
    *cls = n;
    *end = s;
    return 1;
}

/* "C5-C20", "C0,C5", "none" -> bit mask of tiny classes. */
static int parse_classes(const char *v, uint32_t *mask)
{
    if (!strcasecmp(v, "none")) {
        *mask = 0;
        return 1;
    }
    uint32_t m = 0;
    const char *s = v;
    for (;;) {
        while (*s == ' ')
            s++;
        unsigned a, b;
        if (!parse_class_name(s, &a, &s))
            return 0;
        b = a;
        if (*s == '-') {
            if (!parse_class_name(s + 1, &b, &s) || b < a)
                return 0;
        }
        for (unsigned c = a; c <= b; c++)
            m |= (uint32_t)1 << c;
        while (*s == ' ')
            s++;
        if (*s == 0)
            break;
        if (*s++ != ',')
            return 0;
    }
    *mask = m;
    return 1;
}

static const char *size_text(uint64_t v, char *buf, size_t len)
{
    static const char suffix[] = "KMGT";
    int i = -1;
    while (v && (v & 1023) == 0 && i < 3)
        v >>= 10, i++;
    if (i < 0)
        snprintf(buf, len, "%llu", (unsigned long long)v);
    else
        snprintf(buf, len, "%llu%c", (unsigned long long)v, suffix[i]);
    return buf;
}

/* Fields are 1, 2, 4 or 8 bytes wide (keys.def's type column picks the width). */
static void field_store(void *f, unsigned size, uint64_t v)
{
    switch (size) {
    case 1: *(uint8_t *)f = (uint8_t)v; break;
    case 2: *(uint16_t *)f = (uint16_t)v; break;
    case 4: *(uint32_t *)f = (uint32_t)v; break;
    default: *(uint64_t *)f = v; break;
    }
}

static uint64_t field_load(const void *f, unsigned size)
{
    switch (size) {
    case 1: return *(const uint8_t *)f;
    case 2: return *(const uint16_t *)f;
    case 4: return *(const uint32_t *)f;
    default: return *(const uint64_t *)f;
    }
}

const char *policy_set(struct policy *p, enum policy_key_id k, unsigned cls, const char *v,
                       uint8_t source, uint32_t line, const char **warning)
{
    static __thread char expect[160];
    const struct policy_key *key = &policy_keys[k];
    void *field = (char *)p + key->off;
    int b;
    uint64_t u;
    uint32_t m;
    char lo[24], hi[24];
    switch (key->type) {
    case PT_BOOL:
        if (!parse_bool(v, &b))
            return "expected on or off";
        if (b && !key->compiled) {      /* the program runs on, with the phase off */
            static __thread char warn[160];
            snprintf(warn, sizeof warn, "%s is compiled out of this build (meson configure -D%s=true); it stays off",
                     key->key, key->meson);
            if (warning)
                *warning = warn;
            b = 0;
        }
        field_store(field, key->size, (uint64_t)b);
        break;
    case PT_UINT:
        if (!parse_uint(v, &u, 0) || u < key->lo || u > key->hi) {
            snprintf(expect, sizeof expect, "expected a whole number from %llu to %llu",
                     (unsigned long long)key->lo, (unsigned long long)key->hi);
            return expect;
        }
        field_store(field, key->size, u);
        break;
    case PT_SIZE:
        if (!parse_uint(v, &u, 1) || u < key->lo || u > key->hi) {
            snprintf(expect, sizeof expect, "expected a size in bytes from %s to %s (suffixes K, M, G)",
                     size_text(key->lo, lo, sizeof lo), size_text(key->hi, hi, sizeof hi));
            return expect;
        }
        field_store(field, key->size, u);
        break;
    case PT_CLASSES:
        if (!parse_classes(v, &m))
            return "expected tiny classes C0-C20 as a list or range (C5-C20, C2,C5) or none";
        field_store(field, key->size, m);
        break;
    case PT_ROUTE:
        if (cls < HAK_NTINY) {
            if (!strcasecmp(v, "slots"))
                ((uint8_t *)field)[cls] = ROUTE_SLOTS;
            else if (!strcasecmp(v, "tlist"))
                ((uint8_t *)field)[cls] = ROUTE_TLIST;
            else
                return "expected slots or tlist (tiny classes C0-C20)";
        } else {
            if (strcasecmp(v, "mid"))
                return "expected mid (classes C21-C52 have one route)";
            ((uint8_t *)field)[cls] = ROUTE_MID;
        }
        p->route_origin[cls] = (struct policy_origin){ source, line };
        return NULL;
    case PT_STRING:
        if (!*v || strlen(v) >= key->size) {
            snprintf(expect, sizeof expect, "expected a file path (at most %u characters)",
                     key->size - 1u);
            return expect;
        }
        memcpy(field, v, strlen(v) + 1);
        break;
    case PT_MISUSE:
        if (!strcasecmp(v, "report"))
            field_store(field, key->size, 0);
        else if (!strcasecmp(v, "abort"))
            field_store(field, key->size, 1);
        else
            return "expected report or abort";
        break;
    }
    p->origin[k] = (struct policy_origin){ source, line };
    return NULL;
}

void policy_format(const struct policy *p, enum policy_key_id k, unsigned cls, char *buf, size_t len)
{
    const struct policy_key *key = &policy_keys[k];
    const void *field = (const char *)p + key->off;
    uint64_t u = key->type == PT_ROUTE || key->type == PT_STRING ? 0 : field_load(field, key->size);
    char tmp[24];
    switch (key->type) {
    case PT_BOOL:   snprintf(buf, len, "%s", u ? "on" : "off"); break;
    case PT_UINT:   snprintf(buf, len, "%llu", (unsigned long long)u); break;
    case PT_SIZE:   snprintf(buf, len, "%s", size_text(u, tmp, sizeof tmp)); break;
    case PT_STRING: snprintf(buf, len, "%s", (const char *)field); break;
    case PT_MISUSE: snprintf(buf, len, "%s", u ? "abort" : "report"); break;
    case PT_ROUTE:  snprintf(buf, len, "%s", class_route_name(p->route[cls])); break;   /* effective */
    case PT_CLASSES: {
        /* runs of two or more as ranges, the form parse_classes reads back */
        size_t n = 0;
        buf[0] = 0;
        for (unsigned c = 0; c < HAK_NTINY && n + 12 < len; c++) {
            if (!((u >> c) & 1))
                continue;
            unsigned e = c;
            while (e + 1 < HAK_NTINY && ((u >> (e + 1)) & 1))
                e++;
            n += (size_t)snprintf(buf + n, len - n, e > c ? "%sC%u-C%u" : "%sC%u", n ? "," : "", c, e);
            c = e;
        }
        if (n == 0)
            snprintf(buf, len, "none");
        break;
    }
    }
}

/* Route keys are "c<n>" (iniparser lowercases keys). */
static int route_key(const char *key, unsigned *cls)
{
    if (tolower((unsigned char)key[0]) != 'c' || !isdigit((unsigned char)key[1]))
        return 0;
    unsigned n = 0;
    const char *s = key + 1;
    for (; isdigit((unsigned char)*s) && n < 1000; s++)
        n = n * 10 + (unsigned)(*s - '0');
    if (*s || n >= HAK_NCLASSES || (key[1] == '0' && key[2]))
        return 0;
    *cls = n;
    return 1;
}

int policy_section_known(const char *section)
{
    for (unsigned k = 0; k < PK_COUNT; k++)
        if (!strcasecmp(policy_keys[k].section, section))
            return 1;
    return 0;
}

int policy_find(const char *section, const char *key, enum policy_key_id *id, unsigned *cls)
{
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        if (strcasecmp(pk->section, section))
            continue;
        if (pk->type == PT_ROUTE ? route_key(key, cls) : !strcasecmp(pk->key, key)) {
            *id = (enum policy_key_id)k;
            if (pk->type != PT_ROUTE)
                *cls = 0;
            return 1;
        }
    }
    return 0;
}

static unsigned edit_distance(const char *a, const char *b)
{
    unsigned row[64], la = (unsigned)strlen(a), lb = (unsigned)strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    for (unsigned j = 0; j <= lb; j++)
        row[j] = j;
    for (unsigned i = 1; i <= la; i++) {
        unsigned prev = row[0];
        row[0] = i;
        for (unsigned j = 1; j <= lb; j++) {
            unsigned cur = row[j];
            unsigned cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            unsigned best = prev + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

/* The nearest known "[section] key" to a misspelt one, or NULL when nothing is close. */
const char *policy_suggest(const char *section, const char *key, char *buf, size_t len)
{
    unsigned best = 99, bk = 0;
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        if (pk->type == PT_ROUTE)
            continue;
        unsigned d = edit_distance(pk->key, key);
        if (strcasecmp(pk->section, section))
            d += *section ? edit_distance(pk->section, section) : 3;
        if (d < best)
            best = d, bk = k;
    }
    if (best > 4)
        return NULL;
    snprintf(buf, len, "[%s] %s", policy_keys[bk].section, policy_keys[bk].key);
    return buf;
}

const char *policy_suggest_section(const char *section)
{
    unsigned best = 99;
    const char *name = NULL;
    for (unsigned k = 0; k < PK_COUNT; k++) {
        unsigned d = edit_distance(policy_keys[k].section, section);
        if (d < best)
            best = d, name = policy_keys[k].section;
    }
    return best <= 3 ? name : NULL;
}

void policy_snapshot_build(struct policy_snapshot *s)
{
    const struct policy *g = policy_now();
    s->epoch = atomic_load(&policy_epoch);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        uint8_t r = g->route[c];
        if (c >= HAK_NTINY && (r == ROUTE_SLOTS || r == ROUTE_NONE))   /* slots exist for tiny classes only */
            r = ROUTE_MID;
        __atomic_store_n(&s->route[c], r, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&s->route[SLOT_CLASS_NONE], ROUTE_NONE, __ATOMIC_RELAXED);
    s->slots_cap = (uint16_t)(g->slots_cap ? g->slots_cap : 1);
    /* relaxed stores: a publisher may clear a flag (phase100) while its owner rebuilds */
#define POLICY_SNAP_0(field, compiled)
#define POLICY_SNAP_1(field, compiled) \
    __atomic_store_n(&s->field, (uint8_t)((compiled) && g->field), __ATOMIC_RELAXED);
#define POLICY_KEY(id, meson, name, sec, key, env, type, field, snap, def, lo, hi, compiled, help) \
    POLICY_SNAP_##snap(field, compiled)
#include "keys.def"
#undef POLICY_KEY
#undef POLICY_SNAP_1
#undef POLICY_SNAP_0
    s->table91_max = s->phase91 ? HAK_TINY_MAX : 0;
#if HAK_PHASE91
    /* Sizes above the class before up to a class's size are its (class_of_size, which a
     * new thread's heap would otherwise run once per size).  Plain stores: a heap's
     * snapshot is built under the heap lock, which publishers hold to write it too. */
    size_t n = 0;
    for (unsigned c = 0; c < HAK_NTINY; c++) {
        size_t end = class_size(c) + 1;
        memset(s->table91 + n, TAG_LIVE(c), end - n);
        n = end;
    }
#endif
}

static const char *source_text(const struct policy *p, struct policy_origin o, const char *env,
                               unsigned cls, char *buf, size_t len)
{
    switch (o.source) {
    case SRC_INI:
        snprintf(buf, len, "ini %s:%u", p->file, o.line);
        break;
    case SRC_API:
        snprintf(buf, len, "hak_policy_set");
        break;
    case SRC_ENV:
        if (env)
            snprintf(buf, len, "env %s", env);
        else
            snprintf(buf, len, "env HAKMEM_ROUTE_C%u", cls);
        break;
    default:
        snprintf(buf, len, "default");
    }
    return buf;
}

void policy_describe(const struct policy *p, policy_visit_fn fn, void *ctx)
{
    char name[64], value[300], src[320];
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        if (pk->type != PT_ROUTE) {
            snprintf(name, sizeof name, "%s.%s", pk->section, pk->key);
            policy_format(p, (enum policy_key_id)k, 0, value, sizeof value);
            fn(name, value, source_text(p, p->origin[k], pk->env, 0, src, sizeof src), ctx);
            continue;
        }
        for (unsigned c = 0; c < HAK_NCLASSES; c++) {
            snprintf(name, sizeof name, "route.C%u", c);
            policy_format(p, PK_ROUTE, c, value, sizeof value);
            struct policy_origin o = p->route_origin[c];
            if (o.source == SRC_DEFAULT && !p->route_set[c] && c < HAK_NTINY)
                o = p->origin[PK_SLOTS_CLASSES];          /* derived from [slots] classes */
            fn(name, value, source_text(p, o, NULL, c, src, sizeof src), ctx);
        }
    }
}
