/* Policy tests: every kind of bad INI input gives one clear line and leaves the defaults,
 * environment beats INI, every shipped config/ file loads cleanly, the key table matches
 * meson_options.txt, and a published policy reaches every running thread at its next call. */
#include <check.h>
#include "check_run.h"
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "hakmem.h"
#include "testutil.h"
#include "cold/cold.h"
#include "policy/policy.h"
#include "route/route.h"

static const char *srcdir;          /* the source tree: argv[1] */

struct lines {
    char text[16][512];
    int n, errors;
};

static void collect(void *ctx, int is_error, const char *line)
{
    struct lines *l = ctx;
    if (l->n < 16)
        snprintf(l->text[l->n++], sizeof l->text[0], "%s", line);
    l->errors += is_error;
}

static char path[256];

static const char *write_file(const char *content, size_t len)
{
    snprintf(path, sizeof path, "/tmp/hak-policy-%d.ini", (int)getpid());
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(content, 1, len, f), len);
    fclose(f);
    return path;
}

/* Loads text into a default policy; returns the error count. */
static int load_text(const char *text, struct policy *p, struct lines *l)
{
    memset(l, 0, sizeof *l);
    policy_defaults(p);
    return policy_apply_ini(p, write_file(text, strlen(text)), collect, l);
}

static void assert_defaults(const struct policy *p)
{
    struct policy d;
    policy_defaults(&d);
    ck_assert_uint_eq(p->slots_cap, d.slots_cap);
    ck_assert_uint_eq(p->slots_mask, d.slots_mask);
    ck_assert_mem_eq(p->route, d.route, sizeof d.route);
    ck_assert_uint_eq(p->phase91, d.phase91);
}

static void setup(void)
{
    init_core();
}

START_TEST(test_defaults)
{
    struct policy p;
    policy_defaults(&p);
    ck_assert_uint_eq(p.slots_cap, 64);
    ck_assert_uint_eq(p.slots_mask, 0x1FFFFF);        /* C0-C20: every tiny class */
    for (unsigned c = 0; c < HAK_NCLASSES; c++)
        ck_assert_uint_eq(p.route[c], c < HAK_NTINY ? ROUTE_SLOTS : ROUTE_MID);
    ck_assert_uint_eq(p.phase91, HAK_PHASE91);
    ck_assert_uint_eq(p.purge_cap, 64u << 20);
}
END_TEST

START_TEST(test_good_file)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("; comment\n[phases]\nphase91 = off\n[slots]\nclasses = C2, C5-C7\n"
                               "capacity = 17\n[route]\nC6 = tlist\n[purge]\nretain = 2M\n", &p, &l), 0);
    ck_assert_int_eq(l.n, 0);
    ck_assert_uint_eq(p.phase91, 0);
    ck_assert_uint_eq(p.slots_cap, 17);
    ck_assert_uint_eq(p.slots_mask, (1u << 2) | (1u << 5) | (1u << 7) | (1u << 6));
    char buf[128];                                    /* printed as read: runs as ranges */
    policy_format(&p, PK_SLOTS_CLASSES, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "C2,C5-C7");
    struct policy q;
    ck_assert_int_eq(load_text("[slots]\nclasses = C20, c0,C9-C11, C13\n", &q, &l), 0);
    ck_assert_uint_eq(q.slots_mask, (1u << 20) | 1u | (7u << 9) | (1u << 13));
    policy_format(&q, PK_SLOTS_CLASSES, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "C0,C9-C11,C13,C20");
    ck_assert_uint_eq(p.route[2], ROUTE_SLOTS);
    ck_assert_uint_eq(p.route[6], ROUTE_TLIST);       /* [route] beats [slots] */
    ck_assert_uint_eq(p.route[4], ROUTE_TLIST);
    ck_assert_uint_eq(p.purge_cap, 2u << 20);
    ck_assert_uint_eq(p.origin[PK_SLOTS_CAPACITY].source, SRC_INI);
    ck_assert_uint_eq(p.origin[PK_SLOTS_CAPACITY].line, 6);
}
END_TEST

START_TEST(test_missing_file)
{
    struct policy p;
    struct lines l = { .n = 0 };
    policy_defaults(&p);
    ck_assert_int_eq(policy_apply_ini(&p, "/nonexistent/hakmem.ini", collect, &l), 1);
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "/nonexistent/hakmem.ini: error: cannot open: No such file"));
    ck_assert_str_eq(p.file, "");
    assert_defaults(&p);
}
END_TEST

