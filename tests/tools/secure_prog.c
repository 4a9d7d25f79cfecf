/* A program linked with libhakmem.a, for check-secure.sh: installed setuid, it must take no
 * HAKMEM_* setting from whoever runs it (secure_getenv), so it reports nothing. */
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *p = malloc(100);
    memset(p, 1, 100);
    free(p);
    return 0;
}
