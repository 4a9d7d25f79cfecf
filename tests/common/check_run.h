/* Runs a Check suite the way every hakmem test program does (mode and output from
 * CK_* variables) and turns the result into the process's exit status. */
#ifndef HAK_CHECK_RUN_H
#define HAK_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int check_run(Suite *su)
{
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
