/* idle.c - a program that builds a big heap, frees almost all of it in a scattered pattern and
 * goes idle: 1.6 GB in blocks of 256 B - 64 KiB (each octave as likely), every block but one
 * in 200 freed (about 8 MB stay live, scattered over the heap), then `idle_ms` asleep, then
 * malloc_trim(0).  What it measures is the memory an idle
 * program keeps: RSS after the sleep (no call from the program) and after the trim.
 * Prints one machine-readable line; ops_per_sec is malloc+free pairs per second while busy. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_NAME "idle"
#include "bench_util.h"

/* VmRSS of this process, in KiB: what it holds now, not its peak. */
static long rss_now_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "megabytes", "idle_ms" };
    static const unsigned long long mins[] = { 1, 0 };
    unsigned long long arg[] = { 1600, 3000 };
    bench_args(argc, argv, "idle [megabytes [idle_ms]]", 2, names, mins, arg);
    size_t total = (size_t)arg[0] << 20;

    size_t cap = total / 256 + 1024, n = 0, bytes = 0;
    unsigned char **blocks = malloc(cap * sizeof *blocks);
    if (blocks == NULL)
        return 1;
    uint64_t rng = 7;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (bytes < total && n < cap) {
        uint64_t r = next_rand(&rng);
        /* 256 B << k, k from 0 to 7, each octave as likely */
        unsigned k = (unsigned)(r >> 61);
        size_t len = ((size_t)256 << k) + below((uint32_t)r, (uint32_t)(256u << k));
        blocks[n] = malloc(len);
        if (blocks[n] == NULL)
            return 1;
        memset(blocks[n], (int)(n & 0xff), len);
        bytes += len;
        n++;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % 200 == 37) {
            kept++;
            continue;
        }
        free(blocks[i]);
        blocks[i] = NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long busy_kb = rss_now_kb();
    usleep((useconds_t)arg[1] * 1000);
    long idle_kb = rss_now_kb();
    malloc_trim(0);
    long trim_kb = rss_now_kb();
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        if (blocks[i]) {
            sum += blocks[i][0];
            free(blocks[i]);
        }
    free(blocks);
    sink = (unsigned char)sum;

    char fields[160];
    snprintf(fields, sizeof fields, "kept=%zu rss_busy_kb=%ld rss_idle_kb=%ld rss_trim_kb=%ld", kept, busy_kb,
             idle_kb, trim_kb);
    bench_report((double)n, t0, t1, fields);
    return 0;
}
