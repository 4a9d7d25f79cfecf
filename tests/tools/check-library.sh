#!/usr/bin/env bash
# The library's reports as users of mimalloc and glibc expect them: HAKMEM_STATS=1 prints the
# process totals at exit in every build, HAKMEM_VERBOSE=1 says once what the process runs with
# and which INI file (by absolute path) it came from, even after the program changed directory.
# Usage: check-library.sh TOOL LIBHAKMEM SRCDIR VERSION
source "$(dirname "$0")/checks.sh" "$@"
true_bin=$(type -P true)

# HAKMEM_STATS=1 and [stats] enabled = on: the totals at exit, once per process
(preload_export "$lib"; HAKMEM_STATS=1 exec "$true_bin") 2>"$tmp/err"
[ "$(grep -c "^hakmem $version totals (pid " "$tmp/err")" -eq 1 ] || fail "HAKMEM_STATS=1: $(cat "$tmp/err")"
for row in mapped resident 'in use' retained purged peak heaps 'large blocks'; do
  grep -q "^  $row " "$tmp/err" || fail "HAKMEM_STATS=1: no '$row' row"
done
printf '[stats]\nenabled = on\n' >"$tmp/stats.ini"
(preload_export "$lib"; HAKMEM_CONFIG=$tmp/stats.ini exec "$true_bin") 2>"$tmp/err"
grep -q "^hakmem $version totals" "$tmp/err" || fail "[stats] enabled = on: $(cat "$tmp/err")"
(preload_export "$lib"; exec "$true_bin") 2>"$tmp/err"
! [ -s "$tmp/err" ] || fail "the totals without HAKMEM_STATS: $(cat "$tmp/err")"

# HAKMEM_STATS_OUTPUT=FILE (%p: the pid): the totals there, nothing on stderr
(preload_export "$lib"; HAKMEM_STATS=1 HAKMEM_STATS_OUTPUT="$tmp/st.%p.txt" exec "$true_bin") 2>"$tmp/err"
files=$(ls "$tmp" | grep -c '^st\.[0-9]*\.txt$')
[ "$files" -eq 1 ] && grep -q "^hakmem $version totals (pid " "$tmp"/st.*.txt && ! [ -s "$tmp/err" ] \
  || fail "HAKMEM_STATS_OUTPUT: $files files, stderr '$(cat "$tmp/err")'"
# HAKMEM_STATS_SIGNAL=USR2: the totals at once, and the program goes on (the signal would end it)
out=$(preload_export "$lib"; HAKMEM_STATS_SIGNAL=USR2 exec sh -c 'kill -USR2 $$; echo alive' 2>"$tmp/err")
[ "$out" = alive ] && [ "$(grep -c "^hakmem $version totals (pid " "$tmp/err")" -eq 1 ] && grep -q '^  resident ' "$tmp/err" \
  || fail "HAKMEM_STATS_SIGNAL=USR2: out '$out', err '$(cat "$tmp/err")'"
(preload_export "$lib"; HAKMEM_STATS_SIGNAL=HUP exec "$true_bin") 2>"$tmp/err"
[ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q 'signal: expected USR1, USR2 or none' "$tmp/err" \
  || fail "HAKMEM_STATS_SIGNAL=HUP: '$(cat "$tmp/err")'"

# HAKMEM_VERBOSE=1: version, each setting's source (the INI file by absolute path), phases
cd "$src"
HAKMEM_VERBOSE=1 HAKMEM_SLOTS_CAPACITY=32 "$tool" run --config config/lean.ini -- sh -c "cd / && exec $true_bin" 2>"$tmp/err"
grep -q 'cannot open' "$tmp/err" && fail "a child that changed directory lost the INI file: $(cat "$tmp/err")"
[ "$(grep -c "^hakmem: version $version, pid " "$tmp/err")" -eq 2 ] || fail "HAKMEM_VERBOSE=1 not once per process: $(cat "$tmp/err")"
[ "$(grep -c "INI file $src/config/lean.ini\$" "$tmp/err")" -eq 2 ] || fail "HAKMEM_VERBOSE=1 names no absolute INI file: $(cat "$tmp/err")"
grep -q "purge.retain *= 0 *(ini $src/config/lean.ini:[0-9]*)" "$tmp/err" || fail "HAKMEM_VERBOSE=1: no INI line for purge.retain"
grep -q 'slots.capacity *= 32 *(env HAKMEM_SLOTS_CAPACITY)' "$tmp/err" || fail "HAKMEM_VERBOSE=1: no variable for slots.capacity"
# whichever phases this build compiles in (a -Dphase91=false build runs phase91 off)
grep -qE 'phases\.phase91 *= (on|off) *\(default\)' "$tmp/err" || fail "HAKMEM_VERBOSE=1: no default for phase91"
grep -qE '^hakmem: compiled in: .*phase[0-9]+.*; compiled out:' "$tmp/err" || fail "HAKMEM_VERBOSE=1: no compiled-in phases"
(preload_export "$lib"; HAKMEM_VERBOSE=1 HAKMEM_CONFIG=config/lean.ini exec "$true_bin") 2>"$tmp/err"
grep -q "INI file $src/config/lean.ini\$" "$tmp/err" || fail "a relative HAKMEM_CONFIG is not reported by its absolute path"
(preload_export "$lib"; HAKMEM_CONFIG=config/lean.ini exec "$true_bin") 2>"$tmp/err"
! [ -s "$tmp/err" ] || fail "reports without HAKMEM_VERBOSE: $(cat "$tmp/err")"

checks_done "library reports"