START_TEST(test_unreadable_file)
{
    struct policy p;
    struct lines l = { .n = 0 };
    policy_defaults(&p);
    /* a directory cannot be read as a file, even by root */
    ck_assert_int_eq(policy_apply_ini(&p, "/tmp", collect, &l), 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "not a regular file"));
    if (geteuid() != 0) {
        write_file("[slots]\ncapacity = 3\n", 21);
        chmod(path, 0);
        memset(&l, 0, sizeof l);
        ck_assert_int_eq(policy_apply_ini(&p, path, collect, &l), 1);
        ck_assert_ptr_nonnull(strstr(l.text[0], "Permission denied"));
    }
    assert_defaults(&p);
}
END_TEST

START_TEST(test_syntax_error)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("[slots]\ncapacity = 3\nthis is not ini\n", &p, &l), 1);
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], ":3: error: syntax error: expected key = value"));
    ck_assert_str_eq(p.file, "");
    assert_defaults(&p);                         /* capacity = 3 was not applied */
    ck_assert_int_eq(load_text("[slots\ncapacity = 3\n", &p, &l), 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], ":1: error: syntax error: expected [section]"));
    assert_defaults(&p);
}
END_TEST

START_TEST(test_unknown_section)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("[slot]\ncapacity = 3\n[phases]\nphase91 = off\n", &p, &l), 1);
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], ":1: error: unknown section [slot], did you mean [slots]"));
    ck_assert_uint_eq(p.slots_cap, 64);
    ck_assert_uint_eq(p.phase91, 0);             /* the rest of the file still applies */
}
END_TEST

START_TEST(test_unknown_key_suggests)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("[slots]\ncapasity = 3\n[phases]\nphase19 = on\nzzzzzzzz = 1\n", &p, &l), 3);
    ck_assert_ptr_nonnull(strstr(l.text[0], ":2: error: unknown key capasity in [slots], did you mean [slots] capacity"));
    ck_assert_ptr_nonnull(strstr(l.text[1], ":4: error: unknown key phase19 in [phases], did you mean [phases] phase9"));
    ck_assert_ptr_nonnull(strstr(l.text[2], ":5: error: unknown key zzzzzzzz in [phases]; ignored"));
    assert_defaults(&p);
}
END_TEST

START_TEST(test_wrong_type)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("[slots]\ncapacity = abc\n[phases]\nphase91 = maybe\n[purge]\nretain = 12Q\n", &p, &l), 3);
    ck_assert_ptr_nonnull(strstr(l.text[0], ":2: error: [slots] capacity = abc: expected a whole number from 1 to 128; 64 kept"));
    ck_assert_ptr_nonnull(strstr(l.text[1], ":4: error: [phases] phase91 = maybe: expected on or off"));
    ck_assert_ptr_nonnull(strstr(l.text[2], ":6: error: [purge] retain = 12Q: expected a size"));
    assert_defaults(&p);
    ck_assert_uint_eq(p.purge_cap, 64u << 20);
}
END_TEST

START_TEST(test_out_of_range)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("[slots]\ncapacity = 0\n", &p, &l), 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "capacity = 0: expected a whole number from 1 to 128"));
    ck_assert_int_eq(load_text("[slots]\ncapacity = 1000000000\n", &p, &l), 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "capacity = 1000000000: expected a whole number from 1 to 128"));
    ck_assert_int_eq(load_text("[slots]\nclasses = C4-C21\n", &p, &l), 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "classes = C4-C21: expected tiny classes C0-C20"));
    ck_assert_int_eq(load_text("[slots]\nclasses = C05\n", &p, &l), 1);     /* no leading zeros */
    ck_assert_int_eq(load_text("[slots]\nclasses = C123\n", &p, &l), 1);
    ck_assert_int_eq(load_text("[slots]\nclasses = C9-C3\n", &p, &l), 1);
    ck_assert_int_eq(load_text("[route]\nC99 = tlist\n", &p, &l), 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "unknown key C99 in [route]"));
    ck_assert_int_eq(load_text("[route]\nC22 = slots\nC3 = mid\n", &p, &l), 2);
    ck_assert_ptr_nonnull(strstr(l.text[0], "expected mid"));
    ck_assert_ptr_nonnull(strstr(l.text[1], "expected slots or tlist"));
    assert_defaults(&p);
}
END_TEST

