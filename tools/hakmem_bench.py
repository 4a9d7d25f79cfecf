#!/usr/bin/env python3
"""hakmem benchmark driver: `ab` runs one benchmark under two policies or builds, with a bootstrap
confidence interval and a verdict; `compare` runs every built benchmark under every allocator."""

import argparse
import csv
import datetime
import html
import json
import os
import platform
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, NoReturn, Optional, Sequence, Tuple

# Benchmarks in the order reports list them; any other executable in bench/ comes after.
KNOWN_BENCHES = ("ssot", "larson", "prodcons", "realloc", "large", "frag")

# Other allocators and their sonames.  tcmalloc_minimal, not libtcmalloc: the full library
# adds heap-profiler hooks that are not part of the allocator being compared.
OTHER_ALLOCATORS = (
    ("mimalloc", "libmimalloc.so.2"),
    ("jemalloc", "libjemalloc.so.2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4"),
)
# Searched when `ldconfig -p` does not know a library; {multiarch} is e.g. x86_64-linux-gnu.
LIB_DIRS = ("/usr/lib/{multiarch}", "/lib/{multiarch}", "/usr/local/lib", "/usr/lib64", "/usr/lib")

# Inherited settings that would silently change what is measured.
SCRUBBED_ENV_PREFIXES = ("HAKMEM_",)
SCRUBBED_ENV_NAMES = ("LD_PRELOAD",)

# The benchmarks report ru_maxrss, and Linux carries the RSS high-water mark of the parent
# over into a child through fork/vfork and exec: started straight from this Python process
# every benchmark would report at least Python's own ~15 MB.  A forking /bin/sh in between
# is a small parent (the benchmark's own "$@" is run as a child, not exec'd).
LAUNCHER = ("/bin/sh", "-c", '"$@"; exit $?', "sh")
LAUNCHER_NOTE = ("each command runs as a child of /bin/sh -c '\"$@\"; exit $?' so that peak_rss_kb "
                 "does not inherit this Python process's RSS")

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101
DEFAULT_TIMEOUT = 600.0
STDERR_TAIL_LINES = 6

# Fixed colours per allocator so the charts of different sweeps read the same way.
COLOURS = {
    "glibc": "#7f7f7f",
    "mimalloc": "#1f77b4",
    "jemalloc": "#2ca02c",
    "tcmalloc": "#9467bd",
    "hakmem": "#ff7f0e",
    "hakmem-pgo": "#d62728",
}


@dataclass
class Setup:
    """One way of running a benchmark: which library is preloaded and which policy file."""

    key: str
    label: str
    lib: Optional[Path] = None
    config: Optional[Path] = None
    policy_env: Dict[str, str] = field(default_factory=dict)

    def env(self) -> Dict[str, str]:
        extra = dict(self.policy_env)
        if self.lib:
            extra["LD_PRELOAD"] = str(self.lib)
        if self.config:
            extra["HAKMEM_CONFIG"] = str(self.config)
        return extra


@dataclass
class RunResult:
    ok: bool
    metrics: Dict[str, object] = field(default_factory=dict)
    error: str = ""
    returncode: Optional[int] = None
    stderr_tail: str = ""


def fail(msg: str) -> NoReturn:
    print(f"hakmem: {msg}", file=sys.stderr)
    sys.exit(2)


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def project_root() -> Path:
    """The source tree this script belongs to, or the working directory for an installed copy."""
    here = Path(__file__).resolve().parent.parent
    if (here / "meson.build").is_file() and (here / "bench").is_dir():
        return here
    return Path.cwd()


def clean_env() -> Tuple[Dict[str, str], List[str]]:
    env, dropped = {}, []
    for name, value in os.environ.items():
        if name in SCRUBBED_ENV_NAMES or name.startswith(SCRUBBED_ENV_PREFIXES):
            dropped.append(name)
        else:
            env[name] = value
    return env, sorted(dropped)


def bench_argv(bench: Path, args: Sequence[str], setup: Setup) -> List[str]:
    """The benchmark's command, with the allocator's variables set for it alone."""
    extra = setup.env()
    argv = [str(bench), *args]
    if extra:
        argv = ["env"] + [f"{k}={v}" for k, v in extra.items()] + argv
    return argv


def command_line(bench: Path, args: Sequence[str], setup: Setup) -> str:
    return shlex.join(bench_argv(bench, args, setup))


def parse_value(text: str) -> object:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_result_line(stdout: str) -> Optional[Dict[str, object]]:
    """The last `bench=... ops_per_sec=...` line: benchmarks may print notes before it."""
    for line in reversed(stdout.splitlines()):
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "bench" in fields and "ops_per_sec" in fields:
            metrics = {k: parse_value(v) for k, v in fields.items()}
            if isinstance(metrics["ops_per_sec"], (int, float)):
                return metrics
    return None


