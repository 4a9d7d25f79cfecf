/* Preprocessed (gcc -E) by run-gcc.sh: output must not depend on the allocator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQUARE(x) ((x) * (x))
#define STR(x) #x
#define XSTR(x) STR(x)

int main(void)
{
    char *s = malloc(SQUARE(4));
    strcpy(s, XSTR(SQUARE(3)));
    printf("%s %d\n", s, EXIT_SUCCESS);
    free(s);
    return EXIT_SUCCESS;
}