START_TEST(test_same_key_twice)
{
    struct policy p;
    struct lines l;
    /* the last value wins, with a warning (not an error: the file loads and checks clean) */
    ck_assert_int_eq(load_text("[slots]\ncapacity = 8\n[phases]\nphase91 = on\n[slots]\ncapacity = 9\n", &p, &l), 0);
    ck_assert_ptr_nonnull(strstr(l.text[0], ":6: warning: [slots] capacity is set again (first on line 2)"));
    ck_assert_uint_eq(p.slots_cap, 9);
}
END_TEST

START_TEST(test_empty_file)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("", &p, &l), 0);
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "no settings in the file; defaults in force"));
    assert_defaults(&p);
    ck_assert_int_eq(load_text("; only comments\n\n[phases]\n", &p, &l), 0);
    ck_assert_ptr_nonnull(strstr(l.text[0], "no settings"));
}
END_TEST

START_TEST(test_binary_file)
{
    unsigned char bin[4096];
    for (unsigned i = 0; i < sizeof bin; i++)
        bin[i] = (unsigned char)(i * 7 + 3);
    struct policy p;
    struct lines l = { .n = 0 };
    policy_defaults(&p);
    ck_assert_int_eq(policy_apply_ini(&p, write_file((char *)bin, sizeof bin), collect, &l), 1);
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "binary file"));
    assert_defaults(&p);
}
END_TEST

START_TEST(test_ten_megabyte_file)
{
    size_t n = 10u << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = i % 64 == 63 ? '\n' : ';';
    struct policy p;
    struct lines l = { .n = 0 };
    policy_defaults(&p);
    ck_assert_int_eq(policy_apply_ini(&p, write_file(big, n), collect, &l), 1);
    free(big);
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "file too large (10485760 bytes"));
    assert_defaults(&p);
}
END_TEST

START_TEST(test_compiled_out_phase_warns)
{
    struct policy p;
    struct lines l;
    ck_assert_int_eq(load_text("[observe]\nenabled = on\n", &p, &l), 0);
#if HAK_OBSERVE
    ck_assert_int_eq(l.n, 0);
    ck_assert_uint_eq(p.observe, 1);
#else
    ck_assert_int_eq(l.n, 1);
    ck_assert_ptr_nonnull(strstr(l.text[0], "compiled out of this build (meson configure -Dobserve=true)"));
    ck_assert_uint_eq(p.observe, 0);
#endif
}
END_TEST

START_TEST(test_env_beats_ini)
{
    struct policy p;
    struct lines l;
    setenv("HAKMEM_SLOTS_CAPACITY", "5", 1);
    setenv("HAKMEM_ROUTE_C5", "tlist", 1);
    ck_assert_int_eq(load_text("[slots]\ncapacity = 9\n", &p, &l), 0);
    ck_assert_int_eq(policy_apply_env(&p, collect, &l), 0);
    ck_assert_uint_eq(p.slots_cap, 5);
    ck_assert_uint_eq(p.origin[PK_SLOTS_CAPACITY].source, SRC_ENV);
    ck_assert_uint_eq(p.route[5], ROUTE_TLIST);
    setenv("HAKMEM_SLOTS_CAPACITY", "0", 1);
    setenv("HAKMEM_SLOTS_CAPACTY", "7", 1);
    ck_assert_int_eq(load_text("[slots]\ncapacity = 9\n", &p, &l), 0);
    ck_assert_int_eq(policy_apply_env(&p, collect, &l), 2);
    ck_assert_ptr_nonnull(strstr(l.text[0], "HAKMEM_SLOTS_CAPACITY=0: expected a whole number from 1 to 128; ignored"));
    ck_assert_ptr_nonnull(strstr(l.text[1], "unknown variable HAKMEM_SLOTS_CAPACTY"));
    ck_assert_uint_eq(p.slots_cap, 9);
    unsetenv("HAKMEM_SLOTS_CAPACITY");
    unsetenv("HAKMEM_SLOTS_CAPACTY");
    unsetenv("HAKMEM_ROUTE_C5");
}
END_TEST

