#!/usr/bin/env bash
# Soak test: hakmem-stress with 4 threads for a long time, fixed seed.
#
#   tests/stress/soak.sh [MINUTES]      (default 30)
#
# Builds first if needed (build dir: $BUILD_DIR, default build/), then runs
#   hakmem-stress --threads 4 --seconds MINUTES*60 --seed 0x5eed --report 60 --hang 120
# printing a progress line every minute and the summary line at the end.
# Exit status: that of hakmem-stress (0 = no checksum mismatch, crash, hang,
# "hakmem:" report or unbounded RSS).  Extra arguments after MINUTES go to
# hakmem-stress (e.g. --seed 7, --threads 8).
set -euo pipefail
cd "$(dirname "$0")/../.."
minutes=${1:-30}
shift || true
case $minutes in
    ''|*[!0-9.]*) echo "usage: $0 [MINUTES] [hakmem-stress options]" >&2; exit 2 ;;
esac
build=${BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build" tests/stress/hakmem-stress
seconds=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
echo "soak: $minutes min, 4 threads, seed 0x5eed ($build/tests/stress/hakmem-stress)"
exec "$build/tests/stress/hakmem-stress" --threads 4 --seconds "$seconds" --seed 0x5eed \
    --report 60 --hang 120 "$@"
