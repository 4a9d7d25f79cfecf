/* The purger's wake-up (Phase 99): a release that brings more than [purge] retain back after
 * the purger went to sleep with nothing to do must wake it, even within the tick that
 * already signalled one due sweep.  The arenas' clock is held still so the order is exact. */
#include <check.h>
#include "check_run.h"
#include <time.h>
#include <unistd.h>
#include "hakmem.h"
#include "cold/cold.h"
#include "arena/chunks.h"

#define CHUNK HAK_CHUNK_SIZE

static uintptr_t take(unsigned chunks)
{
    int clean;
    uintptr_t a = arena_chunks_take(chunks, &clean);
    ck_assert_msg(a != 0, "no extent of %u chunks", chunks);
    return a;
}

/* Up to ms milliseconds of real time for cond to hold. */
#define WAIT_FOR(cond, ms)                                               \
    do {                                                                 \
        for (unsigned waited_ = 0; !(cond) && waited_ < (ms); waited_ += 5) \
            usleep(5000);                                                \
    } while (0)

START_TEST(test_recrossing_wakes_purger)
{
    init_process();
    size_t retain = policy_now()->purge_cap;
    uint32_t delay = policy_now()->purge_delay_ms;
    ck_assert_msg(HAK_PHASE99 && policy_now()->phase99, "Phase 99 is off: nothing to test");
    ck_assert_uint_eq(retain, 4 * CHUNK);
    ck_assert_uint_ge(delay, 10);

    /* Held in use all along: the bound on what may wait (twice retain, or what is in use)
     * stays above everything released here, so no release sweeps on its own. */
    uintptr_t held = take(32);
    uintptr_t a = take(6), w = take(1), y = take(5);

    uint32_t t0 = 100000;
    arena_clock_set(1, t0);
    arena_purger_want(1);
    arena_purger_poll();
    WAIT_FOR(arena_purger_running() && arena_pool_purger_idle(), 5000);
    ck_assert_msg(arena_purger_running() && arena_pool_purger_idle(), "the purger did not start");

    /* t0: 6 chunks past a cap of 4: the tick's due sweep, signalled; nothing has waited. */
    arena_chunks_release(a, 6);
    ck_assert_uint_eq(arena_resident_free(), 6 * CHUNK);

    /* t1: the 6 have waited; a small release is the new tick's due sweep.  The purger
     * brings resident free down to the cap and sleeps with no deadline. */
    uint32_t t1 = t0 + delay;
    arena_clock_set(1, t1);
    arena_chunks_release(w, 1);
    WAIT_FOR(arena_resident_free() <= retain && arena_pool_purger_idle(), 5000);
    ck_assert_msg(arena_resident_free() <= retain && arena_pool_purger_idle(),
                  "the purger did not purge to the cap: %zu bytes resident free", arena_resident_free());

    /* Still t1: 5 more chunks cross the cap again.  The tick has had its signal. */
    arena_chunks_release(y, 5);
    ck_assert_uint_gt(arena_resident_free(), retain);

    /* The program idles: once the 5 have waited, the purger must give them back. */
    arena_clock_set(1, t1 + delay);
    WAIT_FOR(arena_resident_free() <= retain, 5000);
    ck_assert_msg(arena_resident_free() <= retain,
                  "lost wake-up: %zu bytes resident free past a cap of %zu while idle",
                  arena_resident_free(), retain);
    arena_clock_set(0, 0);
    arena_chunks_release(held, 32);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("purger-wakeup");
    TCase *tc = tcase_create("purger-wakeup");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_recrossing_wakes_purger);
    suite_add_tcase(su, tc);
    return check_run(su);
}
