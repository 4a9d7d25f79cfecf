/* The hakmem command line: checking and listing policies (`config`), running a program under
 * the allocator (`run`) or measured (`measure`); `ab` and `compare` hand over to tools/hakmem_bench.py.
 * It links the policy layer only (no allocator, no constructor): HAKMEM_CONFIG and HAKMEM_*
 * are what it judges, never settings of its own.  Every message: `hakmem: [FILE:LINE: ]error: ...`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "policy/policy.h"
#include "hakmem_version.h"

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

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The one message format: `hakmem: error: message`. */
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hakmem: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

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

/* A phase's name by its effect (keys.def); "-" for the other keys. */
static const char *short_name(const struct policy_key *pk)
{
    return *pk->name ? pk->name : "-";
}

/* The default in this build: a switch compiled out is off whatever its row says, and saying
 * "on" beside "compiled in: no" stated one default two ways. */
static const char *key_default(const struct policy_key *pk)
{
    if (pk->type == PT_BOOL && !pk->compiled)
        return "off";
    return pk->type == PT_ROUTE ? "from [slots]" : pk->def;
}

/* roff treats a leading dot or quote as a request and a backslash as an escape; a plain
 * hyphen may become a typographic one, which breaks copied option names. */
static void put_roff(const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '-')
            fputs("\\-", stdout);
        else if (*s == '\\')
            fputs("\\e", stdout);
        else
            putchar(*s);
    }
}

enum list_format { LIST_TEXT, LIST_MARKDOWN, LIST_MAN };

static int config_list(enum list_format fmt)
{
    if (fmt == LIST_MARKDOWN) {
        printf("| INI | name | environment | type | default | Meson option | compiled in | what it does |\n");
        printf("|---|---|---|---|---|---|---|---|\n");
    }
    /* Plain text: each column as wide as its widest cell, so the rows line up. */
    int w_key = (int)strlen("INI"), w_env = (int)strlen("VARIABLE"), w_type = (int)strlen("TYPE");
    int w_name = (int)strlen("NAME");
    int w_def = (int)strlen("DEFAULT"), w_meson = (int)strlen("MESON");
    char name[96];
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        int n = snprintf(name, sizeof name, "[%s] %s", pk->section, pk->key);
        w_key = n > w_key ? n : w_key;
        w_name = (int)strlen(short_name(pk)) > w_name ? (int)strlen(short_name(pk)) : w_name;
        w_env = (int)strlen(pk->env) > w_env ? (int)strlen(pk->env) : w_env;
        w_type = (int)strlen(type_name(pk->type)) > w_type ? (int)strlen(type_name(pk->type)) : w_type;
        w_def = (int)strlen(key_default(pk)) > w_def ? (int)strlen(key_default(pk)) : w_def;
        w_meson = (int)strlen(pk->meson) > w_meson ? (int)strlen(pk->meson) : w_meson;
    }
    if (fmt == LIST_TEXT)
        printf("%-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %-8s  %s\n", w_key, "INI", w_name, "NAME", w_env, "VARIABLE",
               w_type, "TYPE", w_def, "DEFAULT", w_meson, "MESON", "COMPILED", "WHAT IT DOES");
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        const char *meson = *pk->meson ? pk->meson : "-";
        const char *in = pk->compiled ? "yes" : "no";
        snprintf(name, sizeof name, "[%s] %s", pk->section, pk->key);
        if (fmt == LIST_MARKDOWN) {
            printf("| `%s` | %s | `%s` | %s | `%s` | %s | %s | %s |\n", name, short_name(pk), pk->env,
                   type_name(pk->type), key_default(pk), meson, in, pk->help);
        } else if (fmt == LIST_MAN) {
            printf(".TP\n.BR \"");
            put_roff(pk->env);
            printf("\" \", INI \" \"");
            put_roff(name);
            printf("\"\n");
            put_roff(pk->help);
            printf(".\n");
            if (*pk->name) {
                printf("Short name: ");
                put_roff(pk->name);
                printf(".\n");
            }
            printf("Type: ");
            put_roff(type_name(pk->type));
            printf("; default: ");
            put_roff(key_default(pk));
            if (*pk->meson) {
                printf("; compiled in with the Meson option ");
                put_roff(pk->meson);
                printf(pk->compiled ? " (in this build)" : " (not in this build)");
            }
            printf(".\n");
        } else {
            printf("%-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %-8s  %s\n", w_key, name, w_name, short_name(pk), w_env,
                   pk->env, w_type, type_name(pk->type), w_def, key_default(pk), w_meson, meson, in, pk->help);
        }
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

