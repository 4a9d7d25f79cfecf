/* frag.c - fragmentation: each cycle allocates blocks of one size mix (cycling through
 * 16..512 B, 256 B..4 KiB, 4..16 KiB and log-uniform 16 B..16 KiB) until the live total
 * reaches a target (default 256 MiB), writing every byte, then frees a random 90% of the
 * live blocks, so the survivors are scattered. At the end everything is freed but a small
 * random set. Prints one machine-readable line with the peak RSS, the RSS at the end
 * (small set still live) and the bytes still live; ops_per_sec is (allocs+frees)/s. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "frag"
#include "bench_util.h"

#define MIN_SIZE 16u
#define MAX_SIZE 16384u
#define FREE_PERMILLE 900u
#define NMIXES 4u

static inline size_t draw_size(unsigned mix, uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    uint32_t lo = (uint32_t)r;
    switch (mix) {
    case 0: return 16 + below(lo, 512 - 16 + 1);
    case 1: return 256 + below(lo, 4096 - 256 + 1);
    case 2: return 4096 + below(lo, MAX_SIZE - 4096 + 1);
    default: {
        /* Log-uniform: an octave [2^e, 2^(e+1)) for e = 4..13, uniform inside it. */
        unsigned e = 4 + below((uint32_t)(r >> 32), 10);
        return ((size_t)1 << e) + below(lo, 1u << e);
    }
    }
}

/* Every byte is written with a value derived from the size; the first 8 bytes then hold
 * the size and its check word, so a block can be verified from its contents alone. */
static inline unsigned char fill_byte(size_t size)
{
    return (unsigned char)(size * 31u + 7u);
}

static inline uint32_t check_word(uint32_t size)
{
    return size * 0x9e3779b1u ^ 0xf4a9u;
}

static unsigned long long allocs, frees;
static unsigned long long live_bytes;

static unsigned char *alloc_block(size_t size)
{
    unsigned char *p = malloc(size);
    if (!p) {
        fprintf(stderr, "frag: malloc(%zu) failed with %llu bytes live\n", size, live_bytes);
        exit(1);
    }
    memset(p, fill_byte(size), size);
    uint32_t h[2] = { (uint32_t)size, check_word((uint32_t)size) };
    memcpy(p, h, sizeof h);
    allocs++;
    live_bytes += size;
    return p;
}

static unsigned free_block(unsigned char *p)
{
    uint32_t h[2];
    memcpy(h, p, sizeof h);
    size_t size = h[0];
    if (size < MIN_SIZE || size > MAX_SIZE || h[1] != check_word(h[0]) ||
        p[size - 1] != fill_byte(size) || p[size / 2 + 4] != fill_byte(size)) {
        fprintf(stderr, "frag: block %p corrupted (header %#x %#x)\n", (void *)p, h[0], h[1]);
        exit(1);
    }
    unsigned c = p[size - 1];
    free(p);
    frees++;
    live_bytes -= size;
    return c;
}

/* Frees all but 'keep' of the n blocks in v, chosen at random (a partial Fisher-Yates
 * shuffle picks the victims), and compacts the survivors to the front. Returns 'keep'. */
static size_t free_random(unsigned char **v, size_t n, size_t keep, uint64_t *rng, unsigned *checksum)
{
    if (keep >= n)
        return n;
    size_t nfree = n - keep;
    for (size_t i = 0; i < nfree; i++) {
        size_t j = i + (size_t)(next_rand(rng) % (n - i));
        unsigned char *t = v[j];
        v[j] = v[i];
        *checksum += free_block(t);
    }
    memmove(v, v + nfree, keep * sizeof *v);
    return keep;
}

/* Current resident set size from /proc/self/statm, in KiB; -1 if unreadable. */
static long current_rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    unsigned long size, resident;
    int ok = fscanf(f, "%lu %lu", &size, &resident) == 2;
    fclose(f);
    return ok ? (long)(resident * (unsigned long)sysconf(_SC_PAGESIZE) / 1024) : -1;
}

int main(int argc, char **argv)
{
    unsigned long long cycles = 4;
    unsigned long long target_mb = 256;
    unsigned long long keep_final = 1000;
    uint64_t seed = 0xf4a95eedull;

    if (argc > 5) {
        fprintf(stderr, "usage: %s [cycles] [live_mb] [keep_final_blocks] [seed]\n", argv[0]);
        return 2;
    }
    if (argc > 1) cycles = parse_arg(argv[1], "cycles", 1);
    if (argc > 2) target_mb = parse_arg(argv[2], "live MB", 1);
    if (argc > 3) keep_final = parse_arg(argv[3], "keep_final", 0);
    if (argc > 4) seed = parse_arg(argv[4], "seed", 0);
    if (target_mb > (1ull << 20)) {
        fprintf(stderr, "frag: live MB too large\n");
        return 2;
    }
    unsigned long long target = target_mb << 20;

    /* The pointer array comes from mmap, not malloc, so it is the same for every
     * allocator; it is touched (and counted in the RSS) only as far as it is used. */
    size_t cap = (size_t)(target / MIN_SIZE + 1);
    unsigned char **v = mmap(NULL, cap * sizeof *v, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (v == MAP_FAILED) {
        perror("frag: mmap");
        return 1;
    }

    uint64_t rng = seed;
    unsigned checksum = 0;
    size_t n = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (unsigned long long c = 0; c < cycles; c++) {
        unsigned mix = (unsigned)(c % NMIXES);
        while (live_bytes < target)
            v[n++] = alloc_block(draw_size(mix, &rng));
        n = free_random(v, n, n - n * FREE_PERMILLE / 1000, &rng, &checksum);
    }
    n = free_random(v, n, (size_t)keep_final, &rng, &checksum);

    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* Drop the unused part of the pointer array, so the final RSS is the allocator's. */
    size_t used = (n * sizeof *v + 4095) & ~(size_t)4095;
    if (used < cap * sizeof *v)
        madvise((char *)v + used, cap * sizeof *v - used, MADV_DONTNEED);
    long final_rss_kb = current_rss_kb();
    unsigned long long live_kb = (live_bytes + 1023) / 1024;
    size_t live_blocks = n;
    for (size_t i = 0; i < n; i++)
        checksum += free_block(v[i]);
    munmap(v, cap * sizeof *v);
    sink = (unsigned char)checksum;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);

    unsigned long long ops = allocs + frees - live_blocks;  /* the untimed teardown excluded */
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* ru_maxrss is in kilobytes on Linux. */
    printf("bench=frag ops_per_sec=%.0f seconds=%.6f cycles=%llu target_mb=%llu ops=%llu "
           "live_blocks=%zu live_kb=%llu final_rss_kb=%ld peak_rss_kb=%ld\n",
           seconds > 0 ? (double)ops / seconds : 0.0, seconds, cycles, target_mb, ops,
           live_blocks, live_kb, final_rss_kb, ru.ru_maxrss);
    return 0;
}
