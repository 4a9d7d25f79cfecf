#!/usr/bin/env bash
# compare.sh - runs the SSOT benchmark under glibc, hakmem and any installed mimalloc/jemalloc/tcmalloc,
# interleaved round by round; prints a Markdown summary table and saves raw runs to results/ssot-<date>.csv.
set -euo pipefail

usage() {
    echo "usage: $0 [-n RUNS] [-s STEPS] [BUILD_DIR]   (defaults: -n 7 -s 20000000 ./build)" >&2
    exit 2
}

runs=7
steps=20000000
while getopts "n:s:h" opt; do
    case $opt in
        n) runs=$OPTARG ;;
        s) steps=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -le 1 ]] || usage
[[ $runs =~ ^[1-9][0-9]*$ && $steps =~ ^[1-9][0-9]*$ ]] || usage
build_dir=${1:-./build}

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=$build_dir/bench/ssot
hakmem_lib=$build_dir/libhakmem.so
[[ -x $bench ]] || { echo "compare.sh: $bench not found; run: ninja -C $build_dir" >&2; exit 1; }
[[ -f $hakmem_lib ]] || { echo "compare.sh: $hakmem_lib not found; run: ninja -C $build_dir" >&2; exit 1; }
# Absolute, so LD_PRELOAD does not depend on the benchmark's working directory.
hakmem_lib=$(realpath "$hakmem_lib")

# Prints the path of the first of the given sonames the dynamic linker knows, or nothing.
find_lib() {
    local soname path dir
    for soname in "$@"; do
        path=$( (ldconfig -p 2>/dev/null || true) | awk -v n="$soname" '$1 == n { print $NF; exit }')
        # ldconfig may be missing from PATH for non-root users; fall back to the usual dirs.
        if [[ -z $path ]]; then
            for dir in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/local/lib; do
                [[ -f $dir/$soname ]] && { path=$dir/$soname; break; }
            done
        fi
        if [[ -n $path && -f $path ]]; then
            echo "$path"
            return
        fi
    done
}

names=(glibc hakmem)
libs=("" "$hakmem_lib")
add_if_found() {
    local name=$1 path
    shift
    path=$(find_lib "$@")
    if [[ -n $path ]]; then
        names+=("$name")
        libs+=("$path")
        echo "found $name: $path" >&2
    else
        echo "skipping $name: none of $* installed" >&2
    fi
}
add_if_found mimalloc libmimalloc.so.2 libmimalloc.so
add_if_found jemalloc libjemalloc.so.2 libjemalloc.so
# tcmalloc_minimal first: the full library adds heap-profiler hooks that are not
# part of the allocator being compared.
add_if_found tcmalloc libtcmalloc_minimal.so.4 libtcmalloc.so.4

mkdir -p "$repo_root/results"
csv=$repo_root/results/ssot-$(date +%Y%m%d-%H%M%S).csv
echo "round,allocator,library,ops_per_sec,seconds,steps,peak_rss_kb" > "$csv"
errf=$(mktemp)
trap 'rm -f "$errf"' EXIT

# Interleaving spreads slow drifts (thermal, noisy neighbours) evenly over all allocators
# instead of penalising whichever one happens to run during a bad stretch.
for ((round = 1; round <= runs; round++)); do
    for i in "${!names[@]}"; do
        name=${names[$i]}
        lib=${libs[$i]}
        printf '[round %d/%d] %-9s ' "$round" "$runs" "$name" >&2
        if ! line=$(env ${lib:+LD_PRELOAD="$lib"} "$bench" "$steps" 2>"$errf"); then
            echo "FAILED" >&2
            cat "$errf" >&2
            exit 1
        fi
        # ld.so only warns and carries on with glibc when a preload fails; that would
        # silently mislabel glibc numbers, so treat it as an error.
        if grep -q 'ld.so' "$errf"; then
            echo "FAILED (preload not applied)" >&2
            cat "$errf" >&2
            exit 1
        fi
        read -r ops secs nsteps rss < <(awk '{
            for (f = 1; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
            print v["ops_per_sec"], v["seconds"], v["steps"], v["peak_rss_kb"] }' <<<"$line")
        if [[ -z $rss ]]; then
            echo "FAILED (unexpected output: $line)" >&2
            exit 1
        fi
        echo "$round,$name,${lib:-libc},$ops,$secs,$nsteps,$rss" >> "$csv"
        awk -v o="$ops" -v r="$rss" 'BEGIN { printf "%8.2f M ops/s  %7d KB\n", o / 1e6, r }' >&2
    done
done
echo "raw results: $csv" >&2

python3 - "$csv" "$runs" "$steps" "${names[@]}" <<'EOF'
import csv
import statistics
import sys

path, runs, steps, order = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
ops, rss = {n: [] for n in order}, {n: [] for n in order}
with open(path, newline="") as f:
    for row in csv.DictReader(f):
        ops[row["allocator"]].append(float(row["ops_per_sec"]))
        rss[row["allocator"]].append(int(row["peak_rss_kb"]))

base = statistics.median(ops["glibc"])
print(f"SSOT random-mixed 16..1024 B, ring 400, {steps:,} steps, {runs} interleaved runs each\n")
print("| allocator | median ops/s | min ops/s | max ops/s | vs glibc | median peak RSS |")
print("|---|---:|---:|---:|---:|---:|")
for n in order:
    med = statistics.median(ops[n])
    print(f"| {n} | {med / 1e6:.2f} M | {min(ops[n]) / 1e6:.2f} M | {max(ops[n]) / 1e6:.2f} M"
          f" | {med / base:.2f}x | {statistics.median(rss[n]):,.0f} KB |")
EOF
