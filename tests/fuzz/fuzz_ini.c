/* libFuzzer target: the INI layer of the policy (src/policy/ini.c, policy.c, iniparser).
 *
 * Each input is written to one memfd (created once, rewritten and truncated per input) and
 * loaded with policy_apply_ini() over the compiled defaults.  Checked, aborting on a breach:
 *   - every reported line is non-empty, NUL-terminated within a sane bound, one line (no '\n'),
 *     and starts with "<path>:" ; the return value equals the number of error lines;
 *   - a file that was not loaded (file-level error) leaves the policy byte-for-byte untouched;
 *     a loaded one names the file in p.file;
 *   - the resulting policy is valid: slots_cap in 1..128, every route valid for its class
 *     (C0-C7 slots or tlist, C8-C39 mid) and consistent with [route] / [slots] classes,
 *     flags 0/1 (compiled-out phases 0), sizes within their key's range, observe_output a
 *     non-empty string, origins either default or a line of this file;
 *   - round trip: the effective policy, written back as INI (policy_describe), loads with
 *     no error and gives the same effective settings.
 * ASan/UBSan (and LeakSanitizer, per input) check the parser itself. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "cold/cold.h"
#include "policy/policy.h"
#include "class/class.h"

#define LINE_BOUND 4096          /* a report line longer than this is a bug in itself */

static int in_fd = -1, rt_fd = -1;
static char in_path[64], rt_path[64];
static struct policy defaults;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_ini: check failed: %s (%s:%d): ", #cond,     \
                    __FILE__, __LINE__);                                       \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)

static int open_memfd(const char *name, char *path, size_t len)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        perror("fuzz_ini: memfd_create");
        abort();
    }
    snprintf(path, len, "/proc/self/fd/%d", fd);
    return fd;
}

static void put_file(int fd, const void *data, size_t n)
{
    CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    size_t off = 0;
    while (off < n) {
        ssize_t w = pwrite(fd, (const char *)data + off, n - off, (off_t)off);
        CHECK(w > 0, "pwrite");
        off += (size_t)w;
    }
}

struct reports {
    const char *path;
    size_t pathlen;
    int errors, lines;
    int hidden;                 /* from the loader's closing "N more problem(s) not shown" */
};

static void on_report(void *ctx, int is_error, const char *line)
{
    struct reports *r = ctx;
    CHECK(line != NULL, "NULL report line");
    const char *nul = memchr(line, 0, LINE_BOUND);
    CHECK(nul != NULL, "report line not NUL-terminated within %d bytes", LINE_BOUND);
    size_t n = (size_t)(nul - line);
    CHECK(n > 0, "empty report line");
    CHECK(memchr(line, '\n', n) == NULL, "report line spans lines: \"%s\"", line);
    CHECK(n > r->pathlen && !memcmp(line, r->path, r->pathlen) && line[r->pathlen] == ':',
          "report line does not start with \"%s:\": \"%s\"", r->path, line);
    CHECK(is_error == 0 || is_error == 1, "is_error = %d", is_error);
    int more, end = 0;
    if (sscanf(line + r->pathlen, ": error: %d more problem(s) not shown%n", &more, &end) == 1 && end > 0
        && line[r->pathlen + (size_t)end] == 0) {
        CHECK(r->lines == 20, "the count of hidden problems came after %d lines", r->lines);
        r->hidden = more;
        return;
    }
    r->errors += is_error;
    r->lines++;
    CHECK(r->lines <= 20, "more than 20 report lines");
}

static unsigned count_lines(const uint8_t *data, size_t size)
{
    unsigned n = 1;
    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n;
}

