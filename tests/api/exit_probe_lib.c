/* A library of the exit probe (exit_probe.c): its destructor runs after the allocator's,
 * as any library a program links does, and reports what the allocator still holds. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static void *watched;
static size_t watched_len;

/* The range whose pages the destructor counts: memory the program has freed. */
void exit_probe_watch(void *p, size_t len)
{
    watched = p;
    watched_len = len;
}

__attribute__((destructor)) static void exit_probe_report(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), resident = 0, n = watched_len / page;
    unsigned char vec[4096];
    if (watched == NULL || n > sizeof vec || mincore(watched, n * page, vec) != 0) {
        printf("probe: no range to look at\n");
        return;
    }
    for (size_t i = 0; i < n; i++)
        resident += vec[i] & 1;
    struct mallinfo2 m = mallinfo2();
    printf("retained %zu resident %zu of %zu\n", m.fordblks, resident, n);
    fflush(stdout);
}