/* The loaders' lines come as `[FILE:LINE: ]error: message`: the tool adds its name. */
static void report(void *ctx, int is_error, const char *line)
{
    struct counts *c = ctx;
    fprintf(stderr, "hakmem: %s\n", line);
    if (is_error)
        c->errors++;
    else
        c->warnings++;
}

static int summary(const char *what, int errors, int warnings)
{
    if (errors)
        fprintf(stderr, "hakmem: %s: error: %d error(s), %d warning(s)\n", what, errors, warnings);
    return errors ? 1 : 0;
}

/* The effective policy FILE alone gives (defaults <- FILE), or every problem in it:
 * the caller's HAKMEM_CONFIG and HAKMEM_* are not FILE's and do not count. */
static int config_check(const char *path)
{
    struct counts c = { 0, 0 };
    struct policy p;
    policy_defaults(&p);
    int errors = policy_apply_ini(&p, path, report, &c);     /* counts what was not shown too */
    if (p.file[0] == 0)
        return 1;                       /* not loaded: the loader said why */
    policy_describe(&p, print_setting, NULL);
    return summary(path, errors, c.warnings);
}

/* Whether the library would load FILE whole: missing, not a regular file, binary, or with an
 * error in it, the loader's own lines say why and the caller refuses to run the program.  One
 * rule for every way a file fails; the library itself, which must not take the program down,
 * says the same and runs on the defaults. */
static int config_loadable(const char *path)
{
    struct counts c = { 0, 0 };
    struct policy p;
    policy_defaults(&p);
    int errors = policy_apply_ini(&p, path, report, &c);
    if (p.file[0] == 0)
        return 0;                       /* not loaded: the loader said why */
    return summary(path, errors, c.warnings) == 0;
}

/* What the library would run with here: defaults <- HAKMEM_CONFIG <- HAKMEM_*. */
static int config_show(void)
{
    struct counts c = { 0, 0 };
    struct policy p;
    policy_defaults(&p);
    const char *path = getenv("HAKMEM_CONFIG");
    int errors = 0;
    if (path && *path) {
        errors += policy_apply_ini(&p, path, report, &c);
        if (p.file[0] == 0)
            return 1;
    }
    errors += policy_apply_env(&p, report, &c);
    policy_describe(&p, print_setting, NULL);
    return summary(path && *path ? path : "environment", errors, c.warnings);
}

/* The library `name` next to this executable (build tree) or in the install libdir. */
static const char *find_library(const char *name, char *buf, size_t len)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            const char *try[] = { "%s/%s", "%s/../%s", "%s/../lib/%s" };
            for (unsigned i = 0; i < 3; i++) {
                snprintf(buf, len, try[i], self, name);
                if (access(buf, R_OK) == 0)
                    return buf;
            }
        }
    }
    snprintf(buf, len, "%s/%s", HAKMEM_LIBDIR, name);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

/* Puts lib first in LD_PRELOAD, ahead of what the environment preloads already.  ld.so splits
 * LD_PRELOAD at spaces and colons, so a library whose path holds either goes in by its file
 * name, found through its directory put first in LD_LIBRARY_PATH (split at colons only).
 * 0 after reporting a path neither variable can carry (a colon in the directory). */
