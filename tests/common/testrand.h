/* The deterministic random numbers the multi-threaded tests share: a xorshift64*
 * generator for sequences and a 64-bit finaliser for patterns derived from a seed. */
#ifndef HAK_TESTRAND_H
#define HAK_TESTRAND_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t *s)   /* xorshift64* */
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

#endif
