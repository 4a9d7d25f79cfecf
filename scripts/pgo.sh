#!/usr/bin/env bash
# Builds hakmem FAST PGO beside the Standard build with Meson's b_pgo and b_lto: an
# instrumented libhakmem.so (b_pgo=generate) is trained by preloading it into the
# benchmarks, then rebuilt with the profile (b_pgo=use); finally `hakmem ab` compares
# Standard and FAST PGO. Every run retrains from scratch, so it is safe to rerun.
# Usage: scripts/pgo.sh [--std DIR] [--pgo DIR] [--runs N] [--no-ab] [--no-lto]
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 [--std DIR (default build)] [--pgo DIR (default build-pgo)] [--runs N (default 10)] [--no-ab] [--no-lto]" >&2
  exit 2
}

std=build
pgo=build-pgo
runs=10
do_ab=1
lto=true
while [ $# -gt 0 ]; do
  case $1 in
    --std) [ $# -ge 2 ] || usage; std=$2; shift 2 ;;
    --pgo) [ $# -ge 2 ] || usage; pgo=$2; shift 2 ;;
    --runs) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
    --no-ab) do_ab=0; shift ;;
    --no-lto) lto=false; shift ;;
    -h|--help) usage ;;
    *) echo "pgo.sh: unknown argument $1" >&2; usage ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || usage

step() { printf '\n== %s\n' "$*" >&2; }
run() { printf '+ %s\n' "$*" >&2; "$@"; }
# A b_pgo change that did not reach the compile commands would train or ship the wrong build.
expect_flag() {
  if ! grep -q -- "$1" "$pgo/compile_commands.json"; then
    echo "pgo.sh: $pgo does not compile with $1; b_pgo was not applied" >&2
    exit 1
  fi
}

step "Standard build ($std)"
[ -f "$std/build.ninja" ] || run meson setup "$std"
run ninja -C "$std"

# The PGO build mirrors the Standard build's options (phases, buildtype, flags) so that
# the profile and link-time optimisation are the only differences. LTO is FAST's because
# the profile decides more across files: the cold paths call helpers in other .c files,
# and only LTO lets it inline them there (heap_refill, region_collect, the pool lock) and
# lay them out together (prodcons 7.5 % fewer instructions with both, 3.9 % with the
# profile alone).
# Its static library then holds slim LTO objects: FAST is for measuring, not installing.
# Tests are not built there (they are not measured, and their instrumented runs would
# add to the shared core's profile).
# A command substitution, not `< <(...)`, so that set -e stops on a failure.
std_opts_text=$(python3 - "$std/meson-info/intro-buildoptions.json" <<'EOF'
import json, shlex, sys
for o in json.load(open(sys.argv[1])):
    name, value = o["name"], o["value"]
    if (o["section"] == "user" and name != "tests") or name in (
            "optimization", "debug", "b_ndebug", "b_sanitize", "c_args", "c_link_args"):
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, list):
            value = shlex.join(value)
        print(f"-D{name}={value}")
EOF
)
mapfile -t std_opts <<<"$std_opts_text"
pgo_opts=(-Db_pgo=generate -Db_lto="$lto" -Dtests=false "${std_opts[@]}")

step "instrumented build ($pgo, b_pgo=generate)"
if [ -f "$pgo/meson-private/coredata.dat" ]; then
  # Rereading meson_options.txt first makes options added since the last run known.  The
  # options themselves go through `meson configure`: Meson before 1.4 ignores base options
  # such as b_pgo given to `setup --reconfigure` (mesonbuild/meson#11732).
  run meson setup --reconfigure "$pgo"
  run meson configure "$pgo" "${pgo_opts[@]}"
elif [ -e "$pgo" ]; then
  echo "pgo.sh: $pgo exists but is not a Meson build directory; remove it or pass --pgo DIR" >&2
  exit 1
else
  run meson setup "$pgo" "${pgo_opts[@]}"
fi
run ninja -C "$pgo"
expect_flag -fprofile-generate

step "training"
# Counts from an earlier training would be merged into this one, and after a source change
# they no longer match the code (gcc then fails with coverage-mismatch): start empty.
printf '+ find %s -name "*.gcda" -delete\n' "$pgo" >&2
find "$pgo" -name '*.gcda' -delete
lib=$(realpath "$pgo/libhakmem.so")
# b_pgo instruments every target, the benchmarks in $pgo too; run without the preload they
# would profile only their own code.  The Standard build's benchmarks are not instrumented
# and are the very binaries that get measured, so they drive the training.
train() {
  local name=$1
  shift
  local bin=$std/bench/$name
  if [ ! -x "$bin" ]; then
    echo "   (no $bin; not used for training)" >&2
    return 0
  fi
  if ! run env LD_PRELOAD="$lib" "$bin" "$@"; then
    echo "pgo.sh: training run failed: $bin $*" >&2
    exit 1
  fi
}
# Moderate sizes: enough to reach every steady-state path (refill, spill, purge, remote
# frees, large cache) many times over, in well under a minute.
train ssot 5000000
train ssot 2000000 4000
train ssot 2000000 40
train larson 2 1000 2000000
train prodcons 1000000 2 2
train realloc 2
train large 2000
train frag 2 64
# Benchmarks added later train with their own defaults.
for bin in "$std"/bench/*; do
  name=${bin##*/}
  case $name in
    ssot|larson|prodcons|realloc|large|frag|*.p|*.so) continue ;;
  esac
  if [ -f "$bin" ] && [ -x "$bin" ]; then
    train "$name"
  fi
done
if [ ! -x "$std/bench/larson" ] && [ ! -x "$std/bench/prodcons" ]; then
  echo "   warning: no threaded benchmark built (larson, prodcons): the profile covers one thread only" >&2
fi

# A run that never reached the allocator (wrong path, preload refused) leaves no profile,
# and b_pgo=use would then only warn and build an unoptimised library.
# The library's objects are in libhakmem.so.<version>.p (the soname is versioned).
gcda=$(find "$pgo" -path '*/libhakmem.so*.p/*' -name '*.gcda' | head -n 1)
if [ -z "$gcda" ]; then
  echo "pgo.sh: training wrote no profile for $lib; not building the PGO variant" >&2
  exit 1
fi
echo "   profile: $(find "$pgo" -name '*.gcda' -path '*libhak*' | wc -l) .gcda files for libhakmem.so" >&2

step "optimised build ($pgo, b_pgo=use)"
run meson configure "$pgo" -Db_pgo=use
# Targets that were not trained (the tool, the benchmarks' own code) warn about a missing profile.
run ninja -C "$pgo"
expect_flag -fprofile-use
if [ "$lto" = true ]; then
  expect_flag -flto
fi
echo "FAST PGO library: $lib" >&2

if [ "$do_ab" = 1 ]; then
  step "Standard vs FAST PGO"
  run "$std/tools/hakmem" ab --runs "$runs" "build:$std" "build:$pgo"
fi
