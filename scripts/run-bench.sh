#!/usr/bin/env bash
# Sets up, builds and runs the main job: the SSOT benchmark under hakmem beside glibc
# and every other allocator installed (mimalloc, jemalloc, tcmalloc), interleaved, medians.
# Usage: scripts/run-bench.sh [compare.sh options, e.g. -n 7 -s 20000000]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh bench
[ -f build/build.ninja ] || meson setup build
ninja -C build
bench/compare.sh "$@" build
