/* The hakmem command line: checking and listing policies (`config`), and running a
 * program under the allocator (`run`); `ab` and `compare` hand over to tools/hakmem_bench.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "policy/policy.h"
#include "cold/cold.h"

#ifndef HAKMEM_LIBDIR
#define HAKMEM_LIBDIR ""
#endif
/* ab and compare live in tools/hakmem_bench.py; tools/meson.build sets these paths. */
#ifndef HAKMEM_BENCH_SCRIPT_SRC
#define HAKMEM_BENCH_SCRIPT_SRC ""
#endif
#ifndef HAKMEM_BENCH_SCRIPT_INST
#define HAKMEM_BENCH_SCRIPT_INST ""
#endif
#ifndef HAKMEM_TOOL_BUILDDIR
#define HAKMEM_TOOL_BUILDDIR ""
#endif

static const char *type_name(enum policy_type t)
{
    switch (t) {
    case PT_BOOL:    return "on/off";
    case PT_UINT:    return "number";
    case PT_SIZE:    return "size";
    case PT_CLASSES: return "classes";
    case PT_ROUTE:   return "route";
    case PT_STRING:  return "path";
    case PT_MISUSE:  return "report/abort";
    }
    return "?";
}

static int config_list(int markdown)
{
    if (markdown) {
        printf("| INI | name | environment | type | default | Meson option | compiled in | what it does |\n");
        printf("|---|---|---|---|---|---|---|---|\n");
    }
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        const char *def = pk->type == PT_ROUTE ? "from [slots]" : pk->def;
        const char *meson = *pk->meson ? pk->meson : "-";
        const char *in = pk->compiled ? "yes" : "no";
        if (markdown)
            printf("| `[%s] %s` | %s | `%s` | %s | `%s` | %s | %s | %s |\n", pk->section, pk->key,
                   *pk->name ? pk->name : "-", pk->env, type_name(pk->type), def, meson, in, pk->help);
        else
            printf("[%s] %-12s %-18s %-24s %-12s default %-8s meson %-8s compiled %-3s  %s\n", pk->section,
                   pk->key, pk->name, pk->env, type_name(pk->type), def, meson, in, pk->help);
    }
    return 0;
}

/* "section.key = value (source)", and a phase's short name, which the visitor does not carry. */
static void print_setting(const char *name, const char *value, const char *source, void *ctx)
{
    (void)ctx;
    char section[32];
    const char *dot = strchr(name, '.');
    enum policy_key_id k;
    unsigned cls;
    const char *what = "";
    if (dot && (size_t)(dot - name) < sizeof section) {
        snprintf(section, sizeof section, "%.*s", (int)(dot - name), name);
        if (policy_find(section, dot + 1, &k, &cls))
            what = policy_keys[k].name;
    }
    printf("%-22s = %-12s (%s)%s%s\n", name, value, source, *what ? "  " : "", what);
}

struct counts {
    int errors, warnings;
};

static void report(void *ctx, int is_error, const char *line)
{
    struct counts *c = ctx;
    fprintf(stderr, "%s: %s\n", is_error ? "error" : "warning", line);
    if (is_error)
        c->errors++;
    else
        c->warnings++;
}

/* Effective policy for FILE (defaults <- FILE <- environment), or every problem. */
static int config_check(const char *path)
{
    struct counts c = { 0, 0 };
    struct policy p;
    cold_init_core();
    policy_defaults(&p);
    int errors = policy_apply_ini(&p, path, report, &c);     /* counts what was not shown too */
    if (p.file[0] == 0) {
        fprintf(stderr, "%s: not loaded\n", path);
        return 1;
    }
    errors += policy_apply_env(&p, report, &c);
    policy_describe(&p, print_setting, NULL);
    if (errors)
        fprintf(stderr, "%s: %d error(s), %d warning(s)\n", path, errors, c.warnings);
    return errors ? 1 : 0;
}

static int config_show(void)
{
    const char *path = getenv("HAKMEM_CONFIG");
    if (path && *path)
        return config_check(path);
    struct counts c = { 0, 0 };
    struct policy p;
    cold_init_core();
    policy_defaults(&p);
    policy_apply_env(&p, report, &c);
    policy_describe(&p, print_setting, NULL);
    return c.errors ? 1 : 0;
}

/* The library next to this executable (build tree) or in the install libdir. */
static const char *find_library(char *buf, size_t len)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            const char *try[] = { "%s/libhakmem.so", "%s/../libhakmem.so", "%s/../lib/libhakmem.so" };
            for (unsigned i = 0; i < 3; i++) {
                snprintf(buf, len, try[i], self);
                if (access(buf, R_OK) == 0)
                    return buf;
            }
        }
    }
    snprintf(buf, len, "%s/libhakmem.so", HAKMEM_LIBDIR);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

static int run(int argc, char **argv)
{
    int i = 0;
    while (i < argc && strcmp(argv[i], "--") != 0) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            setenv("HAKMEM_CONFIG", argv[i + 1], 1);
            i += 2;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "hakmem run: unknown option %s\n", argv[i]);
            return 2;
        } else {
            break;
        }
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    if (i >= argc) {
        fprintf(stderr, "usage: hakmem run [--config FILE] -- PROGRAM [ARGS...]\n");
        return 2;
    }
    char lib[4096];
    if (!find_library(lib, sizeof lib)) {
        fprintf(stderr, "hakmem run: libhakmem.so not found next to %s or in %s\n", "this program", HAKMEM_LIBDIR);
        return 1;
    }
    const char *old = getenv("LD_PRELOAD");
    char preload[8192];
    if (old && *old)
        snprintf(preload, sizeof preload, "%s:%s", lib, old);
    else
        snprintf(preload, sizeof preload, "%s", lib);
    setenv("LD_PRELOAD", preload, 1);
    execvp(argv[i], argv + i);
    fprintf(stderr, "hakmem run: %s: %s\n", argv[i], strerror(errno));
    return 127;
}

/* Runs `python3 hakmem_bench.py ab|compare ARGS...`.  HAKMEM_BENCH_SCRIPT overrides the
 * script; otherwise a binary running from its build tree uses the source tree's copy (so
 * edits need no reinstall) and an installed binary the copy in DATADIR/hakmem. */
static int bench_tool(int argc, char **argv)
{
    const char *script = getenv("HAKMEM_BENCH_SCRIPT");
    if (!script || !*script) {
        char self[4096], builddir[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        int in_build_tree = 0;
        if (n > 0 && realpath(HAKMEM_TOOL_BUILDDIR, builddir)) {
            self[n] = 0;
            char *slash = strrchr(self, '/');
            if (slash) {
                *slash = 0;
                in_build_tree = !strcmp(self, builddir);
            }
        }
        const char *first = in_build_tree ? HAKMEM_BENCH_SCRIPT_SRC : HAKMEM_BENCH_SCRIPT_INST;
        const char *second = in_build_tree ? HAKMEM_BENCH_SCRIPT_INST : HAKMEM_BENCH_SCRIPT_SRC;
        script = access(first, R_OK) == 0 ? first : second;
        if (access(script, R_OK) != 0) {
            fprintf(stderr, "hakmem %s: hakmem_bench.py not found in %s or %s (set HAKMEM_BENCH_SCRIPT)\n",
                    argv[0], HAKMEM_BENCH_SCRIPT_SRC, HAKMEM_BENCH_SCRIPT_INST);
            return 1;
        }
    }
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args) {
        perror("hakmem");
        return 1;
    }
    args[0] = "python3";
    args[1] = (char *)script;
    for (int i = 0; i < argc; i++)
        args[i + 2] = argv[i];
    execvp(args[0], args);
    fprintf(stderr, "hakmem %s: python3: %s (ab and compare need Python 3)\n", argv[0], strerror(errno));
    free(args);
    return 127;
}

static int usage(FILE *f)
{
    fprintf(f,
            "usage: hakmem config check FILE     effective policy for FILE, or every problem (exit 1)\n"
            "       hakmem config show           effective policy from HAKMEM_CONFIG and HAKMEM_* variables\n"
            "       hakmem config list [--markdown]  every policy key: INI, variable, default, Meson option\n"
            "       hakmem run [--config FILE] -- PROGRAM [ARGS...]   run a program under hakmem\n"
            "       hakmem ab [--bench NAME] [--runs N] [--warmup K] [--threshold PCT] [--build-dir DIR] [--csv FILE]\n"
            "                 A B [-- BENCH_ARGS...]   A/B of two INI policies, .so files, build:DIR or glibc, with a verdict\n"
            "       hakmem compare [--runs N] [--benches a,b] [--out DIR] [--build-dir DIR] [--pgo-build-dir DIR]\n"
            "                 every benchmark under glibc, mimalloc, jemalloc, tcmalloc, hakmem Standard and FAST PGO\n");
    return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")))
        return usage(stdout);
    if (argc >= 3 && !strcmp(argv[1], "config")) {
        if (!strcmp(argv[2], "check") && argc == 4)
            return config_check(argv[3]);
        if (!strcmp(argv[2], "show") && argc == 3)
            return config_show();
        if (!strcmp(argv[2], "list") && (argc == 3 || (argc == 4 && !strcmp(argv[3], "--markdown"))))
            return config_list(argc == 4);
    }
    if (argc >= 2 && !strcmp(argv[1], "run"))
        return run(argc - 2, argv + 2);
    if (argc >= 2 && (!strcmp(argv[1], "ab") || !strcmp(argv[1], "compare")))
        return bench_tool(argc - 1, argv + 1);
    return usage(stderr);
}