static void check_valid(const struct policy *p, unsigned nlines)
{
    CHECK(p->slots_cap >= 1 && p->slots_cap <= HAK_SLOTS_CAP_MAX, "slots_cap = %u", p->slots_cap);
    for (unsigned c = 0; c < HAK_NCLASSES; c++) {
        uint8_t r = p->route[c], s = p->route_set[c];
        if (c < HAK_NTINY) {
            CHECK(r == ROUTE_SLOTS || r == ROUTE_TLIST, "route[C%u] = %u (tiny)", c, r);
            CHECK(s == 0 || s == ROUTE_SLOTS || s == ROUTE_TLIST, "route_set[C%u] = %u", c, s);
            uint8_t want = s ? s : ((p->slots_mask >> c) & 1) ? ROUTE_SLOTS : ROUTE_TLIST;
            CHECK(r == want, "route[C%u] = %u, expected %u from route_set/slots_mask", c, r, want);
        } else {
            CHECK(r == ROUTE_MID, "route[C%u] = %u (mid)", c, r);
            CHECK(s == 0 || s == ROUTE_MID, "route_set[C%u] = %u", c, s);
        }
        struct policy_origin o = p->route_origin[c];
        CHECK(o.source == SRC_DEFAULT || o.source == SRC_INI, "route_origin[C%u].source = %u", c, o.source);
        CHECK(o.source == SRC_INI ? o.line >= 1 && o.line <= nlines : o.line == 0,
              "route_origin[C%u].line = %u (%u lines)", c, o.line, nlines);
        CHECK(!s == (o.source == SRC_DEFAULT), "route_set[C%u] = %u but origin %u", c, s, o.source);
    }
    CHECK(p->phase90 <= 1 && p->phase91 <= 1 && p->observe <= 1 && p->on_misuse_abort <= 1,
          "flags %u %u %u %u", p->phase90, p->phase91, p->observe, p->on_misuse_abort);
    CHECK(HAK_PHASE90 || !p->phase90, "phase90 on but compiled out");
    CHECK(HAK_PHASE91 || !p->phase91, "phase91 on but compiled out");
    CHECK(HAK_OBSERVE || !p->observe, "observe on but compiled out");
    CHECK(p->purge_cap <= policy_keys[PK_PURGE_RETAIN].hi, "purge_cap = %llu", (unsigned long long)p->purge_cap);
    CHECK(p->large_cache_bytes <= policy_keys[PK_LARGE_CACHE].hi, "large_cache = %llu",
          (unsigned long long)p->large_cache_bytes);
    size_t ol = strnlen(p->observe_output, sizeof p->observe_output);
    CHECK(ol > 0 && ol < sizeof p->observe_output, "observe_output length %zu", ol);
    CHECK(strnlen(p->file, sizeof p->file) < sizeof p->file, "file not terminated");
    for (unsigned k = 0; k < PK_COUNT; k++) {
        struct policy_origin o = p->origin[k];
        CHECK(o.source == SRC_DEFAULT || o.source == SRC_INI, "origin[%u].source = %u", k, o.source);
        CHECK(o.source == SRC_INI ? o.line >= 1 && o.line <= nlines : o.line == 0,
              "origin[%u].line = %u (%u lines)", k, o.line, nlines);
    }
}

/* policy_describe -> INI text.  observe.output is left out when iniparser could not carry
 * it verbatim (quotes, comment characters, spaces at the ends...). */
struct rt_text {
    char buf[8192];
    size_t n;
    char section[32];
    int skipped_output;
};

static int plain_value(const char *v)
{
    if (!*v)
        return 0;
    for (const char *s = v; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '/' || *s == '.' || *s == '_' || *s == '-' || *s == '+'))
            return 0;
    return 1;
}

static void rt_visit(const char *name, const char *value, const char *source, void *ctx)
{
    struct rt_text *t = ctx;
    CHECK(name && *name && value && *value && source && *source, "describe gave an empty field");
    const char *dot = strchr(name, '.');
    CHECK(dot != NULL && dot - name < (int)sizeof t->section, "describe name \"%s\"", name);
    if (!strcmp(name, "observe.output") && !plain_value(value)) {
        t->skipped_output = 1;
        return;
    }
    char sec[32];
    snprintf(sec, sizeof sec, "%.*s", (int)(dot - name), name);
    if (strcmp(sec, t->section)) {
        t->n += (size_t)snprintf(t->buf + t->n, sizeof t->buf - t->n, "[%s]\n", sec);
        snprintf(t->section, sizeof t->section, "%s", sec);
    }
    t->n += (size_t)snprintf(t->buf + t->n, sizeof t->buf - t->n, "%s = %s\n", dot + 1, value);
    CHECK(t->n < sizeof t->buf, "round-trip text too long");
}

