#!/bin/bash
# The two README commands answer --help before they install or build anything, and reject
# an unknown option: a user reading the usage must not start a 15-minute run.
set -u
root=$1
fail=0
for s in run-tests.sh run-bench.sh; do
  out=$(cd /tmp && PATH=/nonexistent:/usr/bin:/bin timeout 10 "$root/scripts/$s" --help 2>&1)
  rc=$?
  if [ $rc -ne 0 ] || ! grep -qi "usage" <<<"$out"; then
    echo "check-help: $s --help: exit $rc, output: $out" >&2
    fail=1
  fi
done
out=$(timeout 10 "$root/scripts/run-tests.sh" --no-such-option 2>&1)
rc=$?
if [ $rc -ne 2 ] || ! grep -q "unknown option" <<<"$out"; then
  echo "check-help: run-tests.sh --no-such-option: exit $rc (want 2), output: $out" >&2
  fail=1
fi
[ $fail -eq 0 ] && echo "check-help: ok"
exit $fail
