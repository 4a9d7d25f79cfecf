#!/usr/bin/env bash
# The main job: installs what the benchmarks need, builds hakmem Standard (build/) and FAST PGO
# (build-pgo/, scripts/pgo.sh), then runs every benchmark and the real applications (redis, sqlite3,
# python3, lua5.4, z3, gs, gcc) under glibc, mimalloc, jemalloc, tcmalloc and both hakmem builds
# (`hakmem compare --suite all`: interleaved runs, medians, table, charts).
# Usage: scripts/run-bench.sh [--no-pgo] [hakmem compare options, e.g. --runs 7 --suite bench --apps redis,gs]
set -euo pipefail
cd "$(dirname "$0")/.."

pgo=1
out=""
suite=""
args=()
prev=""
for a in "$@"; do
  case $a in
    -h|--help)
      sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
      echo "Other options go to hakmem compare (build/tools/hakmem compare --help lists them)."
      exit 0 ;;
    --no-pgo) pgo=0 ;;
    *) args+=("$a") ;;
  esac
  case $prev in --out) out=$a ;; esac
  case $a in --out=*) out=${a#--out=} ;; --suite|--suite=*) suite=given ;; esac
  prev=$a
done
# Chosen here rather than by `hakmem compare` so that the last line can name it.
if [ -z "$out" ]; then
  out=results/$(date +%Y%m%d-%H%M%S)
  args+=(--out "$out")
fi

[ -n "$suite" ] || args+=(--suite all)

scripts/deps.sh bench
# Without root a missing application is not fatal here: compare names its package, runs the
# others and exits non-zero at the end.
scripts/deps.sh apps || echo "run-bench.sh: going on; compare skips the applications that are not installed" >&2
[ -f build/build.ninja ] || meson setup build
ninja -C build
if [ "$pgo" = 1 ]; then
  scripts/pgo.sh
else
  echo "hakmem FAST PGO: not built (--no-pgo)" >&2
  args+=(--no-pgo)
fi
# A failed cell or a missing application makes compare exit non-zero after writing its report.
rc=0
build/tools/hakmem compare "${args[@]}" || rc=$?
echo
echo "results: $out/report.md (tables), $out/throughput.svg and $out/peak_rss.svg (charts), $out/raw.csv and $out/summary.csv"
exit $rc
