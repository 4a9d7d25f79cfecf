/* The global policy (defaults <- INI <- environment) and the per-thread snapshot of it.
 * The hot path reads only its snapshot; publishing a policy invalidates every snapshot at once. */
#ifndef HAK_POLICY_H
#define HAK_POLICY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "../common/common.h"
#include "../class/class.h"

#define HAK_SLOTS_CAP_MAX 128

enum policy_type { PT_BOOL, PT_UINT, PT_SIZE, PT_CLASSES, PT_ROUTE, PT_STRING, PT_MISUSE };

enum policy_key_id {
#define POLICY_KEY(id, ...) PK_##id,
#include "keys.def"
#undef POLICY_KEY
    PK_COUNT
};

struct policy_key {
    const char *meson;          /* Meson option that compiles it in, "" if always there */
    const char *name;           /* what a phase does, in a word or two */
    const char *section, *key, *env;
    enum policy_type type;
    uint16_t off, size;         /* its field in struct policy */
    const char *def;
    uint64_t lo, hi;
    int compiled;
    const char *help;
};

extern const struct policy_key policy_keys[PK_COUNT];

enum policy_source { SRC_DEFAULT = 0, SRC_INI, SRC_ENV, SRC_API };

/* Where one setting came from: default, a file and line, or a variable. */
struct policy_origin {
    uint8_t source;
    uint32_t line;
};

/* Each key's field, by its type: the setters and formatters reach it by offset and size.
 * Scalars first, so the cold paths' reads (purge caps, phase flags) share a cache line. */
#define POLICY_SCALAR_PT_BOOL(f)    uint8_t f;
#define POLICY_SCALAR_PT_UINT(f)    uint32_t f;
#define POLICY_SCALAR_PT_SIZE(f)    uint64_t f;
#define POLICY_SCALAR_PT_CLASSES(f) uint32_t f;             /* bit mask of tiny classes */
#define POLICY_SCALAR_PT_MISUSE(f)  uint8_t f;              /* 1: abort */
#define POLICY_SCALAR_PT_ROUTE(f)
#define POLICY_SCALAR_PT_STRING(f)
#define POLICY_ARRAY_PT_ROUTE(f)    uint8_t f[HAK_NCLASSES];  /* explicit [route] Cn, 0 = derive */
#define POLICY_ARRAY_PT_STRING(f)   char f[256];
#define POLICY_ARRAY_PT_BOOL(f)
#define POLICY_ARRAY_PT_UINT(f)
#define POLICY_ARRAY_PT_SIZE(f)
#define POLICY_ARRAY_PT_CLASSES(f)
#define POLICY_ARRAY_PT_MISUSE(f)

struct policy {
    uint8_t  route[HAK_NCLASSES];        /* effective route per class (derived) */
    /* Flags are effective: 0 when compiled out.  Those not in the snapshot are read where
     * their phase acts (an arena mapped, chunks released, a remote free), not per malloc. */
#define POLICY_KEY(id, meson, name, sec, key, env, type, field, ...) POLICY_SCALAR_##type(field)
#include "keys.def"
#undef POLICY_KEY
#define POLICY_KEY(id, meson, name, sec, key, env, type, field, ...) POLICY_ARRAY_##type(field)
#include "keys.def"
#undef POLICY_KEY
    char     file[256];                  /* the INI file loaded, "" if none */
    struct policy_origin origin[PK_COUNT];
    struct policy_origin route_origin[HAK_NCLASSES];
};

/* Phase 91 entry: the class's live tag (TAG_LIVE(cls)), which the hit path uses as slot
 * index and tag shift (class/class.h); the route follows from the class.  One byte per
 * size (1 KiB per heap): indexing by the size itself spares the hit path a round-up and
 * a shift, and a program's few hot sizes touch few of its cache lines. */
#define ROUTE91_INDEX(n) (n)
#define ROUTE91_ENTRIES  (ROUTE91_INDEX(HAK_TINY_MAX) + 1)

