/* logicmin.c - the allocations of a two-level logic minimiser (Quine-McCluskey): for random
 * boolean functions of 10-12 inputs, minterms are merged level by level into implicants (a
 * 32-byte cube each, listed and hashed per level, freed as the next level is made), the
 * ones left unmerged kept as primes in a growing array, then for every on-minterm a list of
 * the primes covering it, grown by realloc, from which a cover is taken.  Single thread;
 * every cover is checked.  Prints one machine-readable line; ops_per_sec is cubes made per
 * second. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "logicmin"
#include "bench_util.h"

struct cube {
    uint32_t val, mask;           /* mask: the inputs the cube does not depend on (val 0 there) */
    struct cube *next;            /* the level's list */
    struct cube *hnext;           /* the level's hash chain */
    int used;                     /* merged into a bigger cube at the next level */
};

struct prime {
    uint32_t val, mask;
};

struct idlist {                   /* the primes covering one minterm, grown by realloc */
    uint32_t *id;
    uint32_t n, cap;
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        fprintf(stderr, "logicmin: malloc(%zu) failed\n", n);
        exit(1);
    }
    return p;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fprintf(stderr, "logicmin: calloc(%zu, %zu) failed\n", n, size);
        exit(1);
    }
    return p;
}

/* A level's cubes: a list, and a hash table over it to find a cube's partners. */
struct level {
    struct cube *list;
    struct cube **bucket;
    unsigned nbuckets, n;
};

static unsigned hash(uint32_t val, uint32_t mask, unsigned nbuckets)
{
    uint64_t key = (uint64_t)mask << 32 | val;
    return (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 40) & (nbuckets - 1);
}

static struct cube *level_find(const struct level *l, uint32_t val, uint32_t mask)
{
    for (struct cube *c = l->bucket[hash(val, mask, l->nbuckets)]; c; c = c->hnext)
        if (c->val == val && c->mask == mask)
            return c;
    return NULL;
}

/* Adds (val, mask) unless it is there: 1 if added. */
static int level_add(struct level *l, uint32_t val, uint32_t mask)
{
    unsigned h = hash(val, mask, l->nbuckets);
    for (struct cube *c = l->bucket[h]; c; c = c->hnext)
        if (c->val == val && c->mask == mask)
            return 0;
    struct cube *c = xmalloc(sizeof *c);
    *c = (struct cube){ val, mask, l->list, l->bucket[h], 0 };
    l->bucket[h] = c;
    l->list = c;
    l->n++;
    return 1;
}

/* One function: the prime implicants of on | dc, merged level by level, then a cover of on
 * that takes, for each minterm still uncovered, the biggest prime covering it.  Returns the
 * cubes made; *checksum gains the cover. */
static unsigned long long minimise(unsigned nvars, uint64_t *rng, uint64_t *checksum)
{
    uint32_t nmin = 1u << nvars;
    unsigned char *kind = xmalloc(nmin);                /* 0 off, 1 on, 2 don't care */
    struct level cur = { NULL, xcalloc(nmin, sizeof(struct cube *)), nmin, 0 };
    unsigned long long made = 0;
    for (uint32_t m = 0; m < nmin; m++) {
        uint32_t r = (uint32_t)next_rand(rng);
        kind[m] = r < 0x90000000u ? 1 : r < 0x98000000u ? 2 : 0;  /* 56 % on, 3 % don't care */
        if (kind[m])
            made += (unsigned long long)level_add(&cur, m, 0);
    }
    size_t nprimes = 0, cap = 16;
    struct prime *prime = xmalloc(cap * sizeof *prime);
    while (cur.n) {
        struct level next = { NULL, xcalloc(cur.nbuckets, sizeof(struct cube *)), cur.nbuckets, 0 };
        for (struct cube *a = cur.list; a; a = a->next)
            for (uint32_t bit = 1; bit < nmin; bit <<= 1) {
                if ((a->mask | a->val) & bit)
                    continue;
                struct cube *b = level_find(&cur, a->val | bit, a->mask);
                if (b == NULL)
                    continue;
                a->used = b->used = 1;
                made += (unsigned long long)level_add(&next, a->val, a->mask | bit);
            }
        for (struct cube *c = cur.list, *n; c; c = n) {
            n = c->next;
            if (!c->used) {
                if (nprimes == cap) {
                    cap += cap / 2;
                    prime = realloc(prime, cap * sizeof *prime);
                    if (prime == NULL)
                        exit(1);
                }
                prime[nprimes++] = (struct prime){ c->val, c->mask };
            }
            free(c);
        }
        free(cur.bucket);
        cur = next;
    }
    free(cur.bucket);

    /* Which primes cover each on-minterm (lists grown a few entries at a time). */
    struct idlist *cov = xcalloc(nmin, sizeof *cov);
    for (uint32_t i = 0; i < nprimes; i++) {
        uint32_t mask = prime[i].mask, sub = 0;
        do {                                            /* every minterm of the cube */
            uint32_t m = prime[i].val | sub;
            if (kind[m] == 0) {
                fprintf(stderr, "logicmin: prime %#x/%#x covers an off minterm\n", prime[i].val, mask);
                exit(1);
            }
            if (kind[m] == 1) {
                struct idlist *l = &cov[m];
                if (l->n == l->cap) {
                    l->cap = l->cap ? 2 * l->cap : 2;
                    l->id = realloc(l->id, l->cap * sizeof *l->id);
                    if (l->id == NULL)
                        exit(1);
                }
                l->id[l->n++] = i;
            }
            sub = (sub - mask) & mask;
        } while (sub);
    }
    unsigned char *done = xcalloc(nmin, 1);
    for (uint32_t m = 0; m < nmin; m++) {
        if (kind[m] != 1 || done[m])
            continue;
        if (cov[m].n == 0) {
            fprintf(stderr, "logicmin: minterm %#x has no prime\n", m);
            exit(1);
        }
        uint32_t best = cov[m].id[0];
        for (uint32_t j = 1; j < cov[m].n; j++)
            if (__builtin_popcount(prime[cov[m].id[j]].mask) > __builtin_popcount(prime[best].mask))
                best = cov[m].id[j];
        uint32_t mask = prime[best].mask, sub = 0;
        do {
            done[prime[best].val | sub] = 1;
            sub = (sub - mask) & mask;
        } while (sub);
        *checksum += prime[best].val * 31u + mask;
    }
    for (uint32_t m = 0; m < nmin; m++) {
        if (kind[m] == 1 && !done[m]) {
            fprintf(stderr, "logicmin: minterm %#x left uncovered\n", m);
            exit(1);
        }
        free(cov[m].id);
    }
    free(done);
    free(cov);
    free(prime);
    free(kind);
    return made;
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "functions", "seed" };
    static const unsigned long long mins[] = { 1, 0 };
    unsigned long long arg[] = { 300, 0x10c1c5eedull };
    bench_args(argc, argv, "logicmin [functions [seed]]", 2, names, mins, arg);
    uint64_t rng = arg[1], checksum = 0;
    unsigned long long made = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long long f = 0; f < arg[0]; f++)
        made += minimise(10 + (unsigned)(f % 3), &rng, &checksum);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sink = (unsigned char)checksum;

    char fields[96];
    snprintf(fields, sizeof fields, "functions=%llu cubes=%llu checksum=%llu", arg[0], made,
             (unsigned long long)checksum);
    bench_report((double)made, t0, t1, fields);
    return 0;
}
