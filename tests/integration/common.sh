# Shared helper for the integration tests; sourced (not run) by run-*.sh.
# shellcheck disable=SC2034,SC2317  # variables used and functions called by the run-*.sh scripts
#
# A test script describes a scenario as a shell function made of `step` calls.
# run_scenario runs that scenario twice in the same scratch directory:
#   ref: without hakmem (LD_PRELOAD unset)
#   hak: with LD_PRELOAD=<libhakmem.so>
# and then compares, step by step, stdout (byte for byte) and the exit status.
# Under hakmem, stderr must not contain a line starting with "hakmem:" (how the
# allocator reports misuse).  Any difference is reported with a diff and the
# test exits 1.  A missing program makes the test exit 77 (Meson's "skip"), with
# the reason on stdout; under CI (CI=true) it is a failure instead (exit 1): there
# every expected test must run.
#
# Usage in a test script:
#   . "$(dirname "$0")/common.sh" "$@"
#   need_prog NAME [CANDIDATE...]     -> sets $PROG, or skips
#   my_scenario() { step init git init -q; step log git log; ... }
#   check_preloaded "$PROG" --version  (the child binds malloc to hakmem)
#   run_scenario my_scenario
#   finish
#
# Set HAK_IT_KEEP=1 to keep the scratch directory ($OUT has every step's
# stdout/stderr/exit status for both runs); HAK_IT_STEP_TIMEOUT (seconds, default
# 50) bounds each step (a hang's diagnosis; meson's own timeout bounds the test),
# times CK_TIMEOUT_MULTIPLIER (the factor scripts/run-tests.sh gives meson's
# --timeout-multiplier too; default 1).

set -u

SKIP=77
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME=$(basename "$0" .sh)
STEP_TIMEOUT=$(awk -v s="${HAK_IT_STEP_TIMEOUT:-50}" -v m="${CK_TIMEOUT_MULTIPLIER:-1}" \
    'BEGIN { t = s * m; printf "%d", t < 1 ? 1 : t }')

say()  { printf '%s: %s\n' "$TEST_NAME" "$*"; }
die()  { say "ERROR: $*"; exit 1; }
skip() {
    case ${CI:-} in
        true|1|yes) die "$* -- under CI every expected test must run (a skip is a failure there)" ;;
    esac
    say "SKIP: $*"
    exit "$SKIP"
}