START_TEST(test_shipped_configs_load)
{
    /* every file there, so a new one is checked without being listed */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/config", srcdir);
    DIR *cfg = opendir(dir);
    ck_assert_ptr_nonnull(cfg);
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(cfg)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ini"))
            continue;
        char f[1024];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        struct policy p;
        struct lines l = { .n = 0 };
        policy_defaults(&p);
        ck_assert_msg(policy_apply_ini(&p, f, collect, &l) == 0, "%s: %s", f, l.text[0]);
        ck_assert_str_eq(p.file, f);
        n++;
    }
    closedir(cfg);
    ck_assert_uint_ge(n, 2);
    /* default.ini says exactly the compiled defaults */
    char f[512];
    snprintf(f, sizeof f, "%s/config/default.ini", srcdir);
    struct policy p, d;
    struct lines l = { .n = 0 };
    policy_defaults(&p);
    policy_apply_ini(&p, f, collect, &l);
    policy_defaults(&d);
    assert_defaults(&p);
    for (unsigned k = 0; k < PK_COUNT; k++) {
        if (k == PK_ROUTE || (HAK_HARDENED && k == PK_ON_MISUSE))   /* hardened aborts by default */
            continue;
        char got[300], want[300];
        policy_format(&p, (enum policy_key_id)k, 0, got, sizeof got);
        policy_format(&d, (enum policy_key_id)k, 0, want, sizeof want);
        ck_assert_msg(!strcmp(got, want), "default.ini: [%s] %s = %s, compiled default %s",
                      policy_keys[k].section, policy_keys[k].key, got, want);
    }
}
END_TEST

/* Every key of keys.def reaches its own field: set to a value other than its default, it
 * prints that value back, and no other key changes. */
START_TEST(test_every_key_round_trips)
{
    static const char *other[] = {
        [PT_BOOL] = "", [PT_UINT] = "7", [PT_SIZE] = "3M", [PT_CLASSES] = "C2,C5-C7",
        [PT_STRING] = "/tmp/hak-obs.txt", [PT_MISUSE] = "",
    };
    for (unsigned k = 0; k < PK_COUNT; k++) {
        const struct policy_key *pk = &policy_keys[k];
        if (pk->type == PT_ROUTE)
            continue;
        struct policy d, p;
        char before[300], v[300], after[300];
        policy_defaults(&d);
        p = d;
        policy_format(&d, (enum policy_key_id)k, 0, before, sizeof before);
        const char *set = other[pk->type];
        if (pk->type == PT_BOOL)
            set = strcmp(before, "on") ? "on" : "off";
        if (pk->type == PT_MISUSE)
            set = strcmp(before, "abort") ? "abort" : "report";
        snprintf(v, sizeof v, "%s", set);
        const char *warn = NULL;
        ck_assert_ptr_null(policy_set(&p, (enum policy_key_id)k, 0, v, SRC_ENV, 0, &warn));
        policy_format(&p, (enum policy_key_id)k, 0, after, sizeof after);
        if (warn)       /* a phase compiled out stays off */
            ck_assert_str_eq(after, "off");
        else
            ck_assert_msg(!strcmp(after, v), "[%s] %s: set %s, reads %s", pk->section, pk->key, v, after);
        ck_assert_uint_eq(p.origin[k].source, SRC_ENV);
        for (unsigned j = 0; j < PK_COUNT; j++) {
            if (j == k || policy_keys[j].type == PT_ROUTE)
                continue;
            policy_format(&p, (enum policy_key_id)j, 0, after, sizeof after);
            policy_format(&d, (enum policy_key_id)j, 0, before, sizeof before);
            ck_assert_msg(!strcmp(after, before), "setting [%s] %s changed [%s] %s", pk->section, pk->key,
                          policy_keys[j].section, policy_keys[j].key);
        }
    }
}
END_TEST

/* Every phase row names a Meson option that exists, and every boolean Meson option is a
 * row of the table, except the build switches that are not phases. */
