#!/usr/bin/env python3
"""The heap profiler end to end: tests/prof/prof_prog.c under libhakmem-prof.so, its
profiles read back by google-pprof, and the cases that must leave no file or one warning."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from hakmem_bench import preload_env  # noqa: E402  (the tool's own rule for a path ld.so splits)

PROF_LIB, PLAIN_LIB, PROG, TOOL, PROG_NOPIE = sys.argv[1:6]
PPROF = "google-pprof"
MIB = 1 << 20
failures = []
CWD = [None]            # the running step's directory


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def run(args, env=None, lib=PROF_LIB, cwd=None):
    """args under lib with profiling on, in cwd (a step's directory): a profile at exit
    whose path the step did not set lands there, never in the caller's directory."""
    e = dict(os.environ)
    e.update({**preload_env(lib), "HAKMEM_PROF": "on"})
    e.update(env or {})
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=120, cwd=cwd or CWD[0])


def pprof_top(path, prog=None):
    """google-pprof --text: (total MiB, [(flat MiB, function), ...] by flat, largest first)."""
    r = subprocess.run([PPROF, "--text", prog or PROG, path], capture_output=True, text=True, timeout=120)
    total = re.search(r"Total: ([0-9.]+) MB", r.stdout)
    # a function's clones (leak_kib.constprop.0) count as the function
    rows = [(float(m.group(1)), m.group(2).split(".")[0]) for m in
            re.finditer(r"^\s*([0-9.]+)\s+[0-9.]+%\s+[0-9.]+%\s+[0-9.]+\s+[0-9.]+%\s+(\S+)", r.stdout, re.M)]
    return (float(total.group(1)) if total else 0.0), rows


def leak_checks(tmp):
    # The shape at a rate fine enough that the 10 % bound is five standard
    # deviations of the estimate (1 KiB blocks, 64 MiB: 2,048 samples at 32 KiB).
    out = os.path.join(tmp, "leak.%p.heap")
    r = run([PROG, "leak"], {"HAKMEM_PROF_OUTPUT": out, "HAKMEM_PROF_SAMPLE": "32K"})
    path = out.replace("%p", "*")
    files = [f for f in os.listdir(tmp) if f.startswith("leak.") and f.endswith(".heap")]
    check(r.returncode == 0 and len(files) == 1, f"leak: one profile written ({files}, rc {r.returncode})")
    if files:
        total, rows = pprof_top(os.path.join(tmp, files[0]))
        first = rows[0] if rows else (0, "")
        check(first[1] == "leak_kib", f"leak: google-pprof --text shows leak_kib first ({rows[:3]})")
        check(first[0] >= 0.9 * total, f"leak: leak_kib holds >= 90 % of the live bytes ({first[0]} of {total} MiB)")
        check(abs(first[0] - 64) <= 6.4, f"leak: leak_kib's estimate within 10 % of 64 MiB ({first[0]} MiB)")
        os.unlink(os.path.join(tmp, files[0]))
    # the default rate: the leak still comes first
    r = run([PROG, "leak"], {"HAKMEM_PROF_OUTPUT": os.path.join(tmp, "default.heap")})
    total, rows = pprof_top(os.path.join(tmp, "default.heap"))
    check(r.returncode == 0 and rows and rows[0][1] == "leak_kib" and rows[0][0] >= 0.9 * total,
          f"leak, default rate: leak_kib first with >= 90 % ({rows[:2]} of {total})")
    os.unlink(os.path.join(tmp, "default.heap"))
    # a program built without PIE (as Debian's python3): "malloc" names its own PLT stub there
    r = run([PROG_NOPIE, "leak"], {"HAKMEM_PROF_OUTPUT": os.path.join(tmp, "nopie.heap")})
    total, rows = pprof_top(os.path.join(tmp, "nopie.heap"), PROG_NOPIE) \
        if os.path.exists(os.path.join(tmp, "nopie.heap")) else (0.0, [])
    check(r.returncode == 0 and rows and rows[0][1] == "leak_kib",
          f"a program built without PIE is profiled: leak_kib first ({rows[:2]}, {r.stderr.strip()[-200:]!r})")


