/* bigint.c - the allocation pattern of big-integer arithmetic: operands and temporaries of
 * 8-100 bytes (1-12 limbs) made and freed in LIFO order around each operation, results
 * grown by realloc when a carry lengthens them, a few dozen kept live in a ring.
 * Prints one machine-readable line; ops_per_sec is arithmetic operations per second. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bigint"
#include "bench_util.h"

#define RING 64

struct num {
    uint64_t *limb;
    unsigned n;
};

static struct num make(uint64_t *rng, unsigned n)
{
    struct num x = { malloc(n * sizeof(uint64_t)), n };
    for (unsigned i = 0; i < n; i++)
        x.limb[i] = next_rand(rng);
    return x;
}

/* r = a * b, schoolbook; the product is allocated one limb short and grown by realloc when
 * the top limb carries, as arbitrary-precision libraries trim and extend their results. */
static struct num mul(const struct num *a, const struct num *b)
{
    unsigned n = a->n + b->n - 1;
    uint64_t *r = calloc(n, sizeof *r), carry = 0;
    uint64_t *t = malloc((b->n + 1) * sizeof *t);        /* a row temporary, freed first */
    for (unsigned i = 0; i < a->n; i++) {
        unsigned __int128 c = 0;
        for (unsigned j = 0; j < b->n; j++) {
            c += (unsigned __int128)a->limb[i] * b->limb[j];
            t[j] = (uint64_t)c;
            c >>= 64;
        }
        t[b->n] = (uint64_t)c;
        unsigned __int128 s = 0;
        for (unsigned j = 0; j <= b->n; j++) {
            unsigned k = i + j;
            if (k < n) {
                s += (unsigned __int128)r[k] + t[j];
                r[k] = (uint64_t)s;
                s >>= 64;
            } else {
                s += t[j];
            }
        }
        carry += (uint64_t)s;
    }
    free(t);
    if (carry) {
        r = realloc(r, (n + 1) * sizeof *r);
        r[n++] = carry;
    }
    return (struct num){ r, n };
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "ops" };
    static const unsigned long long mins[] = { 1 };
    unsigned long long arg[] = { 5000000 };
    bench_args(argc, argv, "bigint [ops]", 1, names, mins, arg);
    unsigned long long ops = arg[0];

    uint64_t rng = 7;
    struct num ring[RING] = { { 0 } };
    uint64_t checksum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned long long i = 0; i < ops; i++) {
        uint64_t r = next_rand(&rng);
        struct num a = make(&rng, 1 + below((uint32_t)r, 6));
        struct num b = make(&rng, 1 + below((uint32_t)(r >> 32), 6));
        struct num p = mul(&a, &b);
        free(b.limb);                                       /* operands go in LIFO order */
        free(a.limb);
        checksum += p.limb[p.n - 1];
        struct num *slot = &ring[i % RING];
        free(slot->limb);
        *slot = p;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (int i = 0; i < RING; i++)
        free(ring[i].limb);
    sink = (unsigned char)checksum;
    bench_report((double)ops, t0, t1, "");
    return 0;
}
