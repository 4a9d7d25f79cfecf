#!/usr/bin/env python3
"""CPython's own regression tests under LD_PRELOAD=libhakmem.so versus without.

Usage: regrtest.py /path/to/libhakmem.so [test_name ...]

Runs a subset of CPython's regression suite (`python3 -m test`) with Debian's
/usr/bin/python3 twice in the same way -- once without hakmem (the reference)
and once with LD_PRELOAD=libhakmem.so -- and requires:

  * the same result for every test module (passed / failed / skipped /
    altered the environment / run no tests ...), parsed from the summary;
  * the same outcome for every test case (from regrtest's --junit-xml);
  * the same regrtest exit status;
  * no "hakmem:" line (hakmem's misuse report) in the output.

Both runs use PYTHONMALLOC=malloc, so every Python object is allocated by
malloc (hakmem) rather than by pymalloc's arenas.

The test modules come from Debian's package libpython3.11-testsuite
(scripts/deps.sh test installs it).  If /usr/bin/python3 or its `test` package
is missing, the test exits 77 (Meson's "skip"); a module that is not installed
is left out with a note.  Under CI (CI=true) both are failures: every expected
test must run there.

Timing-sensitive modules (TIMING: test_threading, test_gc) can differ between
two runs on a loaded machine whatever the allocator.  When every difference lies
in them, those modules are run once more in both modes and compared again; the
retry and what differed the first time are reported ("RETRY:" lines, which
scripts/run-tests.sh repeats in its summary).  A difference anywhere else, or
again on the retry, fails.

Environment:
  HAK_REGRTEST_PYTHON       interpreter (default /usr/bin/python3)
  HAK_REGRTEST_JOBS         regrtest -j (default 2)
  HAK_REGRTEST_TIMEOUT      regrtest --timeout per test module, s (default 120)
  HAK_REGRTEST_RUN_TIMEOUT  bound on each whole run, s (default 135: both fit in 300)
  CK_TIMEOUT_MULTIPLIER     scales both (the factor of meson's --timeout-multiplier,
                            scripts/run-tests.sh sets both; default 1)
  HAK_REGRTEST_PYTHONMALLOC PYTHONMALLOC for both runs (default malloc)
  HAK_REGRTEST_KEEP=1       keep the scratch directory (both runs' output)
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from hakmem_bench import preload_env  # noqa: E402  (the tool's own rule for a path ld.so splits)

SKIP = 77
NAME = "regrtest"
CI = os.environ.get("CI", "") in ("true", "1", "yes")
# Modules whose outcome can depend on timing (threads, collection thresholds) and are
# retried once when they alone differ.
TIMING = {"test_threading", "test_gc"}

# Offline, deterministic and allocation-heavy modules; about 110 s of CPU under
# hakmem in total (~60 s wall with -j2 on 2 cores).
TESTS = """
test_dict test_list test_set test_tuple test_unicode test_bytes test_json
test_re test_deque test_heapq test_bisect test_string test_struct test_array
test_collections test_itertools test_gc test_weakref test_threading test_sort
test_int test_long test_float test_pickle
""".split()


def say(msg):
    print("%s: %s" % (NAME, msg), flush=True)


def skip(msg):
    if CI:
        die(msg + " -- under CI every expected test must run (a skip is a failure there)")
    say("SKIP: " + msg)
    sys.exit(SKIP)


def die(msg):
    say("ERROR: " + msg)
    sys.exit(1)


def clean_env(tmp):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("PYTHON") or k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "LANGUAGE"):
            del env[k]
    env.update(
        LC_ALL="C.UTF-8",
        LANG="C.UTF-8",
        TZ="UTC",
        HOME=os.path.join(tmp, "home"),
        TMPDIR=os.path.join(tmp, "tmp"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        PYTHONHASHSEED="0",
    )
    pm = os.environ.get("HAK_REGRTEST_PYTHONMALLOC", "malloc")
    if pm:
        env["PYTHONMALLOC"] = pm
    return env


def check_python(py, env, tests):
    if not (os.path.isfile(py) and os.access(py, os.X_OK)):
        skip("%s not found" % py)
    probe = (
        "import importlib.util, sys\n"
        "import test.support, test.libregrtest\n"
        "print(sys.version.split()[0])\n"
        "for t in sys.argv[1:]:\n"
        "    if importlib.util.find_spec('test.' + t) is None:\n"
        "        print('missing', t)\n"
    )
    r = subprocess.run([py, "-c", probe] + tests, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        skip("%s has no usable `test` package (Debian: apt-get install "
             "libpython3.11-testsuite, or scripts/deps.sh test): %s"
             % (py, (r.stderr.strip().splitlines() or ["?"])[-1]))
    lines = r.stdout.split("\n")
    missing = [ln.split()[1] for ln in lines[1:] if ln.startswith("missing ")]
    if len(missing) == len(tests):
        skip("%s: none of the test modules is installed (Debian: libpython3.11-testsuite)" % py)
    return lines[0], missing


LOADED_PY = r"""
import ctypes, sys
maps = [l.split() for l in open("/proc/self/maps") if "libhakmem" in l]
if not maps:
    sys.exit("libhakmem not mapped in /proc/self/maps")
