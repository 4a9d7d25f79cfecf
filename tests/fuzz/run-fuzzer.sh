#!/bin/bash
# Runs a libFuzzer target on a committed corpus without touching the repository.
#
#   run-fuzzer.sh FUZZER CORPUS_DIR ARTIFACT_DIR SECONDS [libFuzzer flags...]
#
# SECONDS > 0: fuzz for that long.  SECONDS = 0: replay every corpus input once (-runs=0).
# A failure exits 1 (libFuzzer's own default, 77, would read as "skipped" to meson).
# libFuzzer writes new inputs into the FIRST corpus directory it is given, so that one is a
# fresh temporary directory and the committed corpus comes second (read only).  A crash,
# leak, timeout or out-of-memory input is kept as ARTIFACT_DIR/<kind>-<sha1> and its path
# printed; minimise it with  FUZZER -minimize_crash=1 -runs=10000 FILE .
set -u
fuzzer=$1 corpus=$2 artifacts=$3 seconds=$4
shift 4
[ -d "$corpus" ] || { echo "run-fuzzer: no corpus directory $corpus" >&2; exit 1; }
mkdir -p "$artifacts" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hak-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

before=$(find "$corpus" -type f | wc -l)
if [ "$seconds" -gt 0 ]; then
  mode=(-max_total_time="$seconds")
else
  mode=(-runs=0)
fi
"$fuzzer" "${mode[@]}" -rss_limit_mb=2048 -timeout=25 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
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