def tool_checks(tmp):
    r = subprocess.run([TOOL, "prof", "--sample", "32K", "--", PROG, "leak"], cwd=tmp,
                       capture_output=True, text=True, timeout=180)
    m = re.search(r"profile written to (\S+)", r.stderr)
    lines = [l for l in r.stderr.splitlines() if re.match(r"^\s*[0-9.]+\s+[0-9.]+%", l)]
    check(r.returncode == 0 and m is not None and os.path.exists(m.group(1)),
          f"hakmem prof: exit 0 and the profile named ({r.stderr[-300:]!r})")
    check(bool(lines) and lines[0].split()[-1].split(".")[0] == "leak_kib", f"hakmem prof: leak_kib first ({lines[:2]})")
    if m:
        os.unlink(m.group(1))
    r = subprocess.run([TOOL, "run", "--prof", "--output", os.path.join(tmp, "run.heap"), "--", PROG, "leak"],
                       capture_output=True, text=True, timeout=180)
    check(r.returncode == 0 and "leak_kib" in r.stderr and os.path.exists(os.path.join(tmp, "run.heap")),
          "hakmem run --prof: the same")
    os.unlink(os.path.join(tmp, "run.heap"))
    # a launcher that execs the program (a pyenv shim, a wrapper script): the profile is read
    # against the program it was taken of, not the script
    r = subprocess.run([TOOL, "prof", "--sample", "32K", "--", "sh", "-c", f'exec "{PROG}" leak'], cwd=tmp,
                       capture_output=True, text=True, timeout=180)
    lines = [l for l in r.stderr.splitlines() if re.match(r"^\s*[0-9.]+\s+[0-9.]+%", l)]
    check(r.returncode == 0 and bool(lines) and lines[0].split()[-1].split(".")[0] == "leak_kib",
          f"hakmem prof through a launcher that execs the program: leak_kib first ({lines[:1]})")
    # --top N: the table cut after N rows (google-pprof itself prints them all)
    r = subprocess.run([TOOL, "prof", "--sample", "32K", "--top", "1", "--", PROG, "leak"], cwd=tmp,
                       capture_output=True, text=True, timeout=180)
    lines = [l for l in r.stderr.splitlines() if re.match(r"^\s*[0-9.]+\s+[0-9.]+%", l)]
    check(r.returncode == 0 and len(lines) == 1 and lines[0].split()[-1].split(".")[0] == "leak_kib",
          f"hakmem prof --top 1: one row, leak_kib ({lines})")
    r = subprocess.run([TOOL, "prof", "--", "/nonexistent"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 127, f"hakmem prof of a missing program: 127 ({r.returncode})")


def thread_fork_checks(tmp):
    out = os.path.join(tmp, "thr.heap")
    r = run([PROG, "threads"], {"HAKMEM_PROF_OUTPUT": out, "HAKMEM_PROF_SAMPLE": "64K"})
    total, rows = pprof_top(out)
    check(r.returncode == 0 and rows and rows[0][1] == "leak_in_thread" and abs(rows[0][0] - 64) <= 9.6,
          f"threads: leak_in_thread first, 64 MiB within 15 % ({rows[:2]})")
    os.unlink(out)
    out = os.path.join(tmp, "fork.%p.heap")
    r = run([PROG, "fork"], {"HAKMEM_PROF_OUTPUT": out, "HAKMEM_PROF_SAMPLE": "64K"})
    m = re.search(r"child (\d+)", r.stdout)
    files = sorted(f for f in os.listdir(tmp) if f.startswith("fork."))
    check(r.returncode == 0 and m is not None and len(files) == 2, f"fork: parent and child each write a profile ({files})")
    if m and len(files) == 2:
        child = os.path.join(tmp, f"fork.{m.group(1)}.heap")
        parent = [os.path.join(tmp, f) for f in files if f != os.path.basename(child)][0]
        _, crow = pprof_top(child)
        _, prow = pprof_top(parent)
        check(crow and crow[0][1] == "child_leak", f"fork: the child's profile shows child_leak first ({crow[:2]})")
        check(prow and prow[0][1] == "leak_kib" and all(f != "child_leak" for _, f in prow),
              f"fork: the parent's shows leak_kib and not the child's leak ({prow[:2]})")
    for f in files:
        os.unlink(os.path.join(tmp, f))


def no_file_checks(tmp):
    for mode in ("exit", "kill"):
        d = tempfile.mkdtemp(dir=tmp)
        r = run([PROG, mode], {"HAKMEM_PROF_OUTPUT": os.path.join(d, "x.%p.heap")})
        check(os.listdir(d) == [], f"{mode}: no file at all, partial or temporary ({os.listdir(d)}, rc {r.returncode})")
    r = run([PROG, "leak"], {"HAKMEM_PROF_OUTPUT": "/nonexistent-dir/x.heap"})
    warns = [l for l in r.stderr.splitlines() if "warning: [prof] output" in l]
    check(r.returncode == 0 and len(warns) == 1, f"unwritable output: one warning, the program unaffected ({r.stderr[-300:]!r})")
    # another allocator first (here the plain library, preloaded ahead): profiling cannot
    # start, and says so once instead of leaving no profile unexplained
    if not re.search(r"[\s:]", PLAIN_LIB + PROF_LIB):
        out = os.path.join(tmp, "other.heap")
        r = run([PROG, "leak"], {"LD_PRELOAD": PLAIN_LIB + " " + PROF_LIB, "HAKMEM_PROF_OUTPUT": out})
        said = [l for l in r.stderr.splitlines() if "is not this library's" in l]
        check(r.returncode == 0 and len(said) == 1 and not os.path.exists(out),
              f"another allocator serves malloc: one line says why there is no profile ({r.stderr[-300:]!r})")


def every_call_checks(tmp):
    out = os.path.join(tmp, "every.heap")
    r = run([PROG, "every"], {"HAKMEM_PROF_SAMPLE": "1", "PROF_PROG_DUMP": out,
                              "HAKMEM_PROF_OUTPUT": os.path.join(tmp, "every-exit.heap")})
    check(r.returncode == 0, f"every call sampled: data and contracts hold ({r.stderr[-400:]!r})")
    head = open(out).readline() if os.path.exists(out) else ""
    m = re.match(r"heap profile:\s*(\d+):\s+(\d+) \[\s*(\d+):\s+(\d+)\] @ heap_v2/1", head)
    check(m is not None and int(m.group(2)) < 256 * 1024 and int(m.group(3)) > 1000,
          f"every call sampled: all freed, so < 256 KiB live of > 1000 samples ({head.strip()})")


def misc_checks(tmp):
    r = run([PROG, "dump", os.path.join(tmp, "d.heap")], lib=PLAIN_LIB)
    check("dump -1 EOPNOTSUPP" in r.stdout or "dump -1 ENOTSUP" in r.stdout, f"libhakmem.so: hak_prof_dump fails with ENOTSUP ({r.stdout.strip()})")
    check("libhakmem-prof.so" in r.stderr, "libhakmem.so: [prof] enabled warns and names libhakmem-prof.so")
    r = run([PROG, "dump", os.path.join(tmp, "d.%p.heap")])
    dumped = [f for f in os.listdir(tmp) if f.startswith("d.")]
    check("dump 0" in r.stdout and len(dumped) == 1, f"hak_prof_dump writes on demand, %p expanded ({dumped})")
    r = run([PROG, "leak"], {"HAKMEM_PROF_OUTPUT": os.path.join(tmp, "iv.heap"), "HAKMEM_PROF_INTERVAL": "16M",
                             "HAKMEM_STATS": "1"})
    numbered = sorted(f for f in os.listdir(tmp) if re.match(r"iv\.\d+\.heap$", f))
    check(len(numbered) >= 3, f"[prof] interval 16M: a numbered profile per 16 MiB of growth ({numbered})")
    if numbered:
        total, _ = pprof_top(os.path.join(tmp, numbered[-1]))
        check(total > 16, f"a numbered profile reads back ({numbered[-1]}: {total} MiB)")
    check(re.search(r"profiler\s+\d+", r.stderr) is not None and "samples live" in r.stderr,
          "HAKMEM_STATS=1: the profiler's own memory and samples in the totals")
    # a sample every 16 KiB: the 4 MiB before the signal is some 256 samples, not 8
    r = run([PROG, "signal"], {"HAKMEM_PROF_OUTPUT": os.path.join(tmp, "sg.heap"), "HAKMEM_PROF_SIGNAL": "USR2",
                               "HAKMEM_PROF_SAMPLE": "16K"})
    signalled = sorted(f for f in os.listdir(tmp) if re.match(r"sg\.\d+\.heap$", f))
    check(r.returncode == 0 and "alive" in r.stdout and signalled == ["sg.1.heap"],
          f"[prof] signal USR2: a numbered profile at the signal, and the program goes on ({signalled}, exit {r.returncode})")
    if signalled:
        total, _ = pprof_top(os.path.join(tmp, signalled[0]))
        check(total >= 2.5, f"the signal's profile holds the 4 MiB leaked before it ({total} MiB; 2.5 is six deviations of 256 samples below)")
    for env, want in (({"HAKMEM_PROF_SIGNAL": "USR2", "HAKMEM_STATS_SIGNAL": "USR2"}, "the same as [stats] signal"),
                      ({"HAKMEM_PROF_SIGNAL": "HUP"}, "expected USR1, USR2 or none")):
        r = run([PROG, "exit"], env)
        check(r.returncode == 0 and f"[prof] signal: {want}" in r.stderr,
              f"[prof] signal {env}: one error, no handler, the program runs ({r.stderr.strip()[:200]})")
    for text, what in (("[prof]\nsample = 0\n", "0"), ("[prof]\nsample = 2G\n", "2G")):
        cfg = os.path.join(tmp, "bad.ini")
        open(cfg, "w").write(text)
        c = subprocess.run([TOOL, "config", "check", cfg], capture_output=True, text=True)
        check(c.returncode == 1 and "sample" in c.stderr, f"config check: [prof] sample = {what} is an error ({c.stderr.strip()})")


def main():
    if shutil.which(PPROF) is None:
        print("prof: google-pprof not installed (apt-get install google-perftools): skipped")
        sys.exit(77)            # a skip; under CI, scripts/run-tests.sh counts it a failure
    global PROG, PROG_NOPIE
    with tempfile.TemporaryDirectory() as tmp:
        if re.search(r"\s", PROG + PROG_NOPIE):
            # google-pprof reads a profile's MAPPED_LIBRARIES line by line and takes a path to end
            # at its first space: a program in a build directory whose path has one is never
            # symbolised.  Profiled from a copy, the checks judge the profiler, not pprof's parser.
            PROG = shutil.copy(PROG, os.path.join(tmp, os.path.basename(PROG)))
            PROG_NOPIE = shutil.copy(PROG_NOPIE, os.path.join(tmp, os.path.basename(PROG_NOPIE)))
        for step in (leak_checks, tool_checks, thread_fork_checks, no_file_checks, every_call_checks, misc_checks):
            d = os.path.join(tmp, step.__name__)
            os.mkdir(d)
            CWD[0] = d
            step(d)
    print(f"prof: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