static int preload_set(const char *what, const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    const char *slash = strrchr(lib, '/');
    const char *name = lib;
    char buf[8192];
    if (strpbrk(lib, " \t\n:") && slash) {
        const char *dirs = getenv("LD_LIBRARY_PATH");
        int dirlen = (int)(slash - lib);
        name = slash + 1;
        if (memchr(lib, ':', (size_t)dirlen) || strpbrk(name, " \t\n:")) {
            fail("%s: %s: no preload can name a library there (ld.so splits LD_PRELOAD at spaces and "
                 "colons, LD_LIBRARY_PATH at colons); build or install it under another path", what, lib);
            return 0;
        }
        snprintf(buf, sizeof buf, dirs && *dirs ? "%.*s:%s" : "%.*s", dirlen, lib, dirs);
        setenv("LD_LIBRARY_PATH", buf, 1);
    }
    snprintf(buf, sizeof buf, old && *old ? "%s:%s" : "%s", name, old);
    setenv("LD_PRELOAD", buf, 1);
    return 1;
}

/* HAKMEM_CONFIG as an absolute path: the program may change directory, or start another
 * program elsewhere, before the library reads it.  A FILE given with --config must exist (0
 * after reporting it); one inherited from the environment is passed on, made absolute, for
 * the library to report as it would without us. */
static int config_env_absolute(const char *path, int given)
{
    char abs[4096], cwd[4096];
    if (realpath(path, abs) == NULL) {
        if (given) {
            fprintf(stderr, "hakmem: %s: error: cannot open: %s\n", path, strerror(errno));
            return 0;
        }
        if (path[0] == '/' || getcwd(cwd, sizeof cwd) == NULL)
            return 1;
        int n = snprintf(abs, sizeof abs, "%s/%s", cwd, path);
        if (n < 0 || (size_t)n >= sizeof abs)
            return 1;
    }
    setenv("HAKMEM_CONFIG", abs, 1);
    return 1;
}

struct prof_opts {
    const char *sample, *output;
    int leaks, top;
};

/* The profiling options of `hakmem prof` and `hakmem run --prof` (any of them turns
 * profiling on): 1 if argv[*i] was one (and *i moved past it), 0 if not, -1 on an error. */
static int prof_option(int argc, char **argv, int *i, struct prof_opts *o, int prof)
{
    const char *a = argv[*i];
    const char *names[] = { "--sample", "--output", "--top" };
    for (unsigned k = 0; k < 3; k++) {
        size_t l = strlen(names[k]);
        const char *v = NULL;
        if (!strcmp(a, names[k]) && *i + 1 < argc)
            v = argv[++*i];
        else if (!strncmp(a, names[k], l) && a[l] == '=')
            v = a + l + 1;
        else
            continue;
        (*i)++;
        if (k == 0)
            o->sample = v;
        else if (k == 1)
            o->output = v;
        else if ((o->top = atoi(v)) <= 0) {
            fail("%s: --top %s: expected a number of lines, 1 or more", prof ? "prof" : "run", v);
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--leaks") || !strcmp(a, "--prof")) {
        o->leaks |= !strcmp(a, "--leaks");
        (*i)++;
        return 1;
    }
    return 0;
}

static int prof_run(const char *lib, char **argv, const struct prof_opts *o);

static int run(int argc, char **argv, int prof)
{
    int i = 0;
    const char *config = getenv("HAKMEM_CONFIG");
    int given = 0;
    struct prof_opts po = { .top = 20 };
    while (i < argc && strcmp(argv[i], "--") != 0) {
        int r = prof_option(argc, argv, &i, &po, prof);
        if (r < 0)
            return 2;
        if (r > 0) {
            prof = 1;
            continue;
        }
        if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[i + 1];
            given = 1;
            i += 2;
        } else if (!strncmp(argv[i], "--config=", 9)) {
            config = argv[i] + 9;
            given = 1;
            i++;
        } else if (argv[i][0] == '-') {
            fail("%s: unknown option %s (see hakmem %s --help)", prof ? "prof" : "run", argv[i],
                 prof ? "prof" : "run");
            return 2;
        } else {
            break;
        }
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    if (i >= argc) {
        if (prof)
            fail("prof: no program to run (usage: hakmem prof [OPTIONS] [--] PROGRAM [ARGS...])");
        else
            fail("run: no program to run (usage: hakmem run [--config FILE] [--prof] [--] PROGRAM [ARGS...])");
        return 2;
    }
    if (config && *config && given && !config_loadable(config))
        return 1;
    if (config && *config && !config_env_absolute(config, given))
        return 1;
    char lib[4096];
    const char *libname = prof ? "libhakmem-prof.so" : "libhakmem.so";
    if (!find_library(libname, lib, sizeof lib)) {
        fail("%s: %s not found next to this program or in %s%s", prof ? "prof" : "run", libname,
             HAKMEM_LIBDIR, prof ? " (built with meson -Dprof=enabled, which needs libunwind-dev)" : "");
        return 1;
    }
    if (prof)
        return prof_run(lib, argv + i, &po);
    if (!preload_set("run", lib))
        return 1;
    execvp(argv[i], argv + i);
    /* As env(1) and sh: 127 for a program not found, 126 for one found but not run. */
    int e = errno;
    fail("run: %s: %s", argv[i], strerror(e));
    return e == ENOENT || e == ENOTDIR ? 127 : 126;
}

/* hakmem prof / hakmem run --prof: the program under the profiling library, then its
 * profile's top stacks by google-pprof (or the library's own report where pprof is missing). */
static const char *find_in_path(const char *prog, char *buf, size_t len)
{
    if (strchr(prog, '/'))
        return realpath(prog, buf) ? buf : prog;
    const char *path = getenv("PATH");
    for (const char *s = path ? path : "/usr/bin:/bin"; *s; ) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        snprintf(buf, len, "%.*s/%s", (int)n, n ? s : ".", prog);
        if (access(buf, X_OK) == 0)
            return buf;
        s += n + (e != NULL);
    }
    return NULL;
}

