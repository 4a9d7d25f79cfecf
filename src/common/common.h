/* The bottom layer, which every other may include: compiler attributes, sanitizer hooks
 * and misuse reports.  It includes nothing of hakmem's but the generated config.h. */
#ifndef HAK_COMMON_H
#define HAK_COMMON_H

#include "attrs.h"
#include "out.h"
#include "report.h"
#include "sanitize.h"

#endif
