#!/usr/bin/env bash
# Sets up, builds and runs every hakmem test: the default build's whole suite (unit, policy,
# API, threads, real programs, equivalence, stress), the hardened build, AddressSanitizer +
# UBSan and ThreadSanitizer over the hak_* API, and a short libFuzzer run.
# Usage: scripts/run-tests.sh [--quick]   (--quick: the default build only)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
scripts/deps.sh test

passed=0 failed=0
# Builds DIR with the given options (once) and runs its tests; tallies Ok/Fail.
run() {
  local dir=$1; shift
  local -a setup=() tests=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do setup+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  tests=("$@")
  echo "=== $dir: meson setup ${setup[*]:-} ; meson test ${tests[*]:-}"
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "${setup[@]}"
  ninja -C "$dir"
  local log rc=0
  log=$(mktemp)
  meson test -C "$dir" --print-errorlogs "${tests[@]}" | tee "$log" || rc=$?
  passed=$((passed + $(awk '/^Ok:/ {print $2}' "$log")))
  failed=$((failed + $(awk '/^(Fail|Timeout|Unexpected Pass):/ {s += $NF} END {print s + 0}' "$log")))
  rm -f "$log"
  return $rc
}

status=0
run build || status=1
if [ $quick -eq 0 ]; then
  run build-hardened -Dhardened=true -- --no-suite equivalence --no-suite regrtest || status=1
  run build-asan -Db_sanitize=address,undefined -Db_lundef=false || status=1
  run build-tsan -Db_sanitize=thread -Db_lundef=false -- --suite sanitize || status=1
  CC=clang run build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -- --suite fuzz || status=1
fi
echo "hakmem tests: $passed passed, $failed failed"
exit $status
