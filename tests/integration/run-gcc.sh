#!/bin/bash
# Integration: gcc (driver, cc1, as, collect2, ld all inherit LD_PRELOAD) under
# hakmem versus without.  Compiled binaries differ in bytes, so the program built
# in each mode is run in that mode and its behaviour (stdout, exit status) is
# compared; preprocessor and assembler output must be byte-identical.
# Usage: run-gcc.sh /path/to/libhakmem.so
# shellcheck source=common.sh disable=SC2317  # scenario functions are called indirectly
. "$(dirname "$0")/common.sh" "$@"

need_prog gcc /usr/bin/gcc gcc
GCC=$PROG
say "using $GCC ($("$GCC" -dumpfullversion 2>/dev/null))"
unset CPATH C_INCLUDE_PATH LIBRARY_PATH GCC_EXEC_PREFIX COMPILER_PATH

check_preloaded "$GCC" --version
check_preloaded "$("$GCC" -print-prog-name=cc1)" --version

scenario() {
    cp "$HERE/prog.c" "$HERE/headers.c" "$WORK/"
    printf 'struct s { int a; };\nint f(struct s *p) { return p->b + undeclared; }\nint g(void) { return "x" * 2; }\n' > "$WORK/bad.c"
    step preprocess "$GCC" -E headers.c
    step macros sh -c "\"\$1\" -E -dM headers.c | LC_ALL=C sort" sh "$GCC"
    step asm "$GCC" -O2 -S -o - prog.c
    step compile "$GCC" -O2 -Wall -Wextra -o prog prog.c
    step run ./prog
    step compile-O0 "$GCC" -O0 -g -o prog0 prog.c
    step run-O0 ./prog0
    step compile-headers "$GCC" -O1 -Wall -o hdr headers.c
    step run-headers ./hdr
    step errors "$GCC" -c -Wall bad.c
}
run_scenario scenario
# Diagnostics are deterministic too.
compare_stderr compile
compare_stderr errors
finish
