#!/usr/bin/env bash
# Sets up, builds and runs every hakmem test: the default build's whole suite, the hardened
# build, ASan+UBSan and TSan over the hak_* API, and the libFuzzer targets; prints one summary.
set -uo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/run-tests.sh [--quick | --options] [--help]

Installs the Debian packages the tests need (as root; otherwise prints the apt-get command),
then builds and tests each configuration in its own directory:

  build           the default build: unit, policy, API, threads, real programs under
                  LD_PRELOAD, phase equivalence, stress, CPython's own tests
  build-hardened  -Dhardened=true
  build-asan      ASan + UBSan over the hak_* API
  build-tsan      TSan over the hak_* API
  build-fuzz      clang, libFuzzer targets (suite fuzz)
  TMPDIR/hakmem odd.XXXXXX/D phase91=true          -Dphase91=true
  TMPDIR/hakmem odd.XXXXXX/b=observe no-prof      -Dobserve=true -Dprof=disabled
                  build directories as users name them (outside the tree, a space and an
                  '=' in the path), with the suites that depend on paths and options: api,
                  policy, integration, tools (and equivalence, prof in the first); removed
                  afterwards

  --quick   the default build only
  --options the option matrix, run before a release: each Meson option a user may set on
            its own (every phaseNN away from its default, observe, hardened, prof=disabled),
            in a build directory of its own with a space and an '=' in its path; whole suite
  --help    this text

A configuration that fails to set up or build counts as one failure and the others still
run. Counts come from each meson test's testlog.json; the summary names every skipped test
and every retried one (regrtest's timing-sensitive modules). Under CI (CI=true) a skipped
test is a failure: every expected test must run there (and meson setup fails when a tool
the tests need is missing).  Exit status 0 only when nothing failed.

Timeouts: HAK_TIMEOUT_MULTIPLIER (default 1) is given to meson test --timeout-multiplier
and, as CK_TIMEOUT_MULTIPLIER, to Check's per-test timeouts and the deadlines inside the
tests (integration steps, regrtest runs, fork children), so a loaded machine scales them
all at once.
EOF
}

quick=0 options=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    --options) options=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run-tests.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.." || exit 1
scripts/deps.sh test || exit 1

strict_skips=0
case ${CI:-} in true|1|yes) strict_skips=1 ;; esac
mult=${HAK_TIMEOUT_MULTIPLIER:-1}
export CK_TIMEOUT_MULTIPLIER=$mult

passed=0 failed=0 skipped=0
report=()

