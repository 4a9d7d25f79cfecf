#!/usr/bin/env bash
# libhakmem-trace.so and hakmem-replay (docs/PROFILING.md, "Allocation traces"): the trace of
# trace_prog holds exactly its calls (not its child's), replays under glibc and under
# libhakmem.so to the same live blocks, and bad input gets one line and exit status 1.
# Usage: check-trace.sh TRACE_LIB REPLAY PROG LIBHAKMEM
set -u
lib=$1 replay=$2 prog=$3 hakmem=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/../common/preload.sh"

(preload_export "$lib"; HAKMEM_TRACE_OUT="$dir/t.%p.bin" exec "$prog") || fail "trace_prog failed under the recorder"
n=$(ls "$dir" | wc -l)
[ "$n" = 1 ] || fail "expected one trace (the child of fork records nothing), found $n: $(ls "$dir")"
trace=$(ls "$dir"/t.*.bin)

field() { sed -n "s/.* $1=\([0-9-]*\).*/\1/p" <<<"$2"; }
for pre in "" "$hakmem"; do
  out=$([ -z "$pre" ] || preload_export "$pre"; exec "$replay" "$trace") || fail "replay under '${pre:-glibc}' failed: $out"
  echo "${pre:-glibc}: $out"
  # 1000 mallocs, 500 frees, 100 reallocs, a calloc and a posix_memalign
  [ "$(field records "$out")" = 1602 ] || fail "records: $out"
  [ "$(field live_blocks "$out")" = 502 ] || fail "live blocks: $out"
  [ "$(field live_kb "$out")" = 4323 ] || fail "live bytes: $out"
  [ "$(field unmatched_frees "$out")" = 0 ] || fail "unmatched frees: $out"
  usable=$(field usable_kb "$out"); growth=$(field rss_growth_peak_kb "$out")
  [ "$usable" -ge 4323 ] || fail "usable below live: $out"
  [ "$growth" -ge 4000 ] || fail "every byte is written, so RSS grows by at least what is live: $out"
done

# --at: the first 1000 records are the mallocs, all live
out=$("$replay" --at 1000 "$trace") || fail "--at 1000: $out"
[ "$(field live_blocks "$out")" = 1000 ] || fail "--at 1000: $out"
"$replay" --dump "$dir/d.txt" "$trace" >/dev/null || fail "--dump"
[ "$(wc -l < "$dir/d.txt")" = 502 ] || fail "--dump wrote $(wc -l < "$dir/d.txt") lines, not 502"

# Bad input: one line on stderr, status 1 (2 for usage), never a crash.
printf 'not a trace at all\n' > "$dir/bad.bin"
err=$("$replay" "$dir/bad.bin" 2>&1 >/dev/null); st=$?
[ $st = 1 ] && [ "$(wc -l <<<"$err")" = 1 ] || fail "a file that is no trace: status $st, stderr: $err"
err=$("$replay" "$dir/missing.bin" 2>&1 >/dev/null); st=$?
[ $st = 1 ] || fail "a missing file: status $st, stderr: $err"
head -c 100 "$trace" > "$dir/cut.bin"       # a record cut short is not replayed
out=$("$replay" "$dir/cut.bin") || fail "a truncated trace: $out"
"$replay" >/dev/null 2>&1; [ $? = 2 ] || fail "no argument: not a usage error"
# A trace file that cannot be written: one line on stderr, and the program runs on.
err=$(preload_export "$lib"; HAKMEM_TRACE_OUT="$dir/no/such/dir/t.bin" exec "$prog" 2>&1); st=$?
[ $st = 0 ] && [ "$(wc -l <<<"$err")" = 1 ] || fail "an unwritable trace: status $st, stderr: $err"
echo "PASS"