def describe_exit(code: int) -> str:
    # The shell launcher reports a benchmark killed by signal N as status 128+N.
    signo = -code if code < 0 else code - 128 if code > 128 else 0
    if signo:
        try:
            return f"killed by {signal.Signals(signo).name}"
        except ValueError:
            return f"exit status {code}"
    return f"exit status {code}"


def run_once(bench: Path, args: Sequence[str], setup: Setup, base_env: Dict[str, str], timeout: float) -> RunResult:
    argv = [*LAUNCHER, *bench_argv(bench, args, setup)]
    try:
        # Own session, so a timeout or Ctrl-C can kill the shell and the benchmark together.
        proc = subprocess.Popen(argv, env=base_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return RunResult(False, error=f"cannot start: {exc}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return RunResult(False, error=f"timed out after {timeout:g} s")
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    code = proc.returncode
    tail = "\n".join(stderr.splitlines()[-STDERR_TAIL_LINES:])
    # ld.so only warns and runs the program with glibc when a preload fails; that would
    # file glibc's numbers under another allocator's name.
    preload_errors = [line for line in stderr.splitlines() if "ld.so" in line and "LD_PRELOAD" in line]
    if preload_errors:
        return RunResult(False, error=f"preload failed: {preload_errors[0].strip()}", returncode=code, stderr_tail=tail)
    if code != 0:
        return RunResult(False, error=describe_exit(code), returncode=code, stderr_tail=tail)
    metrics = parse_result_line(stdout)
    if metrics is None:
        shown = stdout.strip().splitlines()[-1:] or ["(nothing)"]
        return RunResult(False, error=f"no result line in output: {shown[0][:120]}", returncode=0, stderr_tail=tail)
    return RunResult(True, metrics=metrics, returncode=0, stderr_tail=tail)


def report_failure(what: str, cmd: str, res: RunResult) -> None:
    progress(f"FAIL {what}: {res.error}")
    progress(f"     command: {cmd}")
    for line in res.stderr_tail.splitlines():
        progress(f"     stderr: {line}")


def fmt_ops(v: Optional[float]) -> str:
    # The large-block benchmark runs a few thousand ops/s; "0.00 M" would hide it.
    if v is None:
        return "FAIL"
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e3:
        return f"{v / 1e3:.2f} k"
    return f"{v:.0f}"


def fmt_kb(v: Optional[float]) -> str:
    return "FAIL" if v is None else f"{v:,.0f} KB"


def fmt_ratio(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def discover_benches(bench_dir: Path) -> List[str]:
    found = []
    if bench_dir.is_dir():
        for p in bench_dir.iterdir():
            if p.is_file() and os.access(p, os.X_OK) and not p.name.endswith(".so") and p.name not in found:
                found.append(p.name)
    known = [b for b in KNOWN_BENCHES if b in found]
    return known + sorted(b for b in found if b not in KNOWN_BENCHES)


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def pgo_mode(build_dir: Path) -> Optional[str]:
    """b_pgo of a Meson build dir ('off', 'generate', 'use'), or None if unknown."""
    info = build_dir / "meson-info" / "intro-buildoptions.json"
    try:
        for opt in json.loads(info.read_text()):
            if opt.get("name") == "b_pgo":
                return str(opt.get("value"))
    except (OSError, ValueError):
        pass
    return None


def find_system_lib(soname: str) -> Optional[Path]:
    # Debian keeps ldconfig in /sbin, which is not on a normal user's PATH.
    for ldconfig in ("ldconfig", "/sbin/ldconfig"):
        try:
            out = subprocess.run([ldconfig, "-p"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, check=False).stdout
        except OSError:
            continue
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0] == soname and parts[-2:-1] == ["=>"] and Path(parts[-1]).is_file():
                return Path(parts[-1])
        break
    multiarch = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"
    for d in LIB_DIRS:
        path = Path(d.format(multiarch=multiarch)) / soname
        if path.is_file():
            return path
    return None


# --------------------------------------------------------------------------- ab


def resolve_ab_side(spec: str, side: str, build_dir: Path) -> Setup:
    """A or B: `build:DIR`, a build directory, a shared library, an INI policy file,
    `HAKMEM_VAR=VALUE[,...]` (policy variables over the defaults: a phase switched without a
    file of its own), or `glibc` (nothing preloaded: the system allocator, as compare runs it)."""
    if spec == "glibc":
        return Setup(side, "glibc")
    if re.fullmatch(r"HAKMEM_[A-Z0-9_]+=[^,]*(,HAKMEM_[A-Z0-9_]+=[^,]*)*", spec):
        policy_env = dict(item.split("=", 1) for item in spec.split(","))
        lib = build_dir / "libhakmem.so"
        if not lib.is_file():
            fail(f"ab: {side} sets policy variables, but {lib} is not built (run: ninja -C {build_dir})")
        check_policy_env(policy_env, side, build_dir)
        return Setup(side, spec, lib=lib.resolve(), policy_env=policy_env)
    if spec.startswith("build:"):
        lib = Path(spec[len("build:"):]) / "libhakmem.so"
    elif Path(spec).is_dir():
        lib = Path(spec) / "libhakmem.so"
    elif Path(spec).is_file() and is_elf(Path(spec)):
        lib = Path(spec)
    elif Path(spec).is_file():
        config = Path(spec).resolve()
        lib = build_dir / "libhakmem.so"
        if not lib.is_file():
            fail(f"ab: {side} is a policy file, but {lib} is not built (run: ninja -C {build_dir})")
        check_policy(config, side, build_dir)
        return Setup(side, spec, lib=lib.resolve(), config=config)
    else:
        fail(f"ab: {side} '{spec}': no such file; give an INI file, a libhakmem .so, or build:DIR")
    if not lib.is_file():
        fail(f"ab: {side} '{spec}': {lib} not found")
    if pgo_mode(lib.parent) == "generate":
        progress(f"warning: {side} ({lib}) is an instrumented b_pgo=generate build: it measures profiling "
                 "overhead and adds to its profile; finish it with scripts/pgo.sh")
    return Setup(side, spec, lib=lib.resolve())


def check_policy(config: Path, side: str, build_dir: Path) -> None:
    """A misspelt key keeps its default, so an unchecked A/B could compare a policy with itself."""
    tool = build_dir / "tools" / "hakmem"
    if not tool.is_file():
        progress(f"warning: {tool} not built; {config} not checked")
        return
    env, _ = clean_env()
    proc = subprocess.run([str(tool), "config", "check", str(config)], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        fail(f"ab: {side} policy {config} has errors:\n{proc.stderr.rstrip()}")
    for line in proc.stderr.splitlines():
        progress(f"{side} policy: {line}")


def check_policy_env(policy_env: Dict[str, str], side: str, build_dir: Path) -> None:
    """A misspelt variable or a bad value would leave the default in force: refuse it."""
    tool = build_dir / "tools" / "hakmem"
    if not tool.is_file():
        progress(f"warning: {tool} not built; {side}'s variables not checked")
        return
    env, _ = clean_env()
    env.update(policy_env)
    proc = subprocess.run([str(tool), "config", "show"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        fail(f"ab: {side} policy variables have errors:\n{proc.stderr.rstrip()}")
    for line in proc.stderr.splitlines():
        progress(f"{side} policy: {line}")


def bootstrap_delta_ci(a: Sequence[float], b: Sequence[float], resamples: int, seed: int) -> Tuple[float, float]:
    """95% percentile-bootstrap interval of (median B / median A - 1) in percent."""
    rng = random.Random(seed)
    deltas = []
    for _ in range(resamples):
        ma = statistics.median(rng.choices(a, k=len(a)))
        mb = statistics.median(rng.choices(b, k=len(b)))
        deltas.append((mb / ma - 1.0) * 100.0)
    cuts = statistics.quantiles(deltas, n=40, method="inclusive")
    return cuts[0], cuts[-1]


def verdict(lo: float, hi: float, threshold: float) -> str:
    if lo > threshold:
        return f"GO (the whole CI is above +{threshold:g} %)"
    if hi < -threshold:
        return f"NO-GO (the whole CI is below -{threshold:g} %)"
    return f"NEUTRAL (the CI reaches into [-{threshold:g} %, +{threshold:g} %])"


def write_ab_csv(path: Path, rows: List[Dict[str, object]]) -> None:
    keys: List[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def cmd_ab(argv: List[str]) -> int:
    root = project_root()
    bench_args: List[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(
        prog="hakmem ab",
        description="Run one benchmark under A and B, interleaved, and decide whether B is faster. "
                    "A and B are each an INI policy or HAKMEM_VAR=VALUE[,...] (run under --build-dir's "
                    "libhakmem.so), a libhakmem .so "
                    "(or any allocator's), build:DIR (DIR/libhakmem.so), or glibc (nothing preloaded).",
        epilog="Arguments after -- go to the benchmark, e.g. hakmem ab A.ini B.ini -- 5000000")
    p.add_argument("--bench", default="ssot", help="benchmark in BUILD_DIR/bench (default: ssot)")
    p.add_argument("--runs", type=int, default=10, help="measured runs of each side (default: 10)")
    p.add_argument("--warmup", type=int, default=1, help="discarded runs of each side first (default: 1)")
    p.add_argument("--threshold", type=float, default=1.0,
                   help="percent the whole CI must clear for GO or NO-GO (default: 1)")
    p.add_argument("--build-dir", type=Path, default=root / "build",
                   help="build with the benchmarks (and the library for INI sides); default: build")
    p.add_argument("--csv", type=Path, help="write every run (warm-ups included) to this CSV file")
    p.add_argument("--resamples", type=int, default=BOOTSTRAP_RESAMPLES, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before a run counts as failed")
    p.add_argument("A")
    p.add_argument("B")
    opts = p.parse_args(argv)
    if opts.runs < 1 or opts.warmup < 0 or opts.threshold < 0 or opts.resamples < 1:
        p.error("--runs must be >= 1, --warmup and --threshold >= 0")

    build_dir = opts.build_dir
    bench = build_dir / "bench" / opts.bench
    if not bench.is_file():
        have = ", ".join(discover_benches(build_dir / "bench")) or "none"
        fail(f"ab: {bench} not found (built benchmarks: {have}; run: ninja -C {build_dir})")
    bench = bench.resolve()
    sides = [resolve_ab_side(opts.A, "A", build_dir), resolve_ab_side(opts.B, "B", build_dir)]
    base_env, dropped = clean_env()
    if dropped:
        progress(f"not passed on to the benchmark: {', '.join(dropped)} (put policy settings in an INI file)")

    rows: List[Dict[str, object]] = []
    ops = ab_runs(bench, bench_args, sides, opts, base_env, rows)
    if opts.csv:
        write_ab_csv(opts.csv, rows)
    if ops is None:
        return 1
    ab_report(opts, bench, bench_args, sides, dropped, ops)
    if opts.csv:
        print(f"raw runs: {opts.csv}")
    return 0


def ab_runs(bench: Path, bench_args: List[str], sides: List[Setup], opts: argparse.Namespace,
            base_env: Dict[str, str], rows: List[Dict[str, object]]) -> Optional[Dict[str, List[float]]]:
    """Warm-ups then measured runs, A B A B ...; every run is added to rows.  None if a run failed."""
    ops: Dict[str, List[float]] = {s.key: [] for s in sides}
    for i in range(opts.warmup + opts.runs):
        measured = i >= opts.warmup
        tag = f"run {i + 1 - opts.warmup}/{opts.runs}" if measured else f"warm-up {i + 1}/{opts.warmup}"
        for s in sides:
            res = run_once(bench, bench_args, s, base_env, opts.timeout)
            rows.append({"phase": "measured" if measured else "warmup", "round": i + 1, "side": s.key,
                         "spec": s.label, "library": s.lib or "", "config": s.config or "",
                         "status": "ok" if res.ok else "FAIL", "error": res.error, **res.metrics})
            if not res.ok:
                # One side failing makes the comparison meaningless; stop rather than skew it.
                report_failure(f"{bench.name} under {s.key} ({s.label})", command_line(bench, bench_args, s), res)
                return None
            value = float(res.metrics["ops_per_sec"])
            progress(f"[ab] {tag:>13} {s.key}: {fmt_ops(value)} ops/s")
            if measured:
                ops[s.key].append(value)
    return ops


def ab_report(opts: argparse.Namespace, bench: Path, bench_args: List[str], sides: List[Setup],
              dropped: List[str], ops: Dict[str, List[float]]) -> None:
    medians = {k: statistics.median(v) for k, v in ops.items()}
    delta = (medians["B"] / medians["A"] - 1.0) * 100.0
    lo, hi = bootstrap_delta_ci(ops["A"], ops["B"], opts.resamples, opts.seed)
    print(f"benchmark: {opts.bench}, {opts.runs} measured runs per side after {opts.warmup} warm-up, "
          "interleaved A B A B ...")
    for s in sides:
        print(f"{s.key}: {s.label}")
        print(f"   command: {command_line(bench, bench_args, s)}")
    print(f"   ({LAUNCHER_NOTE})")
    if dropped:
        print(f"   (removed from the inherited environment: {', '.join(dropped)})")
    for key, values in ops.items():
        print(f"median ops/s {key}: {medians[key]:,.0f}   (min {min(values):,.0f}, max {max(values):,.0f})")
    print(f"delta B vs A: {delta:+.2f} %")
    print(f"95% CI of the delta (bootstrap of medians, {opts.resamples} resamples, seed {opts.seed}): "
          f"[{lo:+.2f} %, {hi:+.2f} %]")
    if opts.runs < 5:
        print(f"note: with {opts.runs} runs per side the interval is rough; use --runs 10 or more")
    print(f"verdict: {verdict(lo, hi, opts.threshold)}")


# ---------------------------------------------------------------------- compare


def compare_setups(build_dir: Path, pgo_dir: Optional[Path], pgo_explicit: bool,
                   wanted: Optional[List[str]]) -> Tuple[List[Setup], List[str]]:
    """Every allocator to run, plus one line per allocator saying where it came from or why not."""
    notes = []
    setups = [Setup("glibc", "glibc")]
    notes.append("glibc: the system allocator (no preload)")
    for key, soname in OTHER_ALLOCATORS:
        path = find_system_lib(soname)
        if path:
            setups.append(Setup(key, key, lib=path))
            notes.append(f"{key}: found {path}")
        else:
            notes.append(f"{key}: skipped, {soname} not installed (scripts/deps.sh bench installs it)")
    std = build_dir / "libhakmem.so"
    if not std.is_file():
        fail(f"compare: {std} not found (run: ninja -C {build_dir})")
    setups.append(Setup("hakmem", "hakmem Standard", lib=std.resolve()))
    notes.append(f"hakmem Standard: {std.resolve()}")
    pgo = pgo_setup(pgo_dir, pgo_explicit, std, notes)
    if pgo:
        setups.append(pgo)
    if wanted:
        unknown = [w for w in wanted if w not in {s.key for s in setups}]
        if unknown:
            fail(f"compare: --allocators: not available: {', '.join(unknown)} "
                 f"(available: {', '.join(s.key for s in setups)})")
        left_out = [s.key for s in setups if s.key not in wanted]
        if left_out:
            notes.append(f"left out by --allocators: {', '.join(left_out)}")
        setups = [s for s in setups if s.key in wanted]
    return setups, notes


def pgo_setup(pgo_dir: Optional[Path], explicit: bool, std: Path, notes: List[str]) -> Optional[Setup]:
    if pgo_dir is None:
        notes.append("hakmem FAST PGO: skipped (--no-pgo)")
        return None
    lib = pgo_dir / "libhakmem.so"
    if not lib.is_file():
        if explicit:
            fail(f"compare: {lib} not found (build it with scripts/pgo.sh)")
        notes.append(f"hakmem FAST PGO: skipped, {lib} not found; make it with scripts/pgo.sh")
        return None
    mode = pgo_mode(pgo_dir)
    if mode not in ("use", None):
        # generate: an interrupted training (instrumented, slow); off: not a PGO build at all.
        notes.append(f"hakmem FAST PGO: skipped, {pgo_dir} is configured with b_pgo={mode}; rerun scripts/pgo.sh")
        return None
    notes.append(f"hakmem FAST PGO: {lib.resolve()}")
    # A PGO library older than the Standard one was built from older sources.
    if lib.stat().st_mtime < std.stat().st_mtime:
        notes.append(f"warning: {lib} is older than {std}; rerun scripts/pgo.sh for a current FAST PGO build")
    return Setup("hakmem-pgo", "hakmem FAST PGO", lib=lib.resolve())


def parse_bench_args(items: Sequence[str]) -> Dict[str, List[str]]:
    out = {}
    for item in items:
        name, sep, args = item.partition("=")
        if not sep or not name:
            fail(f"compare: --bench-args wants NAME=ARGS, got '{item}'")
        out[name] = shlex.split(args)
    return out


def median_or_none(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def ratio(v: Optional[float], base: Optional[float]) -> Optional[float]:
    return v / base if v is not None and base else None


def metric_median(runs: List[RunResult], key: str) -> Optional[float]:
    return median_or_none([float(r.metrics[key]) for r in runs if isinstance(r.metrics.get(key), (int, float))])


def summarise(benches: List[str], setups: List[Setup], results: Dict[Tuple[str, str], List[RunResult]],
              failed: Dict[Tuple[str, str], str]) -> List[Dict[str, object]]:
    rows = []
    for bench in benches:
        cells = {}
        for s in setups:
            # A cell with any failed run reports nothing but FAIL: its other runs may be wrong too.
            runs = [] if (bench, s.key) in failed else [r for r in results[(bench, s.key)] if r.ok]
            ops = [float(r.metrics["ops_per_sec"]) for r in runs]
            cells[s.key] = {
                "benchmark": bench, "allocator": s.key, "label": s.label, "library": str(s.lib or "libc"),
                "status": "FAIL" if (bench, s.key) in failed else "ok", "runs_ok": len(runs),
                "error": failed.get((bench, s.key), ""),
                "median_ops_per_sec": median_or_none(ops),
                "min_ops_per_sec": min(ops, default=None),
                "max_ops_per_sec": max(ops, default=None),
                "median_peak_rss_kb": metric_median(runs, "peak_rss_kb"),
                "median_final_rss_kb": metric_median(runs, "final_rss_kb"),
                "median_live_kb": metric_median(runs, "live_kb"),
            }
        base = cells.get("glibc", {})
        for c in cells.values():
            c["ops_vs_glibc"] = ratio(c["median_ops_per_sec"], base.get("median_ops_per_sec"))
            c["rss_vs_glibc"] = ratio(c["median_peak_rss_kb"], base.get("median_peak_rss_kb"))
            c["final_rss_vs_glibc"] = ratio(c["median_final_rss_kb"], base.get("median_final_rss_kb"))
            rows.append(c)
    return rows


def markdown_tables(benches: List[str], summary: List[Dict[str, object]]) -> str:
    out = []
    for bench in benches:
        rows = [r for r in summary if r["benchmark"] == bench]
        has_final = any(r["median_final_rss_kb"] is not None for r in rows)
        live = [r["median_live_kb"] for r in rows if r["median_live_kb"] is not None]
        title = f"### {bench}"
        if live:
            title += f" (live data at the end: {statistics.median(live):,.0f} KB)"
        out.append(title)
        out.append("")
        head = "| allocator | median ops/s | vs glibc | median peak RSS | RSS vs glibc |"
        rule = "|---|---:|---:|---:|---:|"
        if has_final:
            head += " median final RSS | final RSS vs glibc |"
            rule += "---:|---:|"
        out += [head, rule]
        for r in rows:
            line = (f"| {r['label']} | {fmt_ops(r['median_ops_per_sec'])} | {fmt_ratio(r['ops_vs_glibc'])} "
                    f"| {fmt_kb(r['median_peak_rss_kb'])} | {fmt_ratio(r['rss_vs_glibc'])} |")
            if has_final:
                line += f" {fmt_kb(r['median_final_rss_kb'])} | {fmt_ratio(r['final_rss_vs_glibc'])} |"
            out.append(line)
        out.append("")
    return "\n".join(out)


def nice_step(top: float) -> float:
    for step in (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100):
        if top / step <= 8:
            return step
    return 10 ** len(str(int(top)))


def svg_grouped_bars(title: str, subtitle: str, groups: List[str], series: List[Setup],
                     values: Dict[Tuple[str, str], Optional[float]], failed: Dict[Tuple[str, str], str]) -> str:
    """Grouped bar chart of ratios to glibc, one group per benchmark; a missing value is
    labelled FAIL (the cell failed) or n/a (glibc failed, so there is nothing to divide by)."""
    bar_w, gap, left, top, bottom, right = 20, 28, 64, 96, 48, 24
    plot_h = 300
    group_w = len(series) * bar_w
    width = max(left + right + len(groups) * (group_w + gap) + gap, 560)
    height = top + plot_h + bottom
    present = [v for v in values.values() if v is not None]
    step = nice_step(max(present + [1.0]) * 1.15)
    y_max = step * (int(max(present + [1.0]) * 1.15 / step) + 1)

    def y(v: float) -> float:
        return top + plot_h - v / y_max * plot_h

    e = html.escape
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{left}" y="22" font-size="16" font-weight="bold">{e(title)}</text>',
             f'<text x="{left}" y="40" fill="#555">{e(subtitle)}</text>']
    lx, ly = left, 62
    for s in series:
        label_w = 18 + 7 * len(s.label) + 16
        if lx + label_w > width - right:
            lx, ly = left, ly + 18
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{COLOURS.get(s.key, "#333")}"/>')
        parts.append(f'<text x="{lx + 16}" y="{ly}">{e(s.label)}</text>')
        lx += label_w
    tick = 0.0
    while tick <= y_max + 1e-9:
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" fill="#555">{tick:g}x</text>')
        tick += step
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(1):.1f}" y2="{y(1):.1f}" '
                 'stroke="#333" stroke-dasharray="5,4"/>')
    for gi, g in enumerate(groups):
        gx = left + gap + gi * (group_w + gap)
        for si, s in enumerate(series):
            x = gx + si * bar_w
            v = values.get((g, s.key))
            if v is None:
                mark = "FAIL" if (g, s.key) in failed else "n/a"
                parts.append(f'<text transform="translate({x + bar_w / 2 + 4:.1f},{y(0) - 4:.1f}) rotate(-90)" '
                             f'fill="#c00" font-size="10">{mark}</text>')
                continue
            parts.append(f'<rect x="{x + 1}" y="{y(v):.1f}" width="{bar_w - 2}" height="{y(0) - y(v):.1f}" '
                         f'fill="{COLOURS.get(s.key, "#333")}"><title>{e(g)} {e(s.label)}: {v:.2f}x</title></rect>')
            parts.append(f'<text transform="translate({x + bar_w / 2 + 3.5:.1f},{y(v) - 3:.1f}) rotate(-90)" '
                         f'font-size="10">{v:.2f}</text>')
        parts.append(f'<text x="{gx + group_w / 2:.1f}" y="{top + plot_h + 18}" text-anchor="middle">{e(g)}</text>')
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#333"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def new_results_dir(base: Path) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out, n = base / stamp, 1
    while out.exists():
        n += 1
        out = base / f"{stamp}-{n}"
    return out


def machine_description() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{os.cpu_count()} CPUs ({model or 'unknown CPU'}), {platform.platform()}, load average at start {load}"


def source_version(root: Path) -> str:
    """The commit the numbers belong to, and whether the working tree differed from it."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"git {head}" + (" with uncommitted changes" if dirty.strip() else "")


def write_compare_csvs(out: Path, raw: List[Dict[str, object]], summary: List[Dict[str, object]]) -> None:
    metric_keys: List[str] = []
    for row in raw:
        metric_keys.extend(k for k in row if k not in metric_keys)
    with open(out / "raw.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=metric_keys)
        w.writeheader()
        w.writerows(raw)
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        for row in summary:
            w.writerow({k: "" if v is None else round(v, 4) if isinstance(v, float) else v for k, v in row.items()})


def cmd_compare(argv: List[str]) -> int:
    root = project_root()
    p = argparse.ArgumentParser(
        prog="hakmem compare",
        description="Run every built benchmark under glibc, the installed mimalloc/jemalloc/tcmalloc, "
                    "hakmem Standard and hakmem FAST PGO, interleaved; write medians, tables and charts.")
    p.add_argument("--runs", type=int, default=5, help="runs of each benchmark under each allocator (default: 5)")
    p.add_argument("--benches", help="comma-separated benchmarks (default: every one built)")
    p.add_argument("--allocators", help="comma-separated subset of glibc,mimalloc,jemalloc,tcmalloc,hakmem,hakmem-pgo")
    p.add_argument("--bench-args", action="append", default=[], metavar="NAME=ARGS",
                   help="arguments for one benchmark, e.g. --bench-args 'ssot=5000000 400' (repeatable)")
    p.add_argument("--out", type=Path, help="results folder (default: results/<timestamp>/)")
    p.add_argument("--build-dir", type=Path, default=root / "build",
                   help="Standard build: benchmarks and libhakmem.so (default: build)")
    p.add_argument("--pgo-build-dir", type=Path, help="FAST PGO build (default: build-pgo, if built)")
    p.add_argument("--no-pgo", action="store_true", help="leave out hakmem FAST PGO even if it is built")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before a run counts as failed")
    opts = p.parse_args(argv)
    if opts.runs < 1:
        p.error("--runs must be >= 1")

    bench_dir = opts.build_dir / "bench"
    available = discover_benches(bench_dir)
    if opts.benches:
        benches = [b for b in opts.benches.split(",") if b]
        missing = [b for b in benches if b not in available]
        if missing:
            fail(f"compare: not built in {bench_dir}: {', '.join(missing)} (built: {', '.join(available) or 'none'})")
    else:
        benches = available
    if not benches:
        fail(f"compare: no benchmarks in {bench_dir} (run: ninja -C {opts.build_dir})")
    bench_args = parse_bench_args(opts.bench_args)
    if opts.no_pgo and opts.pgo_build_dir:
        p.error("--no-pgo and --pgo-build-dir exclude each other")
    pgo_dir = None if opts.no_pgo else opts.pgo_build_dir or root / "build-pgo"
    wanted = [a for a in opts.allocators.split(",") if a] if opts.allocators else None
    setups, notes = compare_setups(opts.build_dir, pgo_dir, opts.pgo_build_dir is not None, wanted)
    base_env, dropped = clean_env()

    started = datetime.datetime.now().astimezone()
    machine = machine_description()  # before the sweep: its load average describes the machine, not us
    version = source_version(root)
    out = opts.out or new_results_dir(root / "results")
    out.mkdir(parents=True, exist_ok=True)
    for n in notes:
        progress(n)
    if dropped:
        progress(f"not passed on to the benchmarks: {', '.join(dropped)}")
    progress(f"benchmarks: {', '.join(benches)}; {opts.runs} interleaved runs each; results in {out}")

    sweep = run_sweep(bench_dir, benches, bench_args, setups, opts.runs, base_env, opts.timeout)
    summary = summarise(benches, setups, sweep.results, sweep.failed)
    tables = markdown_tables(benches, summary)
    sub = (f"median of {opts.runs} interleaved runs, {started:%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs; "
           "dashed line: glibc")
    for name, title, column in (("throughput.svg", "Throughput relative to glibc (higher is better)", "ops_vs_glibc"),
                                ("peak_rss.svg", "Peak RSS relative to glibc (lower is better)", "rss_vs_glibc")):
        values = {(r["benchmark"], r["allocator"]): r[column] for r in summary}
        (out / name).write_text(svg_grouped_bars(title, sub, benches, setups, values, sweep.failed))
    write_compare_csvs(out, sweep.raw, summary)

    labels = {s.key: s.label for s in setups}
    failures = [f"{b} under {labels[a]}: {err}" for (b, a), err in sweep.failed.items()]
    lines = [f"# hakmem compare, {started:%Y-%m-%d %H:%M %Z}", "",
             f"- command: `{shlex.join(['hakmem', 'compare', *argv])}`",
             f"- machine: {machine}",
             f"- source: {version}",
             f"- {opts.runs} runs of each benchmark under each allocator, interleaved "
             "(run 1 of every benchmark under every allocator, then run 2, ...); medians",
             f"- benchmarks from {bench_dir.resolve()}, arguments: "
             + ", ".join(f"{b} `{shlex.join(bench_args.get(b, [])) or '(defaults)'}`" for b in benches)]
    lines += [f"- {n}" for n in notes]
    lines.append(f"- {LAUNCHER_NOTE}")
    if failures:
        lines.append("- failed cells (FAIL in the tables):")
        lines += [f"  - {f}" for f in failures]
    lines += ["", tables, "![throughput](throughput.svg)", "", "![peak RSS](peak_rss.svg)", ""]
    (out / "report.md").write_text("\n".join(lines))

    print(tables)
    if failures:
        print("failed cells (FAIL above; the progress log on stderr has their commands and stderr):")
        for f in failures:
            print(f"  {f}")
    for name in ("report.md", "summary.csv", "raw.csv", "throughput.svg", "peak_rss.svg"):
        print(f"wrote {out / name}")
    return 0


@dataclass
class Sweep:
    """Every run of a compare: per (benchmark, allocator) cell, its runs and why it failed."""

    results: Dict[Tuple[str, str], List[RunResult]]
    failed: Dict[Tuple[str, str], str]
    raw: List[Dict[str, object]]


def run_sweep(bench_dir: Path, benches: List[str], bench_args: Dict[str, List[str]], setups: List[Setup],
              runs: int, base_env: Dict[str, str], timeout: float) -> Sweep:
    sweep = Sweep({(b, s.key): [] for b in benches for s in setups}, {}, [])
    # Interleaving spreads slow drifts (thermal, noisy neighbours) over all allocators
    # instead of penalising whichever one runs during a bad stretch.
    for run in range(1, runs + 1):
        for b in benches:
            bench, args = (bench_dir / b).resolve(), bench_args.get(b, [])
            for s in setups:
                if (b, s.key) in sweep.failed:
                    continue  # the cell is FAIL already; more runs cannot change that
                cmd = command_line(bench, args, s)
                res = run_once(bench, args, s, base_env, timeout)
                sweep.results[(b, s.key)].append(res)
                sweep.raw.append({"run": run, "benchmark": b, "allocator": s.key, "library": str(s.lib or "libc"),
                                  "status": "ok" if res.ok else "FAIL", "error": res.error, "command": cmd,
                                  **{k: v for k, v in res.metrics.items() if k != "bench"}})
                where = f"[compare] run {run}/{runs} {b:<9} {s.label:<16}"
                if res.ok:
                    m = res.metrics
                    progress(f"{where} {fmt_ops(float(m['ops_per_sec'])):>10} ops/s  "
                             f"{fmt_kb(float(m.get('peak_rss_kb', 0))):>12} peak")
                else:
                    sweep.failed[(b, s.key)] = res.error
                    report_failure(where.strip(), cmd, res)
    return sweep


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("ab", "compare"):
        print("usage: hakmem_bench.py ab [options] A B [-- BENCH_ARGS...]\n"
              "       hakmem_bench.py compare [options]\n"
              "(run `hakmem ab --help` or `hakmem compare --help` for the options)", file=sys.stderr)
        return 2
    if sys.argv[1] == "ab":
        return cmd_ab(sys.argv[2:])
    return cmd_compare(sys.argv[2:])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
