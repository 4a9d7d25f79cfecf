/* Built against an installed hakmem (check-install.sh): its malloc must be hakmem's, linked
 * through hakmem.pc or with libhakmem.a.  hak_malloc_usable_size reports a block it did not
 * hand out on stderr, so a malloc left to glibc shows. */
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    char *p = malloc(100);
    size_t n = p ? hak_malloc_usable_size(p) : 0;
    printf("hakmem %s usable %s\n", hak_version(), n >= 100 ? "ok" : "bad");
    free(p);
    return n >= 100 ? 0 : 1;
}
