#!/usr/bin/env bash
# The main job: installs what the benchmarks need, builds hakmem Standard (build/) and FAST PGO
# (build-pgo/, scripts/pgo.sh), then runs every benchmark under glibc, mimalloc, jemalloc,
# tcmalloc and both hakmem builds (`hakmem compare`: interleaved runs, medians, table, charts).
# Usage: scripts/run-bench.sh [--no-pgo] [hakmem compare options, e.g. --runs 7 --benches ssot,larson]
set -euo pipefail
cd "$(dirname "$0")/.."

pgo=1
out=""
args=()
prev=""
for a in "$@"; do
  case $a in
    --no-pgo) pgo=0 ;;
    *) args+=("$a") ;;
  esac
  case $prev in --out) out=$a ;; esac
  case $a in --out=*) out=${a#--out=} ;; esac
  prev=$a
done
# Chosen here rather than by `hakmem compare` so that the last line can name it.
if [ -z "$out" ]; then
  out=results/$(date +%Y%m%d-%H%M%S)
  args+=(--out "$out")
fi

scripts/deps.sh bench
[ -f build/build.ninja ] || meson setup build
ninja -C build
if [ "$pgo" = 1 ]; then
  scripts/pgo.sh
else
  echo "hakmem FAST PGO: not built (--no-pgo)" >&2
  args+=(--no-pgo)
fi
build/tools/hakmem compare "${args[@]}"
echo
echo "results: $out/report.md (tables), $out/throughput.svg and $out/peak_rss.svg (charts), $out/raw.csv and $out/summary.csv"
