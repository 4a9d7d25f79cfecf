/* Proof that an equivalence variant (tests/equivalence) took effect, checked by the probe
 * programs (test-api, test-threads) before they run their suite.  ld.so skips a preload it
 * cannot load with only a warning, and a bad HAKMEM_CONFIG falls back to the defaults with
 * a line on stderr: without this, every variant would pass by testing the default build.
 *
 * Switched on by the environment (nothing happens when HAK_TEST_EXPECT_LIB is unset; not
 * HAKMEM_* names, which hakmem reports as unknown):
 *
 *   HAK_TEST_EXPECT_LIB=PATH      malloc, free and hak_policy_get must resolve into the shared
 *                               library at PATH (the one LD_PRELOAD names): same file.
 *   HAK_TEST_EXPECT_POLICY=LIST   "phases.phase91=off,slots.capacity=16": hak_policy_get must
 *                               give these values.
 *   HAKMEM_CONFIG=FILE          (hakmem's own) every key the file sets must be in force from
 *                               that file and line (hak_policy_get's source "ini FILE:N");
 *                               unset, no key may come from an INI file.
 *   HAK_TEST_VARIANT_CHECK_ONLY=1 run the checks and exit (0 if they held), no suite: for the
 *                               tests that show a broken variant fails.
 *
 * And no line starting with "hakmem:" (or ld.so's "ERROR: ld.so:") on stderr, from the first instruction to exit: the
 * program runs itself again (exec of /proc/self/exe) with stderr through a pipe; this
 * process copies the child's stderr to its own, and fails if a hakmem: line went by (tests
 * that provoke a report capture it themselves).  The exit status is the child's, or 1.
 * The including file defines _GNU_SOURCE first (RTLD_DEFAULT, dladdr). */
#ifndef HAK_VARIANT_CHECK_H
#define HAK_VARIANT_CHECK_H

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hakmem.h"

#ifndef __USE_GNU
/* Compiled without _GNU_SOURCE first (the TSan build forces prefix.h in ahead of it): no
 * dladdr.  No variant runs there; asking for the check is an error, not a pass. */
static inline void variant_check(char **argv)
{
    (void)argv;
    if (getenv("HAK_TEST_EXPECT_LIB")) {
        fprintf(stderr, "variant-check: FAIL: not available in this build (no _GNU_SOURCE)\n");
        exit(1);
    }
}
#else

#define VC_CHILD_VAR "HAK_TEST_VARIANT_CHILD"

static int vc_failures;

static void vc_fail(const char *fmt, const char *a, const char *b, const char *c)
{
    fprintf(stderr, "variant-check: FAIL: ");
    fprintf(stderr, fmt, a, b, c);
    fputc('\n', stderr);
    vc_failures++;
}

static int vc_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The symbol as the program's own calls bind it (global scope: the preload comes first). */
static void vc_check_symbol(const char *sym, const char *lib)
{
    void *addr = dlsym(RTLD_DEFAULT, sym);
    Dl_info info;
    if (addr == NULL || !dladdr(addr, &info) || info.dli_fname == NULL) {
        vc_fail("%s: not found in the process (%s%s)", sym, dlerror() ? "dlsym failed" : "no object", "");
        return;
    }
    if (!vc_same_file(info.dli_fname, lib))
        vc_fail("%s resolves into %s, not into the variant %s", sym, info.dli_fname, lib);
}

static void vc_expect(const char *name, const char *want)
{
    char value[320], source[400];
    if (hak_policy_get(name, value, sizeof value, source, sizeof source) != 0)
        vc_fail("hak_policy_get(\"%s\"): no such key%s%s", name, "", "");
    else if (strcasecmp(value, want) != 0)
        vc_fail("%s is %s, the variant expects %s", name, value, want);
}

static char *vc_trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/* Every "key = value" line of the file: in force from that line. */
static void vc_check_ini(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        vc_fail("HAKMEM_CONFIG=%s cannot be read (%s)%s", path, strerror(errno), "");
        return;
    }
    char line[512], section[64] = "", name[160], want[600], source[600], value[320];
    unsigned n = 0, keys = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        char *s = vc_trim(line);
        if (*s == 0 || *s == ';' || *s == '#')
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e) {
                *e = 0;
                snprintf(section, sizeof section, "%s", vc_trim(s + 1));
            }
            continue;
        }
        char *eq = strchr(s, '=');
        if (eq == NULL)
            continue;
        *eq = 0;
        snprintf(name, sizeof name, "%s.%s", section, vc_trim(s));
        snprintf(want, sizeof want, "ini %s:%u", path, n);
        keys++;
        if (hak_policy_get(name, value, sizeof value, source, sizeof source) != 0)
            vc_fail("%s (set at %s): no such key in force%s", name, want, "");
        else if (strcmp(source, want) != 0)
            vc_fail("%s = %s comes from \"%s\"", name, value, source);
    }
    fclose(f);
    if (keys == 0)
        vc_fail("HAKMEM_CONFIG=%s sets no key: nothing would show the variant%s%s", path, "", "");
}

