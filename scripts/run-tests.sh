#!/usr/bin/env bash
# Sets up, builds and runs every hakmem test (unit, API, threads, real programs under LD_PRELOAD).
# Usage: scripts/run-tests.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}

scripts/deps.sh test
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build"
meson test -C "$build" --print-errorlogs
