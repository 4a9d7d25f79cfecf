#!/usr/bin/env bash
# Instructions per malloc+free pair on the SSOT benchmark, counted by callgrind (exact and
# repeatable, unlike time on a shared machine): the allocator's share of each step.
# Usage: scripts/callgrind-counts.sh [STEPS] [LABEL=PRELOAD[:ENV=VAL,...] ...]
#   with no LABELs: glibc, hakmem (build/), its config/ variants, and the installed peers.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-1000000}
shift || true
# The peers' libraries are in the multiarch folder: /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu...
multiarch=$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || true)
lib=/usr/lib${multiarch:+/$multiarch}
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  specs=("glibc=" "hakmem=$PWD/build/libhakmem.so")
  for p in 90 91; do
    specs+=("hakmem:phase$p-off=$PWD/build/libhakmem.so:HAKMEM_PHASE$p=off")
  done
  for c in phases-off slots-off slots-all slots-c5; do
    specs+=("hakmem:$c=$PWD/build/libhakmem.so:HAKMEM_CONFIG=$PWD/config/$c.ini")
  done
  for p in mimalloc:libmimalloc.so.2 jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4; do
    [ -f "$lib/${p#*:}" ] && specs+=("${p%%:*}=$lib/${p#*:}")
  done
fi
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
bench=build/bench/ssot
out=$(mktemp -d)
# The benchmark loop's own instructions, the same under every allocator: main() under glibc.
printf '| allocator | total Ir | Ir in malloc+free per pair | Ir per step (incl. loop) |\n|---|---:|---:|---:|\n'
for spec in "${specs[@]}"; do
  label=${spec%%=*} rest=${spec#*=}
  preload=${rest%%:*} envs=""
  [ "$rest" != "$preload" ] && envs=${rest#*:}
  IFS=, read -r -a envarr <<< "$envs"
  env ${envarr[@]+"${envarr[@]}"} LD_PRELOAD="$preload" valgrind --tool=callgrind \
    --callgrind-out-file="$out/cg.out" "$bench" "$steps" >/dev/null 2>"$out/err" || { echo "| $label | FAIL | | |"; continue; }
  total=$(awk '/^summary:/ {print $2}' "$out/cg.out")
  main=$(callgrind_annotate "$out/cg.out" 2>/dev/null | awk '/:main / || /:main$/ {gsub(",", "", $1); print $1; exit}')
  alloc=$(( total - ${main:-0} ))
  printf '| %s | %s | %.1f | %.1f |\n' "$label" "$total" "$(echo "$alloc / $steps" | bc -l)" "$(echo "$total / $steps" | bc -l)"
done
rm -rf "$out"
