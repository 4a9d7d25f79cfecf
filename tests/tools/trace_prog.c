/* A program whose malloc calls are known, for check-trace.sh: 1,000 blocks of 24..16,008 B,
 * every odd one freed, 100 grown by realloc, a calloc, an aligned block and a fork whose
 * child allocates (not recorded).  No stdio: its buffers would be blocks of their own. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    static char *p[1000];
    for (int i = 0; i < 1000; i++) {
        p[i] = malloc((size_t)i * 16 + 24);
        if (p[i] == NULL)
            return 1;
        memset(p[i], i, (size_t)i * 16 + 24);
    }
    for (int i = 1; i < 1000; i += 2)
        free(p[i]);
    for (int i = 0; i < 200; i += 2) {
        char *q = realloc(p[i], (size_t)i * 16 + 24 + 4096);
        if (q == NULL)
            return 1;
        p[i] = q;
    }
    void *c = calloc(100, 40), *a = NULL;
    if (c == NULL || posix_memalign(&a, 4096, 10000) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        void *x = malloc(1 << 20);
        _exit(x == NULL);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 1;
    return 0;
}
