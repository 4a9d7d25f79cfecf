/* The mid-block allocator (Phase 100): mid blocks carved best fit from a thread's spans, a
 * freed one merged with its free neighbours; the span layout is region/span_layout.h. */
#ifndef HAK_SPAN_H
#define HAK_SPAN_H

#include "../slots/slots.h"

/* span.c: carving and merging, the owner's side (h owns every span passed in) */
void *span_malloc(size_t n, struct heap *h);                 /* HAK_TINY_MAX < n <= HAK_MID_MAX */
void  span_free(struct heap *h, struct region *r, void *p);  /* a live block, its tag now TAG_FREE */
int   span_resize(struct heap *h, struct region *r, void *p, size_t n);   /* 1: p now holds n */
void  span_merge_remote(struct heap *h, struct region *r);   /* blocks other threads freed */
void  span_link_runs(struct heap *h, struct region *r);      /* an adopted span's runs into the bins */
void  span_quick_flush(struct heap *h);                      /* every cached block merged */
#ifdef HAK_SPAN_DEBUG
const char *span_check(struct heap *h);                      /* NULL: spans and bins agree */
#endif
void  span_run_put(struct heap *h, struct region *r, uint32_t g, uint32_t n);   /* frees a run */
void  span_run_new(struct heap *h, struct region *r);        /* a fresh span: one run */
void  span_run_split(struct heap *h, struct region *r, uint32_t g, uint32_t n);   /* r held */
int   span_bin_unlink(struct heap *h, struct region *r, uint32_t g, uint32_t n);


/* spans.c: spans joining and leaving a heap */
int   span_refill(struct heap *h, uint32_t want);      /* a span with a free run: 0 out of memory */
int   span_merge_pending(struct heap *h);             /* remote frees merged: 1 if any */
void  span_emptied(struct heap *h, struct region *r); /* nothing left in r: it may go */
int   span_idle(struct heap *h, struct region *r);    /* nothing live in r: 1 if it stays */
void  span_lend(struct heap *h, struct region *r);    /* r has just come down to little */
void  span_release_all(struct heap *h);               /* thread exit */

#endif
