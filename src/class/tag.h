/* Every value a region's tag byte takes: one byte per granule in the region header says
 * what starts there.  Where the tags live and how they are read is the region layer's. */
#ifndef HAK_CLASS_TAG_H
#define HAK_CLASS_TAG_H

/* 0: a granule no block starts at (inside a block, or the header). */
#define TAG_NONE        0x00u
/* A free block of any class: a constant store, so the free path needs no class. */
#define TAG_FREE        0x01u
/* A tiny region's free block back home, not in any cache (a refill scans for these). */
#define TAG_HOME        0x02u
/* Spans (mid blocks): the last granule of a free run of two granules or more ... */
#define TAG_FEND        0x03u
/* ... a block another thread freed that the owner has not merged yet ... */
#define TAG_REMOTE      0x04u
/* ... a block in the owner's quick cache: free, but not a run, so nothing merges with it ... */
#define TAG_CACHED      0x05u
/* ... and whole chunks lent to the arenas: not the span's for now. */
#define TAG_LENT        0x06u
/* A live block the heap profiler sampled (its class: its region's).  Not the live tag, so
 * its free leaves the hot path for the one that ends the sample; no other free pays. */
#define TAG_SAMPLED     0x07u
/* A span block another thread freed that the purger took off the span's remote stack
 * (Phase 101): free, its memory given back, found again by this tag. */
#define TAG_DETACHED    0x08u

/* A live block's tag is 0x80 plus its class's slot index (class.h): unique per class, so
 * a block start of one class's layout never passes for another's, and the hot paths hold
 * it as their one number.  Every value below 0x80 is a tag no live block has. */
#define TAG_LIVE_BASE   0x80u
#define TAG_LIVE(cls)   (TAG_LIVE_BASE + SLOT_INDEX(cls))
#define TAG_CLASS(t)    SLOT_CLASS((t) - TAG_LIVE_BASE)
#define TAG_LIVE_SPAN   (TAG_LIVE_BASE + SLOT_INDEX_SPAN)

#endif
