/* Misuse reports, at the bottom so every layer may call them: one line on stderr naming the
 * call, the pointer, the block and the fault; then the call is refused, or the process aborts. */
#ifndef HAK_COMMON_REPORT_H
#define HAK_COMMON_REPORT_H

#include <stddef.h>

/* What a report says of the block: a size class (cls >= 0, with its size), or a kind. */
enum { REPORT_NO_BLOCK = -1, REPORT_MID_BLOCK = -2, REPORT_LARGE_BLOCK = -3 };

/* Never allocates (write(2) and a local formatter), so it is safe on every path. */
void report_misuse(const char *call, const void *p, const char *what, int cls, size_t size);

/* The policy's [safety] on_misuse: 1 aborts after each report.  Set by the policy layer
 * whenever a policy is installed. */
void report_set_abort(int on);

#endif
