#!/usr/bin/env bash
# A limit on address space (ulimit -v, RLIMIT_AS, as containers and batch systems set): a
# Python program that holds 20 MB and many small objects runs under hakmem wherever it runs
# under glibc (hakmem's arenas reserve a sixteenth of the limit at most, and its tables are
# mapped as used, not reserved in its BSS).
# Usage: check-limits.sh LIBHAKMEM
set -u
lib=$1
source "$(dirname "$0")/../common/preload.sh"
fail() { echo "FAIL: $*"; exit 1; }
py=/usr/bin/python3
[ -x "$py" ] || py=$(type -P python3) || fail "no python3"
prog='
b = [bytearray(1000) for i in range(5000)]
x = bytearray(20_000_000)
y = [bytearray(100) for i in range(100000)]
print("ok", len(x), len(y))'
compared=0
for kb in 100000 150000; do
  want=$(ulimit -v "$kb"; "$py" -c "$prog" 2>&1)
  [ "$want" = "ok 20000000 100000" ] || { echo "glibc under ulimit -v $kb: $want (nothing to compare)"; continue; }
  got=$(ulimit -v "$kb"; preload_export "$lib"; exec "$py" -c "$prog" 2>&1)
  [ "$got" = "$want" ] || fail "under ulimit -v $kb: glibc '$want', hakmem '$got'"
  echo "ulimit -v $kb: $got"
  compared=$((compared + 1))
done
[ $compared -gt 0 ] || fail "python3 fails under every limit tried even without hakmem: nothing was compared"
echo "limits: all checks passed"