/* The program the profile was taken of: the first mapping listed in its MAPPED_LIBRARIES
 * section (the executable, mapped lowest), so a wrapper script that exec'd it (a pyenv
 * shim, a launcher) is not taken for it.  NULL if the file has none. */
static const char *profiled_program(const char *file, char *buf, size_t len)
{
    FILE *f = fopen(file, "r");
    char line[8192];
    const char *found = NULL;
    if (f == NULL)
        return NULL;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "MAPPED_LIBRARIES:", 17))
            break;
    if (fgets(line, sizeof line, f)) {
        char *path = strchr(line, '/');
        if (path) {
            path[strcspn(path, "\n")] = 0;
            snprintf(buf, len, "%s", path);
            found = access(buf, R_OK) == 0 ? buf : NULL;
        }
    }
    fclose(f);
    return found;
}

static int prof_run(const char *lib, char **argv, const struct prof_opts *o)
{
    char exe[4096], pprof[4096], out[8200], cwd[4096];
    const char *pat = o->output ? o->output : getenv("HAKMEM_PROF_OUTPUT");
    if (pat == NULL || !*pat)
        pat = "hakmem.%p.heap";
    /* absolute, as the program may change directory before it exits */
    if (pat[0] != '/' && getcwd(cwd, sizeof cwd))
        snprintf(out, sizeof out, "%s/%s", cwd, pat);
    else
        snprintf(out, sizeof out, "%s", pat);
    const char *prog = find_in_path(argv[0], exe, sizeof exe);
    int have_pprof = find_in_path("google-pprof", pprof, sizeof pprof) != NULL && prog != NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fail("prof: fork: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        if (!preload_set("prof", lib))
            _exit(1);
        setenv("HAKMEM_PROF", "on", 1);
        setenv("HAKMEM_PROF_OUTPUT", out, 1);
        if (o->sample)
            setenv("HAKMEM_PROF_SAMPLE", o->sample, 1);
        if (o->leaks || !have_pprof)
            setenv("HAKMEM_PROF_LEAKS", "on", 1);
        execvp(argv[0], argv);
        int e = errno;
        fail("prof: %s: %s", argv[0], strerror(e));
        _exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fail("prof: waitpid: %s", strerror(errno));
            return 1;
        }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (WIFEXITED(st) && (code == 126 || code == 127))
        return code;
    /* the file of the process we started: %p is its pid */
    char file[8200], pidtxt[24];
    size_t n = 0;
    snprintf(pidtxt, sizeof pidtxt, "%d", (int)pid);
    for (const char *s = out; *s && n + 24 < sizeof file; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            n += (size_t)snprintf(file + n, sizeof file - n, "%s", pidtxt);
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            file[n++] = '%';
            s++;
        } else {
            file[n++] = *s;
        }
    }
    file[n] = 0;
    if (access(file, R_OK) != 0) {
        fprintf(stderr, "hakmem: prof: no profile %s: the program did not exit normally (a signal or _exit "
                "writes none)\n", file);
        return code ? code : 1;
    }
    fprintf(stderr, "hakmem: prof: profile written to %s\n", file);
    char mapped[4096];
    const char *real = profiled_program(file, mapped, sizeof mapped);
    if (real)
        prog = real;
    if (have_pprof) {
        char top[32];
        snprintf(top, sizeof top, "--nodecount=%d", o->top);
        fprintf(stderr, "hakmem: prof: live memory by function (google-pprof --text %s %s):\n", prog, file);
        /* pprof takes a mapped path to end at its first space: such a program's frames stay
         * addresses.  Said once, before its table, rather than left to look like a bad profile. */
        if (strpbrk(prog, " \t"))
            fprintf(stderr, "hakmem: prof: warning: google-pprof cannot read the symbols of a program whose "
                    "path holds a space (%s); run a copy or a link from another path\n", prog);
        /* google-pprof --text prints every function whatever --nodecount says: its table is
         * read back here and cut after `top` rows (a row starts with its flat figure). */
        int table[2];
        if (pipe(table) != 0) {
            fail("prof: pipe: %s", strerror(errno));
            return code ? code : 1;
        }
        fflush(NULL);
        pid_t v = fork();
        if (v == 0) {
            dup2(table[1], 1);
            close(table[0]);
            close(table[1]);
            char *args[] = { pprof, "--text", top, (char *)prog, file, NULL };
            execv(pprof, args);
            _exit(127);
        }
        close(table[1]);
        FILE *f = v > 0 ? fdopen(table[0], "r") : NULL;
        char line[8192];
        int rows = 0;
        while (f && fgets(line, sizeof line, f)) {
            const char *s = line + strspn(line, " ");
            int row = *s >= '0' && *s <= '9';
            if (row && rows >= o->top)
                continue;           /* read to the end: pprof must not block on a full pipe */
            rows += row;
            fputs(line, stderr);    /* the summary on stderr: the program's stdout stays its own */
        }
        if (f)
            fclose(f);
        else
            close(table[0]);
        if (v > 0)
            while (waitpid(v, NULL, 0) < 0 && errno == EINTR)
                ;
    } else {
        fprintf(stderr, "hakmem: prof: google-pprof not found (apt-get install google-perftools): the "
                "report above is hakmem's own; google-pprof --text %s %s reads the file\n", argv[0], file);
    }
    return code;
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

