/* Run by test_stats.c under LD_PRELOAD=libhakmem.so: frees 24 MiB of mid and large blocks
 * and exits; its library's destructor (exit_probe_lib.c) prints what is still held then. */
#include <stdlib.h>
#include <string.h>

void exit_probe_watch(void *p, size_t len);

#define MIB ((size_t)1 << 20)

int main(void)
{
    static void *mid[64], *large[4];
    for (unsigned i = 0; i < 64; i++) {
        mid[i] = malloc(128 * 1024);
        if (mid[i] == NULL)
            return 1;
        memset(mid[i], 1, 128 * 1024);
    }
    for (unsigned i = 0; i < 4; i++) {
        large[i] = malloc(4 * MIB);
        if (large[i] == NULL)
            return 1;
        memset(large[i], 1, 4 * MIB);
    }
    exit_probe_watch(large[0], 4 * MIB);
    for (unsigned i = 0; i < 64; i++)
        free(mid[i]);
    for (unsigned i = 0; i < 4; i++)
        free(large[i]);
    return 0;
}