START_TEST(test_table_matches_meson_options)
{
    char f[512], buf[8192];
    snprintf(f, sizeof f, "%s/meson_options.txt", srcdir);
    FILE *fp = fopen(f, "r");
    ck_assert_ptr_nonnull(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = 0;
    fclose(fp);
    for (unsigned k = 0; k < PK_COUNT; k++) {
        if (!*policy_keys[k].meson)
            continue;
        char opt[64];
        snprintf(opt, sizeof opt, "option('%s', type: 'boolean'", policy_keys[k].meson);
        const char *o = strstr(buf, opt);
        ck_assert_msg(o != NULL, "meson_options.txt lacks %s", opt);
        if (!*policy_keys[k].name)
            continue;
        /* the option's description names the phase as every listing does */
        char named[64], desc[512];
        snprintf(named, sizeof named, "(%s)", policy_keys[k].name);
        const char *d = strstr(o, "description: '");
        ck_assert_ptr_nonnull(d);
        ck_assert_int_eq(sscanf(d, "description: '%511[^']'", desc), 1);
        ck_assert_msg(strstr(desc, named) != NULL, "meson_options.txt: %s's description lacks %s",
                      policy_keys[k].meson, named);
    }
    for (char *s = buf; (s = strstr(s, "option('")) != NULL; s++) {
        char name[64];
        static const char *not_phases[] = { "tests", "hardened", "fuzz", "prof" };   /* builds, not keys */
        int skip = sscanf(s, "option('%63[^']'", name) != 1;
        for (unsigned i = 0; i < sizeof not_phases / sizeof not_phases[0]; i++)
            skip |= !strcmp(name, not_phases[i]);
        if (skip)
            continue;
        int found = 0;
        for (unsigned k = 0; k < PK_COUNT; k++)
            found |= !strcmp(policy_keys[k].meson, name);
        ck_assert_msg(found, "Meson option %s is not in src/policy/keys.def", name);
    }
}
END_TEST

/* The bound: after hak_policy_load() returns, each thread's next malloc or free runs on
 * the new policy.  Threads keep allocating while policies flip under them. */
static _Atomic int stop, phase_seen[4];

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned long ops = 0;
    while (!atomic_load(&stop)) {
        char *p = hak_malloc(200 + (ops % 5) * 10);     /* C11 and C12 */
        ck_assert_ptr_nonnull(p);
        p[0] = (char)id;
        hak_free(p);
        ops++;
    }
    atomic_store(&phase_seen[id], 1);
    return NULL;
}

struct epoch_probe {
    int go;
    uint64_t seen_epoch;
    uint8_t route5;
};

static void *probe(void *arg)
{
    struct epoch_probe *e = arg;
    hak_free(hak_malloc(200));
    while (!__atomic_load_n(&e->go, __ATOMIC_ACQUIRE))
        ;
    hak_free(hak_malloc(200));          /* the one call after the load */
    e->seen_epoch = heap_tls->snap.epoch;
    e->route5 = heap_tls->snap.route[5];
    return NULL;
}

START_TEST(test_epoch_bound_threads)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    const char *flip[] = { "[route]\nC5 = tlist\n", "[slots]\ncapacity = 3\n", "[slots]\nclasses = none\n",
                           "[phases]\nphase91 = off\n" };
    for (int round = 0; round < 40; round++) {
        const char *text = flip[round % 4];
        ck_assert_int_eq(hak_policy_load(write_file(text, strlen(text))), 0);
        struct epoch_probe e = { 0, 0, 0 };
        pthread_t pt;
        pthread_create(&pt, NULL, probe, &e);
        usleep(200);
        ck_assert_int_eq(hak_policy_load(write_file(text, strlen(text))), 0);
        uint64_t now = hak_policy_epoch();
        __atomic_store_n(&e.go, 1, __ATOMIC_RELEASE);
        pthread_join(pt, NULL);
        ck_assert_uint_eq(e.seen_epoch, now);
        ck_assert_uint_eq(e.route5, round % 2 == 1 ? ROUTE_SLOTS : ROUTE_TLIST);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(atomic_load(&phase_seen[i]), 1);
    char v[64], s[320];
    ck_assert_int_eq(hak_policy_get("phases.phase91", v, sizeof v, s, sizeof s), 0);
    ck_assert_str_eq(v, "off");
    ck_assert_ptr_nonnull(strstr(s, "ini /tmp/hak-policy-"));
    ck_assert_int_eq(hak_policy_get("no.such", v, sizeof v, s, sizeof s), -1);
}
END_TEST

/* hak_policy_set: one setting at run time, as mi_option_set does, checked as the INI file
 * checks it; a bad name or value is one line and changes nothing; a later load starts again. */
