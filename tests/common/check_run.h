/* Runs a Check suite the way every hakmem test program does (mode and output from
 * CK_* variables) and turns the result into the process's exit status.  A run of no
 * test case at all (a CK_RUN_CASE or CK_RUN_SUITE that names nothing, a suite built
 * empty) is a failure: TAP's "1..0" would read as a skip. */
#ifndef HAK_CHECK_RUN_H
#define HAK_CHECK_RUN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

static inline int check_run(Suite *su)
{
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr), ran = srunner_ntests_run(sr);
    srunner_free(sr);
    if (ran == 0) {
        fprintf(stderr, "check_run: no test case ran (CK_RUN_CASE=%s, CK_RUN_SUITE=%s)\n",
                getenv("CK_RUN_CASE") ? getenv("CK_RUN_CASE") : "", getenv("CK_RUN_SUITE") ? getenv("CK_RUN_SUITE") : "");
        return EXIT_FAILURE;
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