struct vc_ini_scan {
    int found;
    char first[200];
};

static void vc_no_ini_visit(const char *name, const char *value, const char *source, void *ctx)
{
    struct vc_ini_scan *s = ctx;
    (void)value;
    if (strncmp(source, "ini ", 4) == 0 && s->found++ == 0)
        snprintf(s->first, sizeof s->first, "%s from %s", name, source);
}

/* The checks proper, in the process that runs the suite. */
static void vc_check(const char *lib)
{
    vc_check_symbol("malloc", lib);
    vc_check_symbol("free", lib);
    vc_check_symbol("hak_policy_get", lib);
    const char *pol = getenv("HAK_TEST_EXPECT_POLICY");
    if (pol && *pol) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", pol);
        for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(item, '=');
            if (eq == NULL) {
                vc_fail("HAK_TEST_EXPECT_POLICY: \"%s\" is not NAME=VALUE%s%s", item, "", "");
                continue;
            }
            *eq = 0;
            vc_expect(vc_trim(item), vc_trim(eq + 1));
        }
    }
    const char *cfg = getenv("HAKMEM_CONFIG");
    if (cfg && *cfg) {
        vc_check_ini(cfg);
    } else {
        struct vc_ini_scan s = { 0, "" };
        hak_policy_foreach(vc_no_ini_visit, &s);
        if (s.found)
            vc_fail("no HAKMEM_CONFIG, yet %s%s%s", s.first, "", "");
    }
}

/* This process copies the child's stderr and judges it: the number of lines that start
 * with "hakmem:" or "ERROR: ld.so:" (a preload that did not load). */
static int vc_relay(int fd)
{
    char buf[4096], head[16];
    size_t hl = 0;
    int bad = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        ssize_t w = write(2, buf, (size_t)r);
        (void)w;
        for (ssize_t i = 0; i < r; i++) {
            if (hl < 13)
                head[hl++] = buf[i];
            if ((hl == 7 && memcmp(head, "hakmem:", 7) == 0) || (hl == 13 && memcmp(head, "ERROR: ld.so:", 13) == 0)) {
                bad++;
                hl = 14;            /* counted once per line */
            }
            if (buf[i] == '\n')
                hl = 0;
        }
    }
    return bad;
}

/* Call first thing in main.  Returns when the suite should run (in the child, checks
 * passed); exits otherwise. */
static void variant_check(char **argv)
{
    const char *lib = getenv("HAK_TEST_EXPECT_LIB");
    if (lib == NULL || *lib == 0)
        return;
    if (getenv(VC_CHILD_VAR) == NULL) {
        int fd[2];
        if (pipe(fd) != 0) {
            perror("variant-check: pipe");
            exit(1);
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("variant-check: fork");
            exit(1);
        }
        if (pid == 0) {
            close(fd[0]);
            dup2(fd[1], 2);
            close(fd[1]);
            setenv(VC_CHILD_VAR, "1", 1);
            execv("/proc/self/exe", argv);
            perror("variant-check: exec /proc/self/exe");
            _exit(127);
        }
        close(fd[1]);
        int bad = vc_relay(fd[0]);
        close(fd[0]);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (bad)
            fprintf(stderr, "variant-check: FAIL: %d unexpected hakmem: (or ld.so) line(s) on stderr (above)\n", bad);
        if (WIFSIGNALED(st)) {
            fprintf(stderr, "variant-check: the suite was killed by signal %d\n", WTERMSIG(st));
            exit(1);
        }
        exit(bad ? 1 : WEXITSTATUS(st));
    }
    vc_check(lib);
    if (vc_failures) {
        fprintf(stderr, "variant-check: %d check(s) failed: this is not the variant the test names\n", vc_failures);
        exit(1);
    }
    const char *cfg = getenv("HAKMEM_CONFIG");
    fprintf(stderr, "variant-check: ok: malloc in %s, policy %s, config %s\n", lib,
            getenv("HAK_TEST_EXPECT_POLICY") ? getenv("HAK_TEST_EXPECT_POLICY") : "(not checked)",
            cfg && *cfg ? cfg : "(none)");
    if (getenv("HAK_TEST_VARIANT_CHECK_ONLY"))
        exit(0);
}

#endif /* __USE_GNU */
#endif
