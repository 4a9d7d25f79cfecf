# Sourced by the shell tests that run a program under a library: preload_export LIB puts LIB in
# LD_PRELOAD of the current shell (run it in a subshell), whatever its path holds.
# ld.so splits LD_PRELOAD at spaces and colons, so a library in a folder whose path has a space
# goes in by its file name, found through that folder put first in LD_LIBRARY_PATH, as the
# hakmem tool does (tools/hakmem.c: preload_set).
preload_export() {
  case $1 in
    *[[:space:]:]*)
      export LD_LIBRARY_PATH="${1%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      export LD_PRELOAD="${1##*/}" ;;
    *) export LD_PRELOAD="$1" ;;
  esac
}