static const char usage_text[] =
    "usage: hakmem COMMAND [ARGS...]\n"
    "\n"
    "  config check FILE        the effective policy FILE alone gives, or every problem in it\n"
    "                           (exit 1 on errors); HAKMEM_CONFIG and HAKMEM_* are not applied\n"
    "  config show              the effective policy from HAKMEM_CONFIG and the HAKMEM_* variables\n"
    "  config list [--markdown | --man]\n"
    "                           every policy key: INI name, variable, type, default, Meson option\n"
    "  run [--config FILE | --config=FILE] [--prof] [--] PROGRAM [ARGS...]\n"
    "                           run a program with libhakmem.so preloaded (FILE, or HAKMEM_CONFIG,\n"
    "                           passed on as an absolute path); exit 126: not executable, 127: not found\n"
    "  prof [--sample SIZE] [--output FILE] [--leaks] [--top N] [--] PROGRAM [ARGS...]\n"
    "                           run a program with heap profiling on (libhakmem-prof.so) and print\n"
    "                           where its live memory was allocated (google-pprof)\n"
    "  measure [--fd N] [-e NAME=VALUE]... [--] PROGRAM [ARGS...]\n"
    "                           wall time, CPU time and peak RSS of the program's process tree\n"
    "  ab [--runs N] [--warmup K] [--metric time|cpu|rss|ops] [--threshold PCT] [--timeout SECONDS]\n"
    "     [--allow-output-diff] [--build-dir DIR] [--csv FILE] A B -- PROGRAM [ARGS...]\n"
    "                           A/B of any program under two INI policies, .so files, build:DIR or\n"
    "                           glibc, with a verdict\n"
    "  ab --bench NAME [options] A B [-- BENCH_ARGS...]\n"
    "                           the same on a built-in benchmark (ssot, frag, larson...)\n"
    "  compare [--runs N] [--suite bench|apps|all|none] [--benches a,b] [--apps a,b] [--scale X]\n"
    "          [--port N] [--allocators a,b] [--allocator NAME=PATH]... [--bench-args NAME=ARGS]\n"
    "          [--allow-output-diff] [--out DIR] [--build-dir DIR] [--pgo-build-dir DIR] [--no-pgo]\n"
    "          [--timeout SECONDS] [-- PROGRAM [ARGS...]]\n"
    "                           the benchmarks, the real applications or PROGRAM under glibc,\n"
    "                           mimalloc, jemalloc, tcmalloc, your own (--allocator), hakmem\n"
    "                           Standard and FAST PGO\n"
    "  help [COMMAND]           this text, or one command's\n"
    "\n"
    "  -h, --help               this text (also after any command: hakmem run --help)\n"
    "  -V, --version            hakmem's version\n"
    "\n"
    "Library settings: HAKMEM_CONFIG=FILE, HAKMEM_STATS=1, HAKMEM_VERBOSE=1 and the variables\n"
    "`hakmem config list` shows; see hakmem(1).\n";