/* The route bytes and table are read by the owner's hot path with relaxed atomic
 * loads and overwritten with ROUTE_NONE by a publisher: that is how a new policy
 * reaches a thread that never misses (cold/publish.c).
 * Written by hand, not from keys.def, because its layout is the hot path's: a key marked
 * for the snapshot in keys.def needs a flag of its field's name here, placed where the
 * hot path wants it; policy_snapshot_build copies it. */
struct policy_snapshot {
    uint8_t  route[HAK_NCLASSES + 1];    /* and SLOT_CLASS_NONE's: always ROUTE_NONE */
    uint8_t  phase90, phase91, phase93, observe;
    uint8_t  phase100;                  /* mid blocks from spans (api_malloc_mid); a publisher clears it */
    uint8_t  phase102;                  /* slots grow (slots/refill.c); in the padding before slots_cap */
    uint16_t slots_cap;
    uint64_t epoch;
    size_t   table91_max;               /* HAK_TINY_MAX with Phase 91 on, else 0: sizes the table routes */
#if HAK_PHASE91
    uint8_t  table91[ROUTE91_ENTRIES];
#endif
    uint8_t  phase107;                  /* other threads' blocks freed by the batch (cold/batch.c) */
};

extern _Atomic uint64_t policy_epoch;

/* The policy in force: immutable once published. */
const struct policy *policy_now(void);
void policy_install_initial(const struct policy *p);   /* start-up only, before any heap */
void policy_swap(const struct policy *p);              /* publishing: cold/publish.c */
void policy_snapshot_build(struct policy_snapshot *s);

/* policy.c: defaults, values, names */
void policy_defaults(struct policy *p);
void policy_finalize(struct policy *p);
/* Parses `value` for key k (class cls for PT_ROUTE) into p.  Returns NULL or what was
 * expected; *warning (if given) is set when a compiled-out phase was switched on. */
const char *policy_set(struct policy *p, enum policy_key_id k, unsigned cls, const char *value,
                       uint8_t source, uint32_t line, const char **warning);
void policy_format(const struct policy *p, enum policy_key_id k, unsigned cls, char *buf, size_t len);
int  policy_find(const char *section, const char *key, enum policy_key_id *k, unsigned *cls);
const char *policy_suggest(const char *section, const char *key, char *buf, size_t len);
int  policy_section_known(const char *section);
const char *policy_suggest_section(const char *section);

/* Problems found while loading, one line each, as `[FILE:LINE: ]error: message` (or
 * `warning:`), without the "hakmem: " prefix the caller adds. */
typedef void (*policy_report_fn)(void *ctx, int is_error, const char *line);

/* Every effective setting as "section.key", its value, and where it came from
 * ("default", "ini FILE:LINE" or "env VAR"). */
typedef void (*policy_visit_fn)(const char *name, const char *value, const char *source, void *ctx);
void policy_describe(const struct policy *p, policy_visit_fn fn, void *ctx);

/* env.c: overlays HAKMEM_* variables; never allocates. Returns the error count. */
int policy_apply_env(struct policy *p, policy_report_fn report, void *ctx);

/* ini.c: overlays an INI file.  Returns the error count; on a file-level error
 * (missing, unreadable, binary, too large, syntax) p is left untouched. */
int policy_apply_ini(struct policy *p, const char *path, policy_report_fn report, void *ctx);
/* setting.c: value for key k (class cls) into p, or one line on what (the setting as the
 * user wrote it) and the error, then `; outcome`; a warning the same way.  0, or 1 on error. */
int policy_set_reported(struct policy *p, enum policy_key_id k, unsigned cls, const char *value, uint8_t source,
                        const char *what, const char *outcome, policy_report_fn report, void *ctx);
/* setting.c: one setting by its name (hak_policy_set) over p; 0, or 1 after reporting. */
int policy_apply_setting(struct policy *p, const char *name, const char *value, policy_report_fn report,
                         void *ctx);

#endif