if [ $# -lt 1 ] || [ -z "$1" ]; then
    die "usage: $0 /path/to/libhakmem.so"
fi
[ -f "$1" ] || die "library not found: $1"
# Absolute path: the steps run in another directory.
LIB=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")

# Do not inherit a preload (or a sanitizer runtime) from the caller.
unset LD_PRELOAD
# Deterministic, locale-independent output in both runs.
export LC_ALL=C LANG=C TZ=UTC
unset LANGUAGE

. "$HERE/../common/preload.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-it.XXXXXX") || die "mktemp -d failed"
cleanup() {
    if [ -n "${HAK_IT_KEEP:-}" ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
trap 'exit 141' PIPE
WORK=$TMP/work          # cwd of every step; the same path in both runs
OUT=$TMP/out            # $OUT/<mode>/<NN>-<name>.{out,err,rc,cmd}
export HOME=$TMP/home   # keep the user's dotfiles out of it
mkdir -p "$OUT/ref" "$OUT/hak" "$HOME"

FAILS=0
fail() { say "FAIL: $*"; FAILS=$((FAILS + 1)); }

# need_prog NAME [CANDIDATE...]: first executable candidate (absolute path or a
# name looked up in PATH); NAME itself is looked up when no candidate is given.
need_prog() {
    local name=$1 c p
    shift
    [ $# -gt 0 ] || set -- "$name"
    for c in "$@"; do
        case $c in
            /*) [ -x "$c" ] && { PROG=$c; return 0; } ;;
            *)  p=$(command -v "$c" 2>/dev/null) && [ -n "$p" ] && { PROG=$p; return 0; } ;;
        esac
    done
    skip "$name not found (tried: $*)"
}

MODE=
STEP_NO=0
STEP_NAMES=()

# step NAME CMD...         run CMD in $WORK in the current mode
# step_in FILE NAME CMD... same, with stdin from FILE
step() { step_in /dev/null "$@"; }
step_in() {
    local input=$1 name=$2 base rc
    shift 2
    STEP_NO=$((STEP_NO + 1))
    base=$OUT/$MODE/$(printf '%02d' "$STEP_NO")-$name
    [ "$MODE" = ref ] && STEP_NAMES+=("$(printf '%02d' "$STEP_NO")-$name")
    printf '%q ' "$@" > "$base.cmd"
    if [ "$MODE" = hak ]; then
        (cd "$WORK" && preload_export "$LIB" && exec timeout -k 5 "$STEP_TIMEOUT" "$@") \
            < "$input" > "$base.out" 2> "$base.err"
    else
        (cd "$WORK" && exec timeout -k 5 "$STEP_TIMEOUT" "$@") \
            < "$input" > "$base.out" 2> "$base.err"
    fi
    rc=$?
    echo "$rc" > "$base.rc"
    return 0
}

# run_scenario FUNC: run FUNC without and with hakmem, then compare every step.
run_scenario() {
    local func=$1 mode s r h rrc hrc
    for mode in ref hak; do
        MODE=$mode
        STEP_NO=0
        rm -rf "$WORK"
        mkdir -p "$WORK"
        "$func"
    done
    rm -rf "$WORK"
    for s in "${STEP_NAMES[@]}"; do
        r=$OUT/ref/$s
        h=$OUT/hak/$s
        if [ ! -e "$h.rc" ]; then
            fail "step $s did not run under hakmem"
            continue
        fi
        rrc=$(cat "$r.rc")
        hrc=$(cat "$h.rc")
        local ok=1
        if [ "$rrc" -ne 0 ]; then
            # The reference run itself failing means the test is broken, not hakmem.
            say "note: step $s exits $rrc without hakmem as well (compared as is)"
        fi
        if [ "$rrc" != "$hrc" ]; then
            fail "step $s: exit status $hrc under hakmem, $rrc without (cmd: $(cat "$h.cmd"))"
            [ "$hrc" = 124 ] || [ "$hrc" = 137 ] && say "  (timed out after ${STEP_TIMEOUT}s under hakmem)"
            ok=0
        fi
        if ! cmp -s "$r.out" "$h.out"; then
            fail "step $s: stdout differs under hakmem (cmd: $(cat "$h.cmd"))"
            say "  sizes: without $(wc -c < "$r.out") bytes, with $(wc -c < "$h.out") bytes"
            diff -u --label "without-hakmem/$s" --label "with-hakmem/$s" \
                "$r.out" "$h.out" | head -n 60 | sed 's/^/    /'
            cmp "$r.out" "$h.out" 2>&1 | sed 's/^/    /'
            ok=0
        fi
        if grep -q '^hakmem:' "$h.err"; then
            fail "step $s: hakmem reported misuse on stderr (cmd: $(cat "$h.cmd"))"
            grep '^hakmem:' "$h.err" | head -n 20 | sed 's/^/    /'
            ok=0
        fi
        if [ "$ok" = 0 ]; then
            say "  stderr without hakmem (first lines):"
            head -n 15 "$r.err" | sed 's/^/    /'
            say "  stderr with hakmem (first lines):"
            head -n 15 "$h.err" | sed 's/^/    /'
        else
            say "ok: $s ($(wc -c < "$h.out") bytes of stdout, exit $hrc)"
        fi
    done
}

# compare_stderr STEP: also require byte-identical stderr for one step (for
# programs whose diagnostics are deterministic, e.g. gcc warnings).
compare_stderr() {
    local s
    for s in "${STEP_NAMES[@]}"; do
        case $s in
            [0-9][0-9]-"$1")
                if ! cmp -s "$OUT/ref/$s.err" "$OUT/hak/$s.err"; then
                    fail "step $s: stderr differs under hakmem"
                    diff -u --label "without-hakmem/$s.err" --label "with-hakmem/$s.err" \
                        "$OUT/ref/$s.err" "$OUT/hak/$s.err" | head -n 40 | sed 's/^/    /'
                else
                    say "ok: $s stderr identical"
                fi ;;
        esac
    done
}

# check_preloaded CMD...: run CMD under hakmem with LD_DEBUG=bindings and require
# that the dynamic linker bound malloc and free to libhakmem.so, so the test
# cannot pass because the preload was silently ignored.
check_preloaded() {
    local log=$TMP/bindings.log sym
    # exec from a subshell: no wrapper (timeout, env) whose own bindings would
    # be logged, so only the program itself is judged.
    (cd "$TMP" && export LD_DEBUG=bindings && preload_export "$LIB" && exec "$@") \
        > /dev/null 2> "$log" < /dev/null || true
    for sym in malloc free; do
        if ! grep -F "to $LIB " "$log" | grep -q "symbol \`$sym'"; then
            fail "$(basename "$1") under LD_PRELOAD did not bind $sym to $LIB"
            grep -E "symbol \`$sym'" "$log" | head -n 5 | sed 's/^/    /'
            return
        fi
    done
    say "ok: $(basename "$1") binds malloc/free to $(basename "$LIB")"
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        say "$FAILS failure(s)"
        exit 1
    fi
    say "PASS"
    exit 0
}
