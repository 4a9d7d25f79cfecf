#!/usr/bin/env bash
# Installs the Debian packages hakmem needs (as root), or prints the exact command.
# Usage: scripts/deps.sh [build|test|bench|apps|prof]...   (several sets at once: scripts/deps.sh bench apps)
set -euo pipefail

build_pkgs=(gcc meson ninja-build pkg-config check libiniparser-dev libunwind-dev)
test_pkgs=(g++ python3 git sqlite3 libpython3.11-testsuite clang libclang-rt-14-dev google-perftools)
bench_pkgs=(libmimalloc-dev libjemalloc-dev libgoogle-perftools-dev)
# The real applications of `hakmem compare --suite apps`.
apps_pkgs=(redis-server redis-tools sqlite3 python3 lua5.4 z3 ghostscript gcc)
# Reading heap profiles: google-pprof, and graphviz for its --svg and --pdf pictures.
prof_pkgs=(google-perftools graphviz)

want=("${build_pkgs[@]}")
for set in "${@:-build}"; do
  case $set in
    build) ;;
    test)  want+=("${test_pkgs[@]}") ;;
    bench) want+=("${bench_pkgs[@]}") ;;
    apps)  want+=("${apps_pkgs[@]}") ;;
    prof)  want+=("${prof_pkgs[@]}") ;;
    *) echo "usage: $0 [build|test|bench|apps|prof]..." >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  case " ${missing[*]} " in *" $p "*) continue ;; esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "hakmem needs: ${missing[*]}" >&2
  echo "run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd
