/* The hakmem command line: checking and listing policies (`config`), running a program under
 * the allocator (`run`) or measured (`measure`); `ab` and `compare` hand over to tools/hakmem_bench.py. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
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
    init_core();
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
    init_core();
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

static double tv_seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Runs PROGRAM as a child and reports its wall time, user+system CPU time and the peak RSS of
 * its whole process tree.  hakmem_bench.py runs every measured command through this: Linux
 * carries a process's RSS high-water mark over into a child through fork and exec, so a
 * command started by Python itself would report at least Python's own RSS.  This process is
 * small, and it reports only RUSAGE_CHILDREN, never its own (inherited) maximum. */
static int measure(int argc, char **argv)
{
    int fd = -1, i = 0;
    char **assign = calloc((size_t)argc + 1, sizeof *assign);
    int nassign = 0;
    if (!assign) {
        perror("hakmem: error: measure");
        return 1;
    }
    while (i < argc && strcmp(argv[i], "--") != 0) {
        if (!strcmp(argv[i], "--fd") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[i + 1], &end, 10);
            if (*end || v < 0 || fcntl((int)v, F_GETFD) < 0) {
                fprintf(stderr, "hakmem: error: measure: --fd %s is not an open file descriptor\n", argv[i + 1]);
                return 2;
            }
            fd = (int)v;
            /* Only we write the report: a program holding it open would keep the reader waiting. */
            fcntl(fd, F_SETFD, FD_CLOEXEC);
            i += 2;
        } else if (!strcmp(argv[i], "-e") && i + 1 < argc && strchr(argv[i + 1], '=')) {
            assign[nassign++] = argv[i + 1];
            i += 2;
        } else {
            break;
        }
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    if (i >= argc) {
        fprintf(stderr, "usage: hakmem measure [--fd N] [-e NAME=VALUE]... -- PROGRAM [ARGS...]\n");
        return 2;
    }
    /* Descendants that outlive their parent (a daemon, a shell's background job) come to us
     * instead of init, so their usage is counted when we reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        perror("hakmem: error: measure: pipe");
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("hakmem: error: measure: fork");
        return 1;
    }
    if (pid == 0) {
        close(errpipe[0]);
        for (int k = 0; k < nassign; k++)
            putenv(assign[k]);
        execvp(argv[i], argv + i);
        int e = errno;
        if (write(errpipe[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(errpipe[1]);
    int exec_errno = 0;
    ssize_t got;
    do
        got = read(errpipe[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close(errpipe[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (got == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "hakmem: error: %s: %s\n", argv[i], strerror(exec_errno));
        if (fd >= 0)
            dprintf(fd, "exec_errno=%d\n", exec_errno);
        return exec_errno == ENOENT ? 127 : 126;
    }
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (fd >= 0) {
        dprintf(fd, "wall_s=%.6f user_s=%.6f sys_s=%.6f peak_rss_kb=%ld %s=%d\n", wall, tv_seconds(ru.ru_utime),
                tv_seconds(ru.ru_stime), ru.ru_maxrss, WIFEXITED(status) ? "exit" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    } else {
        fprintf(stderr, "hakmem measure: %.3f s wall, %.3f s user, %.3f s system, peak RSS %ld KB (process tree), ",
                wall, tv_seconds(ru.ru_utime), tv_seconds(ru.ru_stime), ru.ru_maxrss);
        if (WIFEXITED(status))
            fprintf(stderr, "exit status %d\n", WEXITSTATUS(status));
        else
            fprintf(stderr, "killed by signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
    }
    free(assign);
    return code;
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
    /* The script runs every measured command through `hakmem measure`: this very binary. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        setenv("HAKMEM_TOOL", self, 1);
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
            "       hakmem measure -- PROGRAM [ARGS...]   wall time, CPU time and peak RSS of the program's process tree\n"
            "       hakmem ab [--runs N] [--warmup K] [--metric time|cpu|rss|ops] [--threshold PCT] [--timeout S]\n"
            "                 [--allow-output-diff] [--build-dir DIR] [--csv FILE] A B -- PROGRAM [ARGS...]\n"
            "                 A/B of any program under two INI policies, .so files, build:DIR or glibc, with a verdict\n"
            "       hakmem ab [--bench NAME] [options] A B [-- BENCH_ARGS...]   the same on a built-in benchmark (ssot)\n"
            "       hakmem compare [--runs N] [--suite bench|apps|all] [--benches a,b] [--apps a,b] [--out DIR]\n"
            "                 [--build-dir DIR] [--pgo-build-dir DIR] [-- PROGRAM [ARGS...]]\n"
            "                 the benchmarks, the real applications or PROGRAM under glibc, mimalloc, jemalloc,\n"
            "                 tcmalloc, hakmem Standard and FAST PGO\n");
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
    if (argc >= 2 && !strcmp(argv[1], "measure"))
        return measure(argc - 2, argv + 2);
    if (argc >= 2 && (!strcmp(argv[1], "ab") || !strcmp(argv[1], "compare")))
        return bench_tool(argc - 1, argv + 1);
    return usage(stderr);
}
