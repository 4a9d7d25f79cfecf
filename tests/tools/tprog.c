/* A small program with one behaviour per mode, for the tests of `hakmem measure`, `ab` and
 * `compare`: known memory use, a crash, a hang with a child, an exit status, env-dependent output. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every page written, through a volatile pointer: the compiler may drop an unread malloc+memset. */
static void touch(size_t mib)
{
    size_t len = mib << 20;
    volatile char *p = malloc(len);
    if (!p) {
        fprintf(stderr, "tprog: malloc(%zu MiB) failed\n", mib);
        exit(1);
    }
    for (size_t i = 0; i < len; i += 4096)
        p[i] = (char)i;
    free((void *)p);
}

static int usage(void)
{
    fprintf(stderr, "usage: tprog touch MIB | child-touch MIB | crash | hang PIDFILE | exit N | env NAME | ops N\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 2 && !strcmp(argv[1], "crash")))
        return usage();
    const char *mode = argv[1];
    if (!strcmp(mode, "touch")) {
        touch(strtoul(argv[2], NULL, 10));
        printf("touched %s MiB\n", argv[2]);
    } else if (!strcmp(mode, "child-touch")) {
        /* The memory is the child's: only a measure of the whole tree sees it. */
        pid_t pid = fork();
        if (pid == 0) {
            touch(strtoul(argv[2], NULL, 10));
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        printf("child touched %s MiB\n", argv[2]);
    } else if (!strcmp(mode, "crash")) {
        fprintf(stderr, "tprog: about to crash\n");
        fflush(stderr);
        raise(SIGSEGV);
    } else if (!strcmp(mode, "hang")) {
        /* Parent and child both sleep: a timeout must kill the whole group. */
        pid_t pid = fork();
        FILE *f = fopen(argv[2], "a");
        if (!f)
            return 1;
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        (void)pid;
        sleep(60);
    } else if (!strcmp(mode, "exit")) {
        fprintf(stderr, "tprog: exiting with status %s\n", argv[2]);
        return atoi(argv[2]);
    } else if (!strcmp(mode, "env")) {
        const char *v = getenv(argv[2]);
        printf("%s is %s\n", argv[2], v ? "set" : "unset");
    } else if (!strcmp(mode, "ops")) {
        printf("work done\nops_per_sec=%s\n", argv[2]);
    } else {
        return usage();
    }
    return 0;
}