static const char usage_config[] =
    "usage: hakmem config check FILE\n"
    "       hakmem config show\n"
    "       hakmem config list [--markdown | --man]\n"
    "\n"
    "  check FILE   the effective policy FILE alone gives (defaults <- FILE), or every problem\n"
    "               in it, as `hakmem: FILE:LINE: error: message`; exit 1 on errors\n"
    "  show         the policy the library would run with here: defaults <- HAKMEM_CONFIG <- HAKMEM_*\n"
    "  list         every key: INI name, variable, type, default, Meson option, compiled in;\n"
    "               --markdown as docs/POLICY.md's table, --man as hakmem(1)'s section\n";

static const char usage_measure[] =
    "usage: hakmem measure [--fd N] [-e NAME=VALUE]... [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM and reports its wall time, user and system CPU time and the peak RSS of its\n"
    "whole process tree, on stderr or as one line on descriptor N (--fd); -e sets a variable\n"
    "for PROGRAM only.  Exit status: PROGRAM's; 126 when it cannot be run, 127 when it is not found.\n";

static const char usage_run[] =
    "usage: hakmem run [--config FILE | --config=FILE] [--prof] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with libhakmem.so preloaded (LD_PRELOAD).  FILE (or HAKMEM_CONFIG) is passed\n"
    "on as an absolute path, so a program that changes directory still finds it.  --prof (or\n"
    "any option of hakmem prof) runs it as hakmem prof does: see hakmem prof --help.\n"
    "Exit status: PROGRAM's; 126 when it cannot be run, 127 when it is not found;\n"
    "1 when FILE or the library is missing; 2 on a usage error.\n";

