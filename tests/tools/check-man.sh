#!/usr/bin/env bash
# hakmem(1) as built: every variable `hakmem config list` knows is documented in it, it carries
# the version, and groff (where installed) renders it without a warning.
# Usage: check-man.sh MANPAGE TOOL VERSION
set -uo pipefail
man=$1 tool=$2 version=$3
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
grep -q "\"hakmem $version\"" "$man" || fail "no version $version in the title line"
for var in $("$tool" config list | awk 'NR > 1 { print $3 }'); do
  grep -qF -- "$(printf '%s' "$var" | sed 's/-/\\-/g')" "$man" || fail "$var is not in $man"
done
for var in HAKMEM_CONFIG HAKMEM_STATS HAKMEM_VERBOSE malloc_trim; do
  grep -q "$var" "$man" || fail "$var is not in $man"
done
if command -v groff >/dev/null; then
  warnings=$(groff -man -ww -z "$man" 2>&1)
  [ -z "$warnings" ] || fail "groff: $warnings"
fi
[ $fails -eq 0 ] && echo "hakmem(1): all checks passed"
exit $((fails > 0))