# Counts the results in DIR's testlog.json: prints "ok fail skip", then a line naming the
# skipped tests, then one naming the tests that retried something (a "RETRY:" line).
count_results() {
  python3 - "$1/meson-logs/testlog.json" <<'EOF'
import json, sys
ok = fail = skip = 0
skipped, retried = [], []
with open(sys.argv[1]) as f:
    for line in f:
        if not line.strip():
            continue
        t = json.loads(line)
        r = t["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            ok += 1
        elif r == "SKIP":
            skip += 1
            skipped.append(t["name"])
        else:  # FAIL, TIMEOUT, UNEXPECTEDPASS, ERROR, INTERRUPT
            fail += 1
        if any(": RETRY: " in l and "once more" in l for l in (t.get("stdout") or "").splitlines()):
            retried.append(t["name"])
print(ok, fail, skip)
print(" ".join(skipped) or "-")
print(" ".join(retried) or "-")
EOF
}

# run DIR [meson setup options] [-- meson test options]: sets DIR up (again, from scratch, if
# it was set up with other options or another compiler), builds it and runs its tests.
run() {
  local dir=$1; shift
  local -a setup=() tests=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do setup+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  tests=("$@")
  local base="CC=${CC:-cc} ${setup[*]:-}" stamp old
  stamp=$base
  [ "$strict_skips" = 1 ] && stamp+=" (CI)"    # meson setup reads CI: which tools are required
  echo "=== $dir: meson setup ${setup[*]:-} ; meson test ${tests[*]:-}"
  old=$(cat "$dir/.run-tests-setup" 2>/dev/null)
  if [ -f "$dir/build.ninja" ] && [ "$old" != "$stamp" ]; then
    if [ "${old% (CI)}" = "$base" ]; then
      echo "$dir was set up with CI=${CI:-} differing; reconfiguring"
      if ! meson setup --reconfigure "$dir" "${setup[@]}"; then
        report+=("$dir: SETUP FAILED"); failed=$((failed + 1)); return 1
      fi
      printf '%s' "$stamp" > "$dir/.run-tests-setup"
    else
      echo "$dir was set up with other options; setting it up again"
      rm -rf "$dir"
    fi
  fi
  if [ ! -f "$dir/build.ninja" ]; then
    if ! meson setup "$dir" "${setup[@]}"; then
      report+=("$dir: SETUP FAILED"); failed=$((failed + 1)); return 1
    fi
    printf '%s' "$stamp" > "$dir/.run-tests-setup"
  fi
  if ! ninja -C "$dir"; then
    report+=("$dir: BUILD FAILED"); failed=$((failed + 1)); return 1
  fi
  rm -f "$dir/meson-logs/testlog.json"
  local rc=0
  meson test -C "$dir" --print-errorlogs --timeout-multiplier "$mult" "${tests[@]}" || rc=$?
  if [ ! -s "$dir/meson-logs/testlog.json" ]; then
    report+=("$dir: NO TESTS RAN (meson test exit $rc)"); failed=$((failed + 1)); return 1
  fi
  local ok fail skip names retries
  { read -r ok fail skip; read -r names; read -r retries; } < <(count_results "$dir")
  if [ $((ok + fail + skip)) -eq 0 ]; then
    report+=("$dir: NO TESTS RAN (meson test exit $rc)"); failed=$((failed + 1)); return 1
  fi
  # meson test fails for a reason testlog.json did not record: count it rather than lose it.
  if [ $rc -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
  local line="$dir: $ok passed, $fail failed, $skip skipped"
  [ "$names" != - ] && line+=" (skipped: $names)"
  [ "$retries" != - ] && line+=" (retried once, see its log: $retries)"
  if [ "$strict_skips" = 1 ] && [ "$skip" -gt 0 ]; then
    line+=" (skips are failures under CI)"
    fail=$((fail + skip))
  fi
  report+=("$line")
  passed=$((passed + ok)); failed=$((failed + fail)); skipped=$((skipped + skip))
  [ "$fail" -eq 0 ]
}

# Build directories named as users name them: outside the tree, a space and an '=' in the path.
if [ $quick -eq 0 ]; then
  odd=$(mktemp -d "${TMPDIR:-/tmp}/hakmem odd.XXXXXX") || exit 1
  trap 'rm -rf "$odd"' EXIT
fi
path_suites=(--suite api --suite policy --suite integration --suite tools)

if [ $options -eq 1 ]; then
  # Each option on its own, flipped from its default in meson_options.txt (tests and fuzz
  # choose the suite itself), and the seed's own example, -Dphase91=true.
  mapfile -t flips < <(sed -nE "s/^option\('([a-z0-9_]+)', type: '(boolean|feature)', value: '?([a-z]+)'?.*/\1 \2 \3/p" \
    meson_options.txt | while read -r name kind value; do
      case $name:$kind:$value in
        tests:*|fuzz:*) ;;
        *:boolean:true) echo "-D$name=false" ;;
        *:boolean:false) echo "-D$name=true" ;;
        *:feature:disabled) echo "-D$name=enabled" ;;
        *:feature:*) echo "-D$name=disabled" ;;
      esac
    done)
  for opt in -Dphase91=true "${flips[@]}"; do
    run "$odd/D ${opt#-D}" "$opt"
  done
else
  run build
fi
if [ $quick -eq 0 ] && [ $options -eq 0 ]; then
  run "$odd/D phase91=true" -Dphase91=true -- "${path_suites[@]}" --suite equivalence --suite prof
  run "$odd/b=observe no-prof" -Dobserve=true -Dprof=disabled -- "${path_suites[@]}"
  run build-hardened -Dhardened=true -- --no-suite equivalence --no-suite regrtest
  run build-asan -Db_sanitize=address,undefined -Db_lundef=false
  run build-tsan -Db_sanitize=thread -Db_lundef=false -- --suite sanitize
  CC=clang run build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -- --suite fuzz
fi

echo
printf '%s\n' "${report[@]}"
echo "hakmem: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