glob = ctypes.CDLL(None)
if not hasattr(glob, "hak_malloc"):
    sys.exit("hak_malloc not in the global symbol scope")
print("loaded", maps[0][-1])
"""


def check_preloaded(py, env, lib):
    e = dict(env, **preload_env(lib, env))
    r = subprocess.run([py, "-c", LOADED_PY], env=e, capture_output=True, text=True)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or "hakmem:" in out:
        die("library not active in the child: " + out)
    say("ok: %s" % out)


def run(mode, py, env, tests, tmp, jobs, per_test_timeout, run_timeout):
    """One regrtest run; returns a dict with rc, stdout, stderr, xml path, time."""
    d = os.path.join(tmp, mode)
    os.makedirs(d)
    xml = os.path.join(d, "junit.xml")
    cmd = [py, "-m", "test", "-j", str(jobs), "--timeout", str(per_test_timeout),
           "--junit-xml", xml] + tests
    out_p, err_p = os.path.join(d, "stdout"), os.path.join(d, "stderr")
    work = os.path.join(tmp, "work-" + mode)
    os.makedirs(work)
    say("%s run: %s%s" % (mode, "LD_PRELOAD=%s " % env["LD_PRELOAD"] if "LD_PRELOAD" in env else "",
                         " ".join(cmd)))
    t0 = time.monotonic()
    with open(out_p, "w") as out, open(err_p, "w") as err:
        p = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err, start_new_session=True)
        try:
            rc = p.wait(timeout=run_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = "timeout"
    dt = time.monotonic() - t0
    with open(out_p, errors="replace") as f:
        stdout = f.read()
    with open(err_p, errors="replace") as f:
        stderr = f.read()
    say("%s run: exit %s in %.1f s" % (mode, rc, dt))
    return dict(mode=mode, rc=rc, stdout=stdout, stderr=stderr, xml=xml, time=dt)


HEAD = re.compile(r"^(?:All )?(\d+) (?:re-run )?tests? (OK\.|failed:|skipped:|omitted:|"
                  r"altered the execution environment:|run no tests:)$|^(\d+) re-run tests?:$")
CATEGORY = {
    "failed:": "failed", "skipped:": "skipped", "omitted:": "omitted",
    "altered the execution environment:": "env changed", "run no tests:": "run no tests",
}


def parse_summary(res, tests):
    """Module -> result from the summary regrtest prints at the end."""
    lines = res["stdout"].splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("== Tests result: ")]
    if not starts:
        return None, "no '== Tests result' summary in the output"
    i = starts[-1] + 1
    result = {}
    ok_count = None
    while i < len(lines):
        m = HEAD.match(lines[i])
        i += 1
        if not m:
            continue
        if m.group(2) == "OK.":
            ok_count = int(m.group(1))
            continue
        cat = CATEGORY.get(m.group(2), "re-run")
        while i < len(lines) and lines[i].startswith("    "):
            for name in lines[i].split():
                # "re-run" wins over nothing; a module in two lists keeps both
                result[name] = result[name] + "+" + cat if name in result else cat
            i += 1
    for t in tests:
        result.setdefault(t, "passed")
    npass = sum(1 for v in result.values() if v == "passed")
    if ok_count is not None and ok_count != npass:
        return None, "summary says %d tests OK, parsed %d" % (ok_count, npass)
    if ok_count is None and npass:
        return None, "summary has no 'tests OK' line but %d module(s) not listed" % npass
    return result, None


def parse_junit(res):
    """Test case -> outcome(s) from --junit-xml (empty if the file is missing); a
    name that occurs more than once (the same test in two modules) keeps each."""
    if not os.path.exists(res["xml"]):
        return {}
    outcome = {}
    root = ET.parse(res["xml"]).getroot()
    for tc in root.iter("testcase"):
        tags = sorted({ch.tag for ch in tc} & {"failure", "error", "skipped"})
        name = tc.get("name")
        o = "+".join(tags) if tags else "passed"
        outcome.setdefault(name, []).append(o)
    return {k: ",".join(sorted(v)) for k, v in outcome.items()}


def case_module(name):
    """test.test_gc.GCTests.test_x -> test_gc (None when the name does not say)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "test" else None


