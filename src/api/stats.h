/* The statistics and trim calls behind malloc.h's names (api/stats.c), for the entry points
 * in api/malloc.c that export them.  None allocates: write(2) and stack buffers. */
#ifndef HAK_API_STATS_H
#define HAK_API_STATS_H

#include <stddef.h>
#include <stdio.h>
#include "../../include/hakmem.h"

int  api_signal_of(const char *name, const char *key);   /* USR1/USR2 by name, 0: none (or an error, said under key unless NULL) */
void api_signal_install(int sig, void (*fn)(int));
int  api_malloc_trim(size_t pad);
void api_malloc_stats(void);
int  api_malloc_info(int options, FILE *fp);
int  api_mallopt(int param, int value);
struct mallinfo2 api_mallinfo2(void);

#endif
