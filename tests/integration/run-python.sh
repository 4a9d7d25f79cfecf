#!/bin/bash
# Integration: CPython under LD_PRELOAD=libhakmem.so versus without.
# Usage: run-python.sh /path/to/libhakmem.so
# shellcheck source=common.sh disable=SC2317  # scenario functions are called indirectly
. "$(dirname "$0")/common.sh" "$@"

# Debian's interpreter first: a pyenv shim would add a layer of bash processes.
need_prog python3 /usr/bin/python3 python3
PY=$PROG
say "using $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null))"
export PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1 PYTHONIOENCODING=utf-8
unset PYTHONPATH PYTHONSTARTUP PYTHONMALLOC

# The library must really be in the child, and malloc must resolve to it.
check_preloaded "$PY" -c pass
LOADED_PY='
import ctypes, sys
maps = [l.split() for l in open("/proc/self/maps") if "libhakmem" in l]
if not maps:
    sys.exit("libhakmem not mapped in /proc/self/maps")
glob = ctypes.CDLL(None)
glob.malloc.restype = ctypes.c_void_p
glob.malloc.argtypes = [ctypes.c_size_t]
glob.free.argtypes = [ctypes.c_void_p]
p = glob.malloc(1000)  # through the normal malloc binding
if not hasattr(glob, "hak_malloc") or not p:
    sys.exit("hak_malloc not in the global symbol scope")
glob.free(p)
print("loaded", maps[0][-1])
'
if out=$(cd "$TMP" && preload_export "$LIB" && "$PY" -c "$LOADED_PY" 2>&1) &&
   ! printf '%s\n' "$out" | grep -q '^hakmem:'; then
    say "ok: $out (found in /proc/self/maps)"
else
    fail "library not active in the child: $out"
fi

THREADS_PY='
import threading, json, hashlib
res = [None] * 4
def work(k):
    acc = []
    for r in range(30):
        d = {("%d-%d" % (k, i)): [i] * (i % 9) for i in range(3000)}
        acc.append(json.dumps(d, sort_keys=True))
        del d
    res[k] = hashlib.sha256("".join(acc).encode()).hexdigest()[:16]
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print(res)
'

scenario() {
    cp "$HERE/workload.py" "$WORK/workload.py"
    step workload "$PY" workload.py
    step threads "$PY" -c "$THREADS_PY"
    step exitcode "$PY" -c 'import sys; d = {i: str(i) * 10 for i in range(100000)}; print(len(d)); sys.exit(3)'
    # PYTHONMALLOC=malloc: every object, small ones too, from malloc (hakmem), not pymalloc's arenas
    step workload-malloc env PYTHONMALLOC=malloc "$PY" workload.py
    step threads-malloc env PYTHONMALLOC=malloc "$PY" -c "$THREADS_PY"
}
run_scenario scenario
finish
