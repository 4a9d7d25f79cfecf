/* What the entry points of the profiling library call: a thread's byte countdown to its
 * next sample, and the sampling of a block when it runs out (api/sampler.c). */
#ifndef HAK_API_SAMPLER_H
#define HAK_API_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include "../common/common.h"
#include "../slots/slots.h"

/* Bytes this thread may still allocate before the next sample; below zero, a sample is due.
 * Beside the thread's heap pointer (slots.h), which malloc loads anyway. */
#define api_prof_left (heap_thread.prof_left)

/* The block p of n bytes crossed the countdown: it is sampled (its stack recorded and the
 * block marked) and a new interval drawn. */
void api_prof_sample(void *p, size_t n);
/* realloc: the sample of p, if it has one, ends here (the result is counted anew). */
void api_prof_unsample(void *p);
/* This copy of hakmem serves the process's malloc (or, built with the hak_* names only, is
 * called by name): not a library loaded beside another hakmem that was preloaded. */
int api_malloc_is_ours(void);

#endif