static void check_round_trip(const struct policy *p)
{
    static struct rt_text t;
    t.n = 0;
    t.section[0] = 0;
    t.skipped_output = 0;
    policy_describe(p, rt_visit, &t);
    put_file(rt_fd, t.buf, t.n);
    struct policy q;
    struct reports r = { rt_path, strlen(rt_path), 0, 0, 0 };
    policy_defaults(&q);
    int err = policy_apply_ini(&q, rt_path, on_report, &r);
    CHECK(err == 0 && r.lines == 0, "round trip: %d errors, %d lines; text:\n%s", err, r.lines, t.buf);
    CHECK(!memcmp(q.route, p->route, sizeof q.route), "round trip: routes differ; text:\n%s", t.buf);
    CHECK(q.slots_mask == p->slots_mask, "round trip: slots_mask %#x vs %#x", q.slots_mask, p->slots_mask);
    CHECK(q.slots_cap == p->slots_cap, "round trip: slots_cap %u vs %u", q.slots_cap, p->slots_cap);
    CHECK(q.phase90 == p->phase90 && q.phase91 == p->phase91 && q.observe == p->observe &&
          q.on_misuse_abort == p->on_misuse_abort, "round trip: flags differ; text:\n%s", t.buf);
    CHECK(q.purge_cap == p->purge_cap, "round trip: purge %llu vs %llu",
          (unsigned long long)q.purge_cap, (unsigned long long)p->purge_cap);
    CHECK(q.large_cache_bytes == p->large_cache_bytes, "round trip: large_cache %llu vs %llu",
          (unsigned long long)q.large_cache_bytes, (unsigned long long)p->large_cache_bytes);
    CHECK(t.skipped_output || !strcmp(q.observe_output, p->observe_output),
          "round trip: observe_output \"%s\" vs \"%s\"", q.observe_output, p->observe_output);
    check_valid(&q, 1u << 20);
}

/* The first field in which two policies differ, or NULL.  Field by field: struct policy_origin
 * has padding, and a compound-literal assignment need not copy it (so no memcmp). */
static const char *policy_diff(const struct policy *a, const struct policy *b)
{
    if (memcmp(a->route, b->route, sizeof a->route)) return "route";
    if (memcmp(a->route_set, b->route_set, sizeof a->route_set)) return "route_set";
    if (a->slots_mask != b->slots_mask) return "slots_mask";
    if (a->slots_cap != b->slots_cap) return "slots_cap";
    if (a->phase90 != b->phase90 || a->phase91 != b->phase91 || a->observe != b->observe) return "phases";
    if (a->on_misuse_abort != b->on_misuse_abort) return "on_misuse_abort";
    if (a->purge_cap != b->purge_cap) return "purge_cap";
    if (a->large_cache_bytes != b->large_cache_bytes) return "large_cache_bytes";
    if (strcmp(a->observe_output, b->observe_output)) return "observe_output";
    if (strcmp(a->file, b->file)) return "file";
    for (unsigned k = 0; k < PK_COUNT; k++)
        if (a->origin[k].source != b->origin[k].source || a->origin[k].line != b->origin[k].line)
            return "origin";
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        if (a->route_origin[c].source != b->route_origin[c].source || a->route_origin[c].line != b->route_origin[c].line)
            return "route_origin";
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    init_core();
    in_fd = open_memfd("fuzz_ini", in_path, sizeof in_path);
    rt_fd = open_memfd("fuzz_ini_rt", rt_path, sizeof rt_path);
    policy_defaults(&defaults);
    check_valid(&defaults, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put_file(in_fd, data, size);
    struct policy p;
    struct reports r = { in_path, strlen(in_path), 0, 0, 0 };
    policy_defaults(&p);
    int err = policy_apply_ini(&p, in_path, on_report, &r);
    /* every problem is either shown or counted; hidden ones may include warnings */
    CHECK(err >= r.errors && err <= r.errors + r.hidden, "returned %d, %d error lines, %d hidden", err, r.errors,
          r.hidden);
    CHECK(err >= 0, "returned %d", err);
    if (p.file[0] == 0) {
        CHECK(err > 0, "file not loaded but no error reported");
        const char *d = policy_diff(&p, &defaults);
        CHECK(d == NULL, "file not loaded but the policy changed: %s", d);
        return 0;
    }
    CHECK(!strcmp(p.file, in_path), "p.file = \"%s\"", p.file);
    check_valid(&p, count_lines(data, size));
    check_round_trip(&p);
    return 0;
}