static const char usage_prof[] =
    "usage: hakmem prof [--config FILE] [--sample SIZE] [--output FILE] [--leaks] [--top N]\n"
    "                   [--] PROGRAM [ARGS...]\n"
    "       hakmem run --prof [same options] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM under the profiling library libhakmem-prof.so with [prof] enabled: about one\n"
    "block per SIZE bytes allocated (default 512K) is sampled with its call stack.  At exit the\n"
    "profile (live blocks by stack, gperftools heap format) goes to FILE (default hakmem.%p.heap\n"
    "in the current directory, %p the process id), and the top N (20) functions by live bytes\n"
    "are printed on stderr by google-pprof --text (apt-get install google-perftools), or, without\n"
    "it, as hakmem's own leak report; --leaks prints that report too.  Read the file again with\n"
    "google-pprof --text|--svg PROGRAM FILE, and diff two with --base OLD.  A program killed by a\n"
    "signal or ending in _exit writes no profile.  Exit status: PROGRAM's.\n";

static int help_for(const char *cmd)
{
    if (cmd == NULL || !strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
        fputs(usage_text, stdout);
    else if (!strcmp(cmd, "config"))
        fputs(usage_config, stdout);
    else if (!strcmp(cmd, "run"))
        fputs(usage_run, stdout);
    else if (!strcmp(cmd, "measure"))
        fputs(usage_measure, stdout);
    else if (!strcmp(cmd, "prof"))
        fputs(usage_prof, stdout);
    else if (!strcmp(cmd, "version") || !strcmp(cmd, "--version") || !strcmp(cmd, "-V"))
        fputs("usage: hakmem --version\n", stdout);
    else {
        fail("help: unknown command '%s' (hakmem --help lists them)", cmd);
        return 2;
    }
    return 0;
}

static int is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

static int config_cmd(int argc, char **argv)
{
    if (argc < 1) {
        fail("config: which one: check FILE, show or list? (hakmem config --help)");
        return 2;
    }
    for (int i = 0; i < argc; i++)
        if (is_help(argv[i]))
            return help_for("config");
    const char *sub = argv[0];
    if (!strcmp(sub, "check")) {
        if (argc != 2) {
            fail("config check: expected one FILE (usage: hakmem config check FILE)");
            return 2;
        }
        return config_check(argv[1]);
    }
    if (!strcmp(sub, "show")) {
        if (argc != 1) {
            fail("config show: unexpected argument %s", argv[1]);
            return 2;
        }
        return config_show();
    }
    if (!strcmp(sub, "list")) {
        if (argc == 1)
            return config_list(LIST_TEXT);
        if (argc == 2 && !strcmp(argv[1], "--markdown"))
            return config_list(LIST_MARKDOWN);
        if (argc == 2 && !strcmp(argv[1], "--man"))
            return config_list(LIST_MAN);
        fail("config list: unknown option %s (--markdown or --man)", argv[1]);
        return 2;
    }
    fail("config: unknown subcommand '%s' (check, show or list)", sub);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (is_help(cmd))
        return help_for(NULL);
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("hakmem %s\n", HAK_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help"))
        return help_for(argc > 2 ? argv[2] : NULL);
    if (!strcmp(cmd, "config"))
        return config_cmd(argc - 2, argv + 2);
    if (!strcmp(cmd, "run")) {
        /* --help only before the program: after it, the option is the program's */
        for (int i = 2; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++)
            if (is_help(argv[i]))
                return help_for("run");
        return run(argc - 2, argv + 2, 0);
    }
    if (!strcmp(cmd, "prof")) {
        for (int i = 2; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++)
            if (is_help(argv[i]))
                return help_for("prof");
        return run(argc - 2, argv + 2, 1);
    }
    if (!strcmp(cmd, "measure")) {
        for (int i = 2; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++)
            if (is_help(argv[i]))
                return help_for("measure");
        return measure(argc - 2, argv + 2);
    }
    if (!strcmp(cmd, "ab") || !strcmp(cmd, "compare"))
        return bench_tool(argc - 1, argv + 1);
    if (cmd[0] == '-')
        fail("unknown option %s (hakmem --help lists the commands)", cmd);
    else
        fail("unknown command '%s' (hakmem --help lists the commands)", cmd);
    return 2;
}
