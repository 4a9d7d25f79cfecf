#!/usr/bin/env python3
"""Tests of `hakmem measure`, `hakmem ab` and `hakmem compare`: command-line parsing, the process-tree
rusage, output comparison, and one clear message with a non-zero exit for every failure."""

import csv
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HAKMEM = os.environ["TOOLTEST_HAKMEM"]
TPROG = os.environ["TOOLTEST_TPROG"]
LIB = os.environ["TOOLTEST_LIB"]
BUILD = Path(os.environ["TOOLTEST_BUILD"])
SOURCE = Path(os.environ["TOOLTEST_SOURCE"])
SCRIPT = SOURCE / "tools" / "hakmem_bench.py"

sys.path.insert(0, str(SOURCE / "tools"))
sys.dont_write_bytecode = True  # the modules are imported from the source tree: leave no __pycache__ there
import hakmem_bench as hb  # noqa: E402
import hakmem_apps  # noqa: E402

QUICK = ["--runs", "1", "--warmup", "0"]


def hakmem(*args, env=None, timeout=60):
    """The tool as a user runs it; returns (exit status, stdout, stderr)."""
    p = subprocess.run([HAKMEM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=timeout, check=False)
    return p.returncode, p.stdout, p.stderr


def bench_script(*args, env, timeout=60):
    """hakmem_bench.py without the hakmem binary in between, for tests that narrow PATH."""
    p = subprocess.run([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=timeout, check=False)
    return p.returncode, p.stdout, p.stderr


def measure(*argv):
    """`hakmem measure --fd` on argv: the fields it reports."""
    r, w = os.pipe()
    p = subprocess.run([HAKMEM, "measure", "--fd", str(w), "--", *argv], pass_fds=(w,), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60, check=False)
    os.close(w)
    with os.fdopen(r) as f:
        report = f.read()
    return p.returncode, dict(x.split("=", 1) for x in report.split())


def alive(pid):
    """Running, as opposed to gone or a zombie nobody has reaped yet."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


class TestParse(unittest.TestCase):
    root = SOURCE

    def parse(self, *argv):
        return hb.parse_ab(["--build-dir", str(BUILD), *argv], self.root)

    def error(self, *argv):
        with self.assertRaises(hb.UsageError) as cm:
            self.parse(*argv)
        return str(cm.exception)

    def test_program_after_dashes(self):
        plan = self.parse("--runs", "3", "glibc", "x.ini", "--", TPROG, "touch", "-1")
        self.assertEqual(plan.argv, [TPROG, "touch", "-1"])
        self.assertEqual(plan.program, Path(TPROG))
        self.assertEqual((plan.metric, plan.compare_output, plan.opts.runs), ("time", True, 3))
        self.assertEqual((plan.opts.A, plan.opts.B), ("glibc", "x.ini"))

    def test_program_found_on_path(self):
        plan = self.parse("A", "B", "--", "sh", "-c", "true")
        self.assertTrue(plan.argv[0].endswith("/sh") and plan.argv[1:] == ["-c", "true"])

    def test_bench_and_its_arguments(self):
        plan = self.parse("--bench", "ssot", "A", "B", "--", "1000")
        self.assertIsNone(plan.program)
        self.assertEqual(Path(plan.argv[0]).name, "ssot")
        self.assertEqual(plan.argv[1:], ["1000"])
        self.assertEqual((plan.metric, plan.compare_output), ("ops", False))

    def test_nothing_is_ssot(self):
        plan = self.parse("A", "B")
        self.assertEqual((Path(plan.argv[0]).name, plan.opts.bench), ("ssot", "ssot"))

    def test_metric_and_output_options(self):
        plan = self.parse("--metric", "rss", "--allow-output-diff", "A", "B", "--", TPROG)
        self.assertEqual((plan.metric, plan.compare_output), ("rss", False))

    def test_bad_options(self):
        self.assertIn("invalid choice: 'speed'", self.error("--metric", "speed", "A", "B", "--", TPROG))
        self.assertIn("--runs must be >= 1", self.error("--runs", "0", "A", "B", "--", TPROG))
        self.assertIn("a program goes after --", self.error("A", "B", TPROG))
        self.assertIn("--bench ssot --", self.error("A", "B", "--", "5000000"))
        self.assertIn("nosuchbench", self.error("--bench", "nosuchbench", "A", "B"))

    def test_bad_programs(self):
        self.assertIn("no such file", self.error("A", "B", "--", "/nonexistent/prog"))
        self.assertIn("command not found", self.error("A", "B", "--", "no-such-command-hakmem-test"))
        with tempfile.NamedTemporaryFile() as f:
            self.assertIn("not executable", self.error("A", "B", "--", f.name))
        self.assertIn("is a directory", self.error("A", "B", "--", "/tmp"))

    def test_compare_options(self):
        with self.assertRaises(hb.UsageError) as cm:
            hb.compare_parser(self.root).parse_args(["--suite", "everything"])
        self.assertIn("invalid choice", str(cm.exception))
        code, _, err = hakmem("compare", "--suite", "none")
        self.assertEqual(code, 2)
        self.assertIn("--suite none needs a PROGRAM", err)

    def test_verdict_direction(self):
        # time, CPU and RSS: lower is better, so a CI below -threshold is a GO for B.
        self.assertTrue(hb.verdict(-5, -3, 1, False).startswith("GO"))
        self.assertTrue(hb.verdict(3, 5, 1, False).startswith("NO-GO"))
        self.assertTrue(hb.verdict(3, 5, 1, True).startswith("GO"))
        self.assertTrue(hb.verdict(-0.5, 3, 1, True).startswith("NEUTRAL"))

    def test_result_parsing(self):
        self.assertEqual(hb.parse_ops("x\nops_per_sec=12.5 y=1\n"), 12.5)
        self.assertIsNone(hb.parse_ops("no number here\n"))
        tests, seconds = hakmem_apps.redis_rps('"test","rps","avg"\n"SET","1000.00","0.1"\n"GET","500.00","0.2"\n')
        self.assertEqual(tests, 2)
        self.assertAlmostEqual(seconds, 1 / 1000 + 1 / 500)


class TestMeasure(unittest.TestCase):
    def test_peak_rss_of_a_known_allocation(self):
        code, m = measure(TPROG, "touch", "64")
        self.assertEqual(code, 0)
        self.assertGreaterEqual(int(m["peak_rss_kb"]), 64 * 1024)
        self.assertEqual(m["exit"], "0")
        self.assertGreater(float(m["wall_s"]), 0)

    def test_peak_rss_counts_the_children(self):
        code, m = measure(TPROG, "child-touch", "64")
        self.assertEqual(code, 0)
        self.assertGreaterEqual(int(m["peak_rss_kb"]), 64 * 1024)

    def test_parent_rss_not_inherited(self):
        # This process grows to 200 MiB first: an RSS high-water mark carried over through
        # fork and exec would show up in the small program's figure.
        ballast = bytearray(200 << 20)
        for i in range(0, len(ballast), 4096):
            ballast[i] = 1
        code, m = measure(TPROG, "touch", "1")
        del ballast
        self.assertEqual(code, 0)
        self.assertLess(int(m["peak_rss_kb"]), 64 * 1024)

    def test_crash_and_exec_failure(self):
        code, m = measure(TPROG, "crash")
        self.assertEqual((code, m.get("signal")), (128 + 11, "11"))
        code, m = measure("/nonexistent/prog")
        self.assertEqual(code, 127)
        self.assertIn("exec_errno", m)

    def test_ab_reports_rss_time_and_cpu(self):
        code, out, err = hakmem("ab", *QUICK, "glibc", LIB, "--", TPROG, "touch", "64")
        self.assertEqual(code, 0, err)
        rss = [line for line in out.splitlines() if line.startswith("peak RSS")]
        self.assertEqual(len(rss), 1, out)
        median_a = int(rss[0].split()[2].replace(",", ""))
        self.assertGreaterEqual(median_a, 64 * 1024)
        self.assertRegex(out, r"(?m)^wall time .*<- judged")
        self.assertRegex(out, r"(?m)^CPU user\+sys ")
        self.assertRegex(out, r"(?m)^verdict on wall time: (GO|NO-GO|NEUTRAL)")


class TestAb(unittest.TestCase):
    def assert_one_error(self, err, *needles):
        lines = [line for line in err.splitlines() if line.startswith("hakmem: error:")]
        self.assertEqual(len(lines), 1, err)
        self.assertNotIn("Traceback", err)
        for n in needles:
            self.assertIn(n, lines[0])

    def test_missing_program(self):
        code, _, err = hakmem("ab", *QUICK, "glibc", LIB, "--", "/nonexistent/prog")
        self.assertEqual(code, 2)
        self.assert_one_error(err, "/nonexistent/prog", "no such file")

    def test_not_executable(self):
        with tempfile.NamedTemporaryFile() as f:
            code, _, err = hakmem("ab", *QUICK, "glibc", LIB, "--", f.name)
        self.assertEqual(code, 2)
        self.assert_one_error(err, f.name, "not executable")

    def test_crash(self):
        code, _, err = hakmem("ab", *QUICK, "glibc", LIB, "--", TPROG, "crash")
        self.assertEqual(code, 1)
        self.assert_one_error(err, "killed by SIGSEGV")
        self.assertIn("about to crash", err)  # the stderr tail

    def test_exit_status(self):
        code, _, err = hakmem("ab", *QUICK, "glibc", LIB, "--", TPROG, "exit", "3")
        self.assertEqual(code, 1)
        self.assert_one_error(err, "exit status 3")
        self.assertIn("exiting with status 3", err)

    def test_timeout_kills_the_tree(self):
        with tempfile.TemporaryDirectory() as d:
            pidfile = Path(d) / "pids"
            code, _, err = hakmem("ab", *QUICK, "--timeout", "1", "glibc", LIB, "--", TPROG, "hang", str(pidfile))
            self.assertEqual(code, 1)
            self.assert_one_error(err, "timed out after 1 s")
            pids = [int(x) for x in pidfile.read_text().split()]
        self.assertEqual(len(pids), 2)  # the program and its child
        deadline = time.monotonic() + 5
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse([p for p in pids if alive(p)], "left running after the timeout")

    def test_output_difference_between_a_and_b(self):
        code, _, err = hakmem("ab", *QUICK, "glibc", LIB, "--", TPROG, "env", "LD_PRELOAD")
        self.assertEqual(code, 1)
        self.assert_one_error(err, "differs between A and B", "--allow-output-diff")
        code, out, err = hakmem("ab", *QUICK, "--allow-output-diff", "glibc", LIB, "--", TPROG, "env", "LD_PRELOAD")
        self.assertEqual(code, 0, err)
        self.assertIn("verdict on wall time", out)

    def test_two_policies_and_ops_metric(self):
        configs = sorted((SOURCE / "config").glob("*.ini"))[:2]
        code, out, err = hakmem("ab", *QUICK, "--metric", "ops", str(configs[0]), str(configs[1]),
                                "--", TPROG, "ops", "1000")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"(?m)^ops/s .*<- judged")
        self.assertIn("verdict on ops/s: NEUTRAL", out)  # the same number on both sides
        self.assertIn("HAKMEM_CONFIG=", out)

    def test_sides_whose_paths_hold_equals_signs_and_spaces(self):
        # An existing file is that file, whatever its path holds: a policy named like a setting,
        # a library in a folder with a space and an '='.  Only HAKMEM_NAME=VALUE is a setting.
        with tempfile.TemporaryDirectory() as d:
            policy = Path(d) / "HAKMEM_PHASE91=off"
            policy.write_text("[phases]\nphase91 = off\n")
            odd = Path(d) / "b x" / "D phase91=true"
            odd.mkdir(parents=True)
            shutil.copy(LIB, odd / "libhakmem.so")
            code, out, err = hakmem("ab", *QUICK, "--metric", "ops", str(policy), str(odd / "libhakmem.so"),
                                    "--", TPROG, "ops", "1000")
            self.assertEqual(code, 0, err)
            self.assertIn(f"HAKMEM_CONFIG={policy}", out)
            code, out, err = hakmem("ab", *QUICK, "--metric", "ops", str(odd), "PHASE91=off",
                                    "--", TPROG, "ops", "1000")
            self.assertEqual(code, 2)
            self.assert_one_error(err, "'PHASE91=off'", "only variables whose name starts with HAKMEM_")


class TestApps(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.env = {**os.environ, "HAKMEM_TOOL": HAKMEM, "TMPDIR": str(self.dir)}

    def tearDown(self):
        self.tmp.cleanup()

    def summary(self, out_dir):
        with open(out_dir / "summary.csv") as f:
            return {(r["benchmark"], r["allocator"]): r for r in csv.DictReader(f)}

    def test_missing_package_others_still_run(self):
        sqlite = hakmem_apps.find("sqlite3", dict(os.environ))
        if not sqlite:
            self.skipTest("sqlite3 not installed")
        # A PATH with sqlite3 and nothing else: lua5.4 is "not installed".
        bindir = self.dir / "bin"
        bindir.mkdir()
        (bindir / "sqlite3").symlink_to(sqlite)
        out_dir = self.dir / "out"
        code, out, err = bench_script("compare", "--suite", "apps", "--apps", "lua,sqlite", "--runs", "1",
                                      "--allocators", "glibc", "--scale", "0.02", "--build-dir", str(BUILD),
                                      "--out", str(out_dir), env={**self.env, "PATH": str(bindir)})
        self.assertEqual(code, 1, err)
        self.assertNotIn("Traceback", err)
        final = [line for line in err.splitlines() if line.startswith("hakmem: error:")][-1]
        self.assertIn("lua5.4 not found on PATH", final)
        self.assertIn("Debian package lua5.4", final)
        self.assertEqual(self.summary(out_dir)[("sqlite", "glibc")]["status"], "ok")
        self.assertIn("lua: not run", (out_dir / "report.md").read_text())

    def test_busy_port(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            code, _, err = hakmem("compare", "--suite", "apps", "--apps", "redis", "--runs", "1",
                                  "--port", str(port), "--out", str(self.dir / "out"), env=self.env)
        self.assertEqual(code, 2)
        lines = [line for line in err.splitlines() if line.startswith("hakmem: error:")]
        self.assertEqual(len(lines), 1, err)
        self.assertIn(f"port {port} on 127.0.0.1 is busy", lines[0])

    def test_redis_started_and_stopped(self):
        if not all(hakmem_apps.find(p, dict(os.environ)) for p in ("redis-server", "redis-benchmark", "redis-cli")):
            self.skipTest("redis-server or redis-tools not installed")
        out_dir = self.dir / "out"
        code, out, err = hakmem("compare", "--suite", "apps", "--apps", "redis", "--runs", "1",
                                "--allocators", "glibc,hakmem", "--scale", "0.02", "--out", str(out_dir),
                                env=self.env)
        self.assertEqual(code, 0, err)
        rows = self.summary(out_dir)
        for alloc in ("glibc", "hakmem"):
            self.assertEqual(rows[("redis", alloc)]["status"], "ok", err)
            self.assertGreater(float(rows[("redis", alloc)]["median_ops_per_sec"]), 0)
            self.assertGreater(float(rows[("redis", alloc)]["median_peak_rss_kb"]), 1000)
        self.assertRegex((out_dir / "report.md").read_text(),
                         r"\| redis \| [0-9.]+x / [0-9.]+x / [0-9.]+x \|")  # hakmem against glibc
        # Its folder (under our TMPDIR) is named in the server's command line: none may be left.
        left = []
        for p in Path("/proc").iterdir():
            try:
                if p.name.isdigit() and str(self.dir).encode() in (p / "cmdline").read_bytes() and alive(int(p.name)):
                    left.append(p.name)
            except OSError:
                pass
        self.assertEqual(left, [])

    def test_compare_program_output_checked_against_glibc(self):
        out_dir = self.dir / "out"
        code, out, err = hakmem("compare", "--runs", "1", "--allocators", "glibc,hakmem", "--out", str(out_dir),
                                "--", TPROG, "env", "LD_PRELOAD", env=self.env)
        self.assertEqual(code, 1)
        rows = self.summary(out_dir)
        self.assertEqual(rows[("tools-tprog", "glibc")]["status"], "ok")
        self.assertEqual(rows[("tools-tprog", "hakmem")]["status"], "FAIL")
        self.assertIn("output differs from glibc's", rows[("tools-tprog", "hakmem")]["error"])


class TestExtra(unittest.TestCase):
    """compare --allocator NAME=PATH: a column of its own with real numbers, or one clear error
    and exit status 2 before anything runs."""

    # ssot at 1 % of its default steps: the whole sweep in well under a second per allocator.
    SMALL = ["--runs", "1", "--no-pgo", "--benches", "ssot", "--bench-args", "ssot=200000 400",
             "--build-dir", str(BUILD)]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.env = {**os.environ, "TMPDIR": str(self.dir)}
        # A copy and a symlink: two more libraries that load, without depending on which
        # allocators Debian has installed here.
        self.copy = self.dir / "libhakmem-copy.so"
        shutil.copy(LIB, self.copy)
        self.link = self.dir / "libhakmem-link.so"
        self.link.symlink_to(LIB)
        self.out = self.dir / "out"

    def tearDown(self):
        self.tmp.cleanup()

    def compare(self, *args):
        return hakmem("compare", *self.SMALL, "--out", str(self.out), *args, env=self.env)

    def summary(self):
        with open(self.out / "summary.csv") as f:
            return {(r["benchmark"], r["allocator"]): r for r in csv.DictReader(f)}

    def test_a_path_with_a_space_and_an_equals_sign(self):
        # ld.so splits LD_PRELOAD at spaces: such a library goes in by name from LD_LIBRARY_PATH.
        odd = self.dir / "with space" / "D x=1"
        odd.mkdir(parents=True)
        shutil.copy(LIB, odd / "libhakmem-odd.so")
        code, _, err = self.compare("--allocators", "glibc,odd", "--allocator", f"odd={odd / 'libhakmem-odd.so'}")
        self.assertEqual(code, 0, err)
        self.assertEqual(self.summary()[("ssot", "odd")]["status"], "ok")
        with open(self.out / "raw.csv") as f:
            raw = [r for r in csv.DictReader(f) if r["allocator"] == "odd"]
        self.assertIn("LD_PRELOAD=libhakmem-odd.so", raw[0]["command"])
        self.assertIn(str(odd), raw[0]["command"])
        # A path, '=' and all, is never taken for a name: it wants a name of its own.
        shutil.rmtree(self.out)
        self.assert_refused(["--allocator", str(odd / "libhakmem-odd.so")], "wants NAME=PATH")

    def test_two_more_columns_with_numbers(self):
        code, out, err = self.compare("--allocator", f"hakmem-copy={self.copy}",
                                      "--allocator", f"hakmem-link={self.link}")
        self.assertEqual(code, 0, err)
        rows = self.summary()
        for name, lib in (("hakmem-copy", self.copy), ("hakmem-link", Path(LIB).resolve())):
            row = rows[("ssot", name)]
            self.assertEqual((row["status"], row["label"], row["library"]), ("ok", name, str(lib)))
            self.assertGreater(float(row["median_ops_per_sec"]), 1e5)
            self.assertGreater(float(row["median_peak_rss_kb"]), 100)
            self.assertGreater(float(row["speed_vs_glibc"]), 0)
            self.assertGreater(float(row["rss_vs_glibc"]), 0)
            # The same number in the console table and in report.md.
            line = rf"(?m)^\| {name} \| [0-9.]+ [kM]? ?\| [0-9.]+x \| [0-9,]+ KB \| [0-9.]+x \|$"
            self.assertRegex(out, line)
            self.assertRegex((self.out / "report.md").read_text(), line)
            self.assertIn(f"{name}: {lib} (given with --allocator)", err)
            for chart in ("throughput.svg", "peak_rss.svg"):
                self.assertRegex((self.out / chart).read_text(), rf"<title>ssot {name}: [0-9.]+x</title>")
        # The user's columns stand after the installed peers and before hakmem's own.
        order = [a for (_, a) in rows]
        self.assertLess(order.index("glibc"), order.index("hakmem-copy"))
        self.assertEqual(order.index("hakmem-link"), order.index("hakmem-copy") + 1)
        self.assertEqual(order[-1], "hakmem")
        with open(self.out / "raw.csv") as f:
            raw = [r for r in csv.DictReader(f) if r["allocator"] == "hakmem-copy"]
        self.assertEqual(len(raw), 1)
        self.assertIn(f"LD_PRELOAD={self.copy}", raw[0]["command"])
        # Two bars of their own colour each, not the grey of an unknown key.
        svg = (self.out / "throughput.svg").read_text()
        fills = [re.search(rf'fill="(#[0-9a-f]+)"><title>ssot {n}:', svg).group(1)
                 for n in ("hakmem-copy", "hakmem-link")]
        self.assertNotEqual(fills[0], fills[1])
        self.assertNotIn("#333", fills)

    def test_allocators_takes_the_new_names(self):
        code, out, err = self.compare("--allocators", "glibc,hakmem-copy", "--allocator", f"hakmem-copy={self.copy}")
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(a for (_, a) in self.summary()), ["glibc", "hakmem-copy"])
        self.assertIn("left out by --allocators: ", err)

    def test_a_peer_where_hakmem_stands(self):
        # Against a program (not a benchmark) the report sets each hakmem build against every
        # peer: the user's library is a peer, not a hakmem build, even when it is one.
        code, out, err = hakmem("compare", "--runs", "1", "--no-pgo", "--build-dir", str(BUILD), "--out",
                                str(self.out), "--allocators", "glibc,hakmem-copy,hakmem",
                                "--allocator", f"hakmem-copy={self.copy}", "--", TPROG, "touch", "8", env=self.env)
        self.assertEqual(code, 0, err)
        self.assertIn("| workload | glibc | hakmem-copy |", out)
        self.assertNotIn("#### hakmem-copy", out)
        self.assertGreaterEqual(float(self.summary()[("tools-tprog", "hakmem-copy")]["median_peak_rss_kb"]),
                                8 * 1024)

    def assert_refused(self, args, *needles):
        code, out, err = self.compare(*args)
        self.assertEqual(code, 2, err)
        lines = [line for line in err.splitlines() if line.startswith("hakmem: error:")]
        self.assertEqual(len(lines), 1, err)
        self.assertNotIn("Traceback", err)
        for n in needles:
            self.assertIn(n, lines[0])
        # Refused before anything ran: no run on stderr, no results folder.
        self.assertNotIn("[compare]", err)
        self.assertFalse(self.out.exists())

    def test_bad_input(self):
        text = self.dir / "notes.txt"
        text.write_text("not a library, only text long enough to hold an ELF header\n" * 4)
        cases = [
            (["--allocator", str(self.copy)], "wants NAME=PATH"),
            (["--allocator", f"={self.copy}"], "the name before '=' is empty"),
            (["--allocator", f"my,lib={self.copy}"], "the name may hold only letters"),
            (["--allocator", f"mimalloc={self.copy}"], "'mimalloc' is the name of the built-in mimalloc"),
            (["--allocator", f"Hakmem-PGO={self.copy}"], "the name of the built-in hakmem-pgo"),
            (["--allocator", f"mine={self.copy}", "--allocator", f"Mine={self.link}"],
             "the name 'Mine' is taken by --allocator 'mine="),
            (["--allocator", "mine="], "no library after '='"),
            (["--allocator", "mine=/nonexistent/libx.so"], "/nonexistent/libx.so: no such file"),
            (["--allocator", f"mine={self.dir}"], "is a directory, not a shared library"),
            (["--allocator", f"mine={text}"], "not a loadable shared library", "invalid ELF header"),
            (["--allocator", f"mine={TPROG}"], "not a loadable shared library", "cannot dynamically load"),
            (["--allocator", f"mine={self.dir / 'a:b' / 'libhakmem.so'}"], "no such file"),
            (["--allocator", f"mine={self.copy}", "--allocators", "glibc,yours"],
             "not available: yours", "mine"),
        ]
        for args, *needles in cases:
            with self.subTest(args=args):
                self.assert_refused(args, *needles)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *sys.argv[1:]], verbosity=2)
