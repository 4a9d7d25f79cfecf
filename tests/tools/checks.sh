# Sourced by the shell checks of the hakmem command and library: their arguments, a scratch
# directory removed at exit, and fail, which counts a failed check and says what it saw.
# Usage from a check: source checks.sh TOOL LIBHAKMEM SRCDIR VERSION; ...; checks_done NAME
set -uo pipefail
tool=$1 lib=$2 src=$3 version=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
source "$(dirname "${BASH_SOURCE[0]}")/../common/preload.sh"
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
checks_done() {
  [ $fails -eq 0 ] && echo "$1: all checks passed"
  exit $((fails > 0))
}
