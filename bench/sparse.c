/* sparse.c - large arrays sized for the worst case and filled sparsely: a program reads its
 * input into a buffer it fills whole, frees it, then allocates six arrays (512 MiB in all, as
 * an N-body code sized for its largest run) and uses the first tenth of each for `steps`
 * updates.  What it touches is what should be resident; ops_per_sec is updates per second.
 * Prints one machine-readable line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "sparse"
#include "bench_util.h"

#define MIB ((size_t)1 << 20)
#define ARRAYS 6

int main(int argc, char **argv)
{
    static const char *const names[] = { "steps", "percent" };
    static const unsigned long long mins[] = { 1, 1 };
    unsigned long long arg[] = { 40, 10 };
    bench_args(argc, argv, "sparse [steps [percent used]]", 2, names, mins, arg);
    unsigned long long steps = arg[0], percent = arg[1] > 100 ? 100 : arg[1];

    /* the input, read whole into one buffer and parsed: every page written */
    size_t in_len = 32 * MIB;
    unsigned char *input = malloc(in_len);
    if (input == NULL)
        return 1;
    memset(input, 0x5a, in_len);
    unsigned checksum = input[in_len / 3];
    free(input);

    static const size_t mib[ARRAYS] = { 64, 64, 96, 96, 96, 96 };   /* 512 MiB */
    double *a[ARRAYS];
    size_t used[ARRAYS];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < ARRAYS; i++) {
        a[i] = malloc(mib[i] * MIB);
        if (a[i] == NULL) {
            fprintf(stderr, "sparse: malloc(%zu MiB) failed\n", mib[i]);
            return 1;
        }
        used[i] = mib[i] * MIB / sizeof(double) * percent / 100;
        for (size_t k = 0; k < used[i]; k++)
            a[i][k] = (double)(k % 1000) * 0.001;
    }
    /* positions, velocities, forces: each update reads and writes the part in use */
    for (unsigned long long s = 0; s < steps; s++)
        for (int i = 0; i < ARRAYS; i++) {
            double *x = a[i], *v = a[(i + 1) % ARRAYS];
            size_t n = used[i] < used[(i + 1) % ARRAYS] ? used[i] : used[(i + 1) % ARRAYS];
            for (size_t k = 0; k < n; k++)
                x[k] += v[k] * 1e-3;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (int i = 0; i < ARRAYS; i++) {
        checksum += (unsigned)a[i][used[i] / 2];
        free(a[i]);
    }
    sink = (unsigned char)checksum;

    char fields[64];
    snprintf(fields, sizeof fields, "percent=%llu", percent);
    bench_report((double)steps, t0, t1, fields);
    return 0;
}
