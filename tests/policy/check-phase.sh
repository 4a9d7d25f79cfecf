#!/usr/bin/env bash
# A phase switched by its variable shows in `hakmem config show` with that value and its
# source; switching on a phase compiled out warns and leaves it off.
set -uo pipefail
tool=$1 key=$2 var=$3 value=$4
# not env(1), which would take a tool path holding '=' for a variable
out=$(unset HAKMEM_CONFIG; export "$var=$value"; "$tool" config show 2>&1)
rc=$?
line=$(grep -E "^phases\.$key +=" <<< "$out")
[ $rc -eq 0 ] || { echo "config show exited $rc:"; echo "$out"; exit 1; }
if grep -qE "^phases\.$key += $value .*\(env $var\)" <<< "$line"; then
  echo "$line"
  exit 0
fi
if [ "$value" = on ] && grep -q "$key is compiled out" <<< "$out" && grep -qE "= off " <<< "$line"; then
  echo "compiled out, stays off: $line"
  exit 0
fi
echo "expected phases.$key = $value from env $var, got:"
echo "$out"
exit 1
