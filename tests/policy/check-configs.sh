#!/usr/bin/env bash
# Every policy file in config/ must load without an error: users copy them.  (Warnings pass:
# observe-on.ini names a phase the default build compiles out.)
set -uo pipefail
tool=$1 dir=$2
status=0 n=0
for f in "$dir"/*.ini; do
  n=$((n + 1))
  # not env(1), which would take a tool path holding '=' for a variable
  if ! out=$(unset HAKMEM_CONFIG; "$tool" config check "$f" 2>&1 >/dev/null); then
    echo "$f:"; echo "$out"
    status=1
  fi
done
[ $n -gt 0 ] || { echo "no .ini files in $dir"; exit 1; }
[ $status -eq 0 ] && echo "$n policy files in $dir load without errors"
exit $status
