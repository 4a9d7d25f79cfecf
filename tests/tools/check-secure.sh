#!/usr/bin/env bash
# Item 6 of issue 28: a setuid program linked with libhakmem.a takes no setting from its
# caller's HAKMEM_* variables, as glibc's tunables in secure mode.  Needs root (to hand the
# copy to another user); skipped (77) otherwise.
# Usage: check-secure.sh PROGRAM
set -uo pipefail
prog=$1
[ "$(id -u)" -eq 0 ] || { echo "not root: cannot make a setuid copy"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cp "$prog" "$tmp/plain"
cp "$prog" "$tmp/setuid"
chown 65534 "$tmp/setuid" && chmod 4755 "$tmp/setuid" || { echo "cannot make a setuid copy"; exit 77; }
fails=0
HAKMEM_STATS=1 HAKMEM_VERBOSE=1 HAKMEM_SLOTZ=1 "$tmp/plain" 2>"$tmp/err.plain"
grep -q 'hakmem: version' "$tmp/err.plain" && grep -q 'totals (pid' "$tmp/err.plain" \
  || { echo "FAIL: the plain copy ignored HAKMEM_*: $(cat "$tmp/err.plain")"; fails=1; }
HAKMEM_STATS=1 HAKMEM_VERBOSE=1 HAKMEM_SLOTZ=1 HAKMEM_CONFIG=/nonexistent.ini "$tmp/setuid" 2>"$tmp/err.setuid"
if [ -s "$tmp/err.setuid" ]; then
  echo "FAIL: the setuid copy took its caller's HAKMEM_* settings:"; cat "$tmp/err.setuid"; fails=1
fi
[ $fails -eq 0 ] && echo "setuid: HAKMEM_* ignored"
exit $fails