def hakmem_lines(res):
    return [ln for ln in (res["stdout"] + "\n" + res["stderr"]).splitlines() if "hakmem:" in ln]


def tail(text, n=25):
    return "\n".join("    " + ln for ln in text.rstrip().splitlines()[-n:])


def main():
    if len(sys.argv) < 2 or not sys.argv[1]:
        die("usage: %s /path/to/libhakmem.so [test_name ...]" % sys.argv[0])
    lib = os.path.abspath(sys.argv[1])
    if not os.path.isfile(lib):
        die("library not found: " + lib)
    tests = sys.argv[2:] or TESTS
    py = os.environ.get("HAK_REGRTEST_PYTHON", "/usr/bin/python3")
    jobs = int(os.environ.get("HAK_REGRTEST_JOBS", "2"))
    mult = float(os.environ.get("CK_TIMEOUT_MULTIPLIER", "1") or "1")
    per_test_timeout = int(int(os.environ.get("HAK_REGRTEST_TIMEOUT", "120")) * mult)
    run_timeout = int(int(os.environ.get("HAK_REGRTEST_RUN_TIMEOUT", "135")) * mult)

    tmp = tempfile.mkdtemp(prefix="hakmem-regrtest.")
    try:
        os.makedirs(os.path.join(tmp, "home"))
        os.makedirs(os.path.join(tmp, "tmp"))
        env = clean_env(tmp)
        version, missing = check_python(py, env, tests)
        if missing:
            if CI:
                die("test modules not installed: %s -- under CI every expected module must run"
                    % " ".join(missing))
            say("SKIP (not installed, left out): %s" % " ".join(missing))
            tests = [t for t in tests if t not in missing]
        say("using %s (Python %s), PYTHONMALLOC=%s, %d test modules, -j%d"
            % (py, version, env.get("PYTHONMALLOC", "(default)"), len(tests), jobs))
        check_preloaded(py, env, lib)

        ref = run("ref", py, env, tests, tmp, jobs, per_test_timeout, run_timeout)
        hak = run("hak", py, dict(env, **preload_env(lib, env)), tests, tmp, jobs, per_test_timeout,
                  run_timeout)
        retried = None
        fails, suspects = compare(ref, hak, tests)
        if fails and suspects and suspects <= TIMING:
            again = sorted(suspects)
            say("RETRY: %d difference(s), all in timing-sensitive %s: running %s once more "
                "in both modes" % (fails, " ".join(again), " ".join(again)))
            retry_timeout = run_timeout // 2      # both retries fit in meson's timeout too
            ref2 = run("ref-retry", py, env, again, tmp, jobs, per_test_timeout, retry_timeout)
            hak2 = run("hak-retry", py, dict(env, **preload_env(lib, env)), again, tmp, jobs,
                       per_test_timeout, retry_timeout)
            fails2, _ = compare(ref2, hak2, again)
            say("RETRY: %s: %s on the retry (first run: %d difference(s), above)"
                % (" ".join(again), "the same" if not fails2 else "%d difference(s) again" % fails2,
                   fails))
            fails = fails2
            retried = again
    finally:
        if os.environ.get("HAK_REGRTEST_KEEP"):
            say("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if fails:
        say("%d failure(s)" % fails)
        sys.exit(1)
    say("PASS" if not retried else "PASS after one retry of %s (RETRY lines above)" % " ".join(retried))
    sys.exit(0)


def compare(ref, hak, tests):
    """Failures, and the set of modules they lie in (None for one that lies in none:
    a timeout, an unparsable run, a hakmem: line)."""
    fails = 0
    suspects = set()

    def fail(msg, module=None):
        nonlocal fails, suspects
        fails += 1
        say("FAIL: " + msg)
        if module is None:
            suspects = None
        elif suspects is not None:
            suspects.add(module)

    if ref["rc"] == "timeout":
        fail("the reference run (without hakmem) timed out: the test is broken, not hakmem")
    if hak["rc"] == "timeout":
        fail("the run under hakmem timed out (hang?); last output:\n" + tail(hak["stdout"]))
    rc_differs = ref["rc"] != hak["rc"] and "timeout" not in (ref["rc"], hak["rc"])

    mods = {}
    for key, res in (("ref", ref), ("hak", hak)):
        mods[key], err = parse_summary(res, tests)
        if err:
            fail("%s run: cannot parse the result: %s; last output:\n%s"
                 % (res["mode"], err, tail(res["stdout"])))
    if mods["ref"] is not None and mods["hak"] is not None:
        bad = [t for t in tests if mods["ref"][t] != mods["hak"][t]]
        for t in bad:
            fail("%s: %s under hakmem, %s without" % (t, mods["hak"][t], mods["ref"][t]), t)
        if rc_differs:
            # the exit status follows the module results: a difference there explains it
            fail("regrtest exits %s under hakmem, %s without" % (hak["rc"], ref["rc"]),
                 bad[0] if bad else None)
    elif rc_differs:
        fail("regrtest exits %s under hakmem, %s without" % (hak["rc"], ref["rc"]))
        for t in tests:
            if mods["ref"][t] != "passed" and t not in bad:
                say("note: %s is '%s' without hakmem as well (compared as is)" % (t, mods["ref"][t]))
        counts = {}
        for v in mods["hak"].values():
            counts[v] = counts.get(v, 0) + 1
        if not bad:
            say("ok: same module results (%s)"
                % ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items())))

    cref, chak = parse_junit(ref), parse_junit(hak)
    if not cref:
        fail("no test cases in the reference run's junit XML")
    else:
        diff = sorted(set(cref) | set(chak))
        diff = [c for c in diff if cref.get(c) != chak.get(c)]
        for c in diff[:40]:
            fail("test case %s: %s under hakmem, %s without"
                 % (c, chak.get(c, "not run"), cref.get(c, "not run")), case_module(c))
        if len(diff) > 40:
            fail("... and %d more test case differences" % (len(diff) - 40),
                 case_module(diff[40]) if len({case_module(c) for c in diff[40:]}) == 1 else None)
        if not diff:
            counts = {}
            for v in chak.values():
                for o in v.split(","):
                    counts[o] = counts.get(o, 0) + 1
            say("ok: same outcome for all %d test cases (%s)"
                % (sum(counts.values()), ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items()))))

    for res in (ref, hak):
        hl = hakmem_lines(res)
        if hl:
            fail("%s run: %d \"hakmem:\" line(s) in the output:\n%s"
                 % (res["mode"], len(hl), "\n".join("    " + ln for ln in hl[:20])))

    if fails:
        for res in (ref, hak):
            say("%s run, last lines of stdout:\n%s" % (res["mode"], tail(res["stdout"], 40)))
            if res["stderr"].strip():
                say("%s run, last lines of stderr:\n%s" % (res["mode"], tail(res["stderr"], 15)))
    say("time: %.1f s without hakmem, %.1f s with" % (ref["time"], hak["time"]))
    return fails, suspects


if __name__ == "__main__":
    main()