START_TEST(test_set_one_setting)
{
    char v[64], s[320], out[2048];
    uint64_t e = hak_policy_epoch();
    ck_assert_int_eq(hak_policy_set("purge.retain", "16M"), 0);
    ck_assert_uint_eq(hak_policy_epoch(), e + 1);
    ck_assert_int_eq(hak_policy_get("purge.retain", v, sizeof v, s, sizeof s), 0);
    ck_assert_str_eq(v, "16M");
    ck_assert_str_eq(s, "hak_policy_set");
    ck_assert_uint_eq(policy_now()->purge_cap, (uint64_t)16 << 20);
    ck_assert_int_eq(hak_policy_set("Route.C5", "tlist"), 0);        /* names as config show, any case */
    ck_assert_uint_eq(policy_now()->route[5], ROUTE_TLIST);
    ck_assert_uint_eq(policy_now()->purge_cap, (uint64_t)16 << 20);  /* the first setting holds */
    static const struct { const char *name, *value, *said; } bad[] = {
        { "purge.retian", "1M", "unknown key purge.retian, did you mean [purge] retain" },
        { "purge.retain", "lots", "purge.retain = lots: " },
        { "slots.capacity", "100000", "slots.capacity = 100000: " },
        { "retain", "1M", "expected SECTION.KEY" },
        { NULL, "1M", "expected SECTION.KEY" },
        { "purge.retain", NULL, "expected SECTION.KEY and a value" },
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct capture c;
        e = hak_policy_epoch();
        stderr_capture_begin(&c);
        int r = hak_policy_set(bad[i].name, bad[i].value);
        stderr_capture_end(&c, out, sizeof out);
        ck_assert_int_eq(r, -1);
        ck_assert_uint_eq(hak_policy_epoch(), e);
        ck_assert_msg(strstr(out, bad[i].said) && strstr(out, "hakmem: error: hak_policy_set") == out
                      && strchr(out, '\n') == out + strlen(out) - 1, "case %u said: %s", i, out);
    }
    ck_assert_uint_eq(policy_now()->purge_cap, (uint64_t)16 << 20);
    const char *text = "[slots]\ncapacity = 7\n";
    ck_assert_int_eq(hak_policy_load(write_file(text, strlen(text))), 0);
    hak_policy_get("purge.retain", v, sizeof v, s, sizeof s);
    ck_assert_str_eq(s, "default");
}
END_TEST

START_TEST(test_load_bad_file_keeps_policy)
{
    const char *good = "[slots]\ncapacity = 7\n";
    ck_assert_int_eq(hak_policy_load(write_file(good, strlen(good))), 0);
    uint64_t e = hak_policy_epoch();
    struct capture c;
    char out[2048];
    stderr_capture_begin(&c);
    int r = hak_policy_load("/nonexistent.ini");
    stderr_capture_end(&c, out, sizeof out);
    ck_assert_int_eq(r, -1);
    ck_assert_uint_eq(hak_policy_epoch(), e);
    ck_assert_ptr_nonnull(strstr(out, "hakmem: /nonexistent.ini: error: cannot open"));
    char v[64];
    hak_policy_get("slots.capacity", v, sizeof v, NULL, 0);
    ck_assert_str_eq(v, "7");
}
END_TEST

int main(int argc, char **argv)
{
    srcdir = argc > 1 ? argv[1] : ".";
    Suite *su = suite_create("policy");
    TCase *tc = tcase_create("policy");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_good_file);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_unreadable_file);
    tcase_add_test(tc, test_syntax_error);
    tcase_add_test(tc, test_unknown_section);
    tcase_add_test(tc, test_unknown_key_suggests);
    tcase_add_test(tc, test_wrong_type);
    tcase_add_test(tc, test_out_of_range);
    tcase_add_test(tc, test_same_key_twice);
    tcase_add_test(tc, test_empty_file);
    tcase_add_test(tc, test_binary_file);
    tcase_add_test(tc, test_ten_megabyte_file);
    tcase_add_test(tc, test_compiled_out_phase_warns);
    tcase_add_test(tc, test_env_beats_ini);
    tcase_add_test(tc, test_shipped_configs_load);
    tcase_add_test(tc, test_every_key_round_trips);
    tcase_add_test(tc, test_table_matches_meson_options);
    tcase_add_test(tc, test_epoch_bound_threads);
    tcase_add_test(tc, test_load_bad_file_keeps_policy);
    tcase_add_test(tc, test_set_one_setting);
    suite_add_tcase(su, tc);
    return check_run(su);
}
