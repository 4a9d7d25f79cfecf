/* large.c - large blocks: a small working set of live blocks; every op frees a random one
 * and allocates a new block of 64 KiB..8 MiB (log-uniform: a random power-of-two octave,
 * uniform inside it), writing one byte in every 4 KiB page. Prints one machine-readable
 * line; ops_per_sec is malloc+free pairs per second. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "large"
#include "bench_util.h"

#define MIN_SHIFT 16u   /* 64 KiB */
#define MAX_SHIFT 23u   /* 8 MiB */
#define PAGE 4096u

/* An octave [2^e, 2^(e+1)) for e in MIN_SHIFT..MAX_SHIFT-1, then uniform inside it. */
static inline size_t draw_size(uint64_t *rng)
{
    uint64_t r = next_rand(rng);
    unsigned e = MIN_SHIFT + below((uint32_t)(r >> 32), MAX_SHIFT - MIN_SHIFT);
    return ((size_t)1 << e) + below((uint32_t)r, 1u << e);
}

/* The page bytes are derived from the block's header word, so any page can be checked. */
static inline unsigned char page_byte(uint64_t h, size_t off)
{
    return (unsigned char)(h ^ (off >> 12) * 0x9du);
}

int main(int argc, char **argv)
{
    unsigned long long ops = 5000;
    unsigned long long live = 16;
    uint64_t seed = 0x1a49e5eedull;

    if (argc > 4) {
        fprintf(stderr, "usage: %s [ops] [live_blocks] [seed]\n", argv[0]);
        return 2;
    }
    if (argc > 1) ops = parse_arg(argv[1], "ops", 1);
    if (argc > 2) live = parse_arg(argv[2], "live blocks", 1);
    if (argc > 3) seed = parse_arg(argv[3], "seed", 0);
    if (live > 65536) {
        fprintf(stderr, "large: at most 65536 live blocks\n");
        return 2;
    }

    /* Bookkeeping is allocated before the clock starts so it is not measured. */
    unsigned char **slots = calloc(live, sizeof *slots);
    size_t *sizes = calloc(live, sizeof *sizes);
    if (!slots || !sizes) {
        perror("large: calloc");
        return 1;
    }

    uint64_t rng = seed;
    unsigned checksum = 0;
    unsigned long long bytes = 0;
    unsigned long long live_bytes = 0, peak_live = 0;  /* requested bytes, for memory efficiency */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (unsigned long long i = 0; i < ops; i++) {
        uint64_t r = next_rand(&rng);
        uint32_t slot = below((uint32_t)(r >> 32), (uint32_t)live);

        unsigned char *old = slots[slot];
        if (old) {
            /* Check the header, the first and the last page byte before freeing. */
            size_t osize = sizes[slot];
            uint64_t h;
            memcpy(&h, old, sizeof h);
            size_t last = 8 + (osize - 9) / PAGE * PAGE;  /* the last byte written */
            if ((size_t)(h & 0xffffffffu) != osize || (uint32_t)(h >> 32) != slot ||
                old[last] != page_byte(h, last)) {
                fprintf(stderr, "large: block %p (%zu bytes, slot %u) corrupted at op %llu\n",
                        (void *)old, osize, slot, i);
                return 1;
            }
            checksum += old[last];
            free(old);
            live_bytes -= osize;
        }

        size_t size = draw_size(&rng);
        unsigned char *p = malloc(size);
        if (!p) {
            fprintf(stderr, "large: malloc(%zu) failed at op %llu\n", size, i);
            return 1;
        }
        uint64_t h = ((uint64_t)slot << 32) | size;
        memcpy(p, &h, sizeof h);
        /* One byte per 4 KiB page (past the header in the first page). */
        for (size_t off = 8; off < size; off += PAGE)
            p[off] = page_byte(h, off);
        slots[slot] = p;
        sizes[slot] = size;
        bytes += size;
        live_bytes += size;
        if (live_bytes > peak_live)
            peak_live = live_bytes;
    }

    clock_gettime(CLOCK_MONOTONIC, &t1);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);  /* before the teardown, which cannot raise the peak */

    for (unsigned long long s = 0; s < live; s++) {
        if (slots[s]) {
            checksum += slots[s][0];
            free(slots[s]);
        }
    }
    free(slots);
    free(sizes);
    sink = (unsigned char)checksum;

    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* ru_maxrss is in kilobytes on Linux. */
    printf("bench=large ops_per_sec=%.0f seconds=%.6f ops=%llu live_blocks=%llu avg_kb=%.0f peak_live_kb=%llu peak_rss_kb=%ld\n",
           seconds > 0 ? (double)ops / seconds : 0.0, seconds, ops, live,
           (double)bytes / (double)ops / 1024.0, (peak_live + 1023) / 1024, ru.ru_maxrss);
    return 0;
}
