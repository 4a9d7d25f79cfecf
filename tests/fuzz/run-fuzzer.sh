#!/bin/bash
# Runs a libFuzzer target on a committed corpus without touching the repository.
#
#   run-fuzzer.sh FUZZER CORPUS_DIR ARTIFACT_DIR BUDGET [libFuzzer flags...]
#
# BUDGET:
#   runs:N       fuzz for N inputs (-runs=N, the corpus replay included): the same work
#                however loaded the machine is (the suite's live fuzzing)
#   SECONDS > 0  fuzz for that long (-max_total_time; long manual sessions)
#   0            replay every corpus input once (-runs=0)
#   crashes:PFX  CORPUS_DIR holds reproducers (tests/fuzz/crashes/): replay each file
#                named PFX-* once; every one must now pass.  None is a pass, said so.
# A failure exits 1 (libFuzzer's own default, 77, would read as "skipped" to meson).
# libFuzzer writes new inputs into the FIRST corpus directory it is given, so that one is a
# fresh temporary directory and the committed corpus comes second (read only).  A crash,
# leak, timeout or out-of-memory input is kept as ARTIFACT_DIR/<kind>-<sha1> and its path
# printed; minimise it with  FUZZER -minimize_crash=1 -runs=10000 FILE .
# An input's timeout (-timeout, 25 s) is scaled by CK_TIMEOUT_MULTIPLIER, the factor
# scripts/run-tests.sh also gives meson's --timeout-multiplier.
set -u
fuzzer=$1 corpus=$2 artifacts=$3 budget=$4
shift 4
[ -d "$corpus" ] || { echo "run-fuzzer: no corpus directory $corpus" >&2; exit 1; }
mkdir -p "$artifacts" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hak-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
input_timeout=$(awk -v m="${CK_TIMEOUT_MULTIPLIER:-1}" 'BEGIN { t = 25 * m; printf "%d", t < 1 ? 1 : t }')
common=(-rss_limit_mb=2048 -timeout="$input_timeout" -error_exitcode=1 -timeout_exitcode=1)

case $budget in
  crashes:*)
    prefix=${budget#crashes:}
    files=()
    for f in "$corpus/$prefix"-*; do
      [ -f "$f" ] && files+=("$f")
    done
    if [ ${#files[@]} -eq 0 ]; then
      echo "run-fuzzer: $(basename "$fuzzer"): no reproducer $prefix-* in $corpus: nothing to replay"
      exit 0
    fi
    echo "run-fuzzer: $(basename "$fuzzer"): replaying ${#files[@]} reproducer(s): ${files[*]##*/}"
    # Files, not a directory: libFuzzer runs each once and exits non-zero on the first failure.
    "$fuzzer" "${common[@]}" -artifact_prefix="$artifacts/" "$@" "${files[@]}"
    rc=$?
    echo "run-fuzzer: $(basename "$fuzzer"): reproducers exit $rc"
    exit $rc ;;
  runs:*)
    mode=(-runs="${budget#runs:}") ;;
  0)
    mode=(-runs=0) ;;
  *[!0-9]*|'')
    echo "run-fuzzer: bad budget '$budget' (runs:N, SECONDS, 0 or crashes:PREFIX)" >&2; exit 1 ;;
  *)
    mode=(-max_total_time="$budget") ;;
esac

before=$(find "$corpus" -type f | wc -l)
"$fuzzer" "${mode[@]}" "${common[@]}" -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$@" "$tmp" "$corpus"
rc=$?
new=$(find "$tmp" -type f | wc -l)
echo "run-fuzzer: $(basename "$fuzzer"): exit $rc; corpus $before committed inputs, $new new (discarded)"
if [ $rc -ne 0 ]; then
  for f in "$artifacts"/*; do
    [ -f "$f" ] && [ "$f" -nt "$tmp" ] && echo "run-fuzzer: reproducer kept: $f"
  done
fi
exit $rc
