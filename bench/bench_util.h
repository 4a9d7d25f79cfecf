/* What every benchmark shares: a fast deterministic PRNG, argument parsing, and the sink
 * that keeps writes alive.  Each program defines BENCH_NAME before including this. */
#ifndef HAK_BENCH_UTIL_H
#define HAK_BENCH_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_util.h"
#endif

/* Read back at the end so the compiler must keep every write (and so every block). */
static volatile unsigned char sink;

/* splitmix64: deterministic for a given seed, a few cycles per draw, so the PRNG
 * stays negligible next to malloc/free. */
static inline uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Multiply-shift instead of '%': no division on the hot path, and the bias for
 * n <= 2^32 on a 32-bit draw is far below anything measurable here. */
static inline uint32_t below(uint32_t bits, uint32_t n)
{
    return (uint32_t)(((uint64_t)bits * n) >> 32);
}

static inline unsigned long long parse_arg(const char *s, const char *what, unsigned long long min)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v < min || s[0] == '-') {
        fprintf(stderr, BENCH_NAME ": bad %s '%s'\n", what, s);
        exit(2);
    }
    return v;
}

/* Positional arguments: up to n, each at least min[i], into val[i] (its default stays when
 * absent); more than n prints `usage` and exits 2. */
static inline void bench_args(int argc, char **argv, const char *usage, int n, const char *const *name,
                              const unsigned long long *min, unsigned long long *val)
{
    if (argc > n + 1) {
        fprintf(stderr, "usage: %s\n", usage);
        exit(2);
    }
    for (int i = 0; i < n && i + 1 < argc; i++)
        val[i] = parse_arg(argv[i + 1], name[i], min[i]);
}

/* The one line a benchmark prints: ops/s over the timed part [t0, t1], the seconds, its own
 * "key=value" fields, and the peak RSS (ru_maxrss, kilobytes on Linux). */
static inline void bench_report(double ops, struct timespec t0, struct timespec t1, const char *fields)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("bench=" BENCH_NAME " ops_per_sec=%.0f seconds=%.6f %s peak_rss_kb=%ld\n",
           seconds > 0 ? ops / seconds : 0.0, seconds, fields, ru.ru_maxrss);
}

#endif
