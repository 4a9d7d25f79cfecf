#!/usr/bin/env python3
"""hakmem benchmark driver: `ab` runs a benchmark or any program under two policies or allocators, with a
bootstrap confidence interval and a verdict; `compare` runs benchmarks, real applications or a program under every allocator."""

import argparse
import csv
import datetime
import functools
import html
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

# Benchmarks in the order reports list them; any other executable in bench/ comes after.
KNOWN_BENCHES = ("ssot", "larson", "prodcons", "realloc", "large", "frag", "threadchurn", "burst", "hugebuf", "bigint", "randarray", "logicmin", "sparse", "idle", "batchq", "transfer")

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

# Linux carries the RSS high-water mark of a parent over into a child through fork and exec:
# started straight from this Python process every command would report at least Python's own
# ~15 MB.  Every command therefore runs under `hakmem measure`, a small C parent that reports
# wall time, CPU time and RUSAGE_CHILDREN (the peak RSS of the command's whole process tree).
LAUNCHER_NOTE = ("each command runs as a child of `hakmem measure`, which reports wall time, user+system CPU "
                 "time and the peak RSS of the command's whole process tree (not this Python process's)")

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101
DEFAULT_TIMEOUT = 600.0
STDERR_TAIL_LINES = 6

# Sonames of allocators a program may link itself (Debian's redis-server links jemalloc): under
# "glibc" such a program gets glibc's malloc preloaded, or glibc's column would show jemalloc.
OWN_ALLOCATOR_SONAMES = (b"libjemalloc.so", b"libtcmalloc", b"libmimalloc.so")

# How each metric reads and which way is better.
METRICS = {
    "time": ("wall_s", "wall time", "s", False),
    "cpu": ("cpu_s", "CPU user+sys", "s", False),
    "rss": ("peak_rss_kb", "peak RSS", "KB", False),
    "ops": ("ops_per_sec", "ops/s", "", True),
}

# Fixed colours per allocator so the charts of different sweeps read the same way.
COLOURS = {
    "glibc": "#7f7f7f",
    "mimalloc": "#1f77b4",
    "jemalloc": "#2ca02c",
    "tcmalloc": "#9467bd",
    "hakmem": "#ff7f0e",
    "hakmem-pgo": "#d62728",
}
# Allocators added with --allocator take these in turn: one shared grey would merge their bars.
EXTRA_COLOURS = ("#8c564b", "#e377c2", "#17becf", "#bcbd22", "#1a1a1a", "#aec7e8")

# The names --allocator may not take.  Compared without case: "Mimalloc" beside "mimalloc"
# would make two columns that a reader takes for one.
BUILTIN_ALLOCATORS = ("glibc", *(key for key, _ in OTHER_ALLOCATORS), "hakmem", "hakmem-pgo")
# An --allocator name stands in --allocators' comma list, in CSV cells and in Markdown tables.
ALLOCATOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass
class Setup:
    """One way of running a command: which library is preloaded and which policy file."""

    key: str
    label: str
    lib: Optional[Path] = None
    config: Optional[Path] = None
    policy_env: Dict[str, str] = field(default_factory=dict)
    ours: bool = False           # a hakmem build: "Where hakmem stands" sets it against the others
    colour: Optional[str] = None  # in the charts; None: COLOURS by key

    def env(self, program: Optional[Path] = None) -> Dict[str, str]:
        extra = dict(self.policy_env)
        if self.lib:
            extra.update(preload_env(self.lib))
        elif program is not None and links_own_allocator(program):
            libc = find_system_lib("libc.so.6")
            if libc:
                extra["LD_PRELOAD"] = str(libc)
        if self.config:
            extra["HAKMEM_CONFIG"] = str(self.config)
        return extra


def preload_env(lib: Path, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The variables that preload lib into a program run with the environment base (default:
    ours).  ld.so splits LD_PRELOAD at spaces and colons, so a library whose path holds either
    goes in by its file name, found through its directory put first in LD_LIBRARY_PATH (split at
    colons only)."""
    lib = Path(lib)
    if not re.search(r"[\s:]", str(lib)):
        return {"LD_PRELOAD": str(lib)}
    if re.search(r"[\s:]", lib.name) or ":" in str(lib.parent):
        fail(f"{lib}: no preload can name a library there (ld.so splits LD_PRELOAD at spaces and colons, "
             "LD_LIBRARY_PATH at colons); build or install it under another path")
    dirs = (os.environ if base is None else base).get("LD_LIBRARY_PATH")
    return {"LD_PRELOAD": lib.name, "LD_LIBRARY_PATH": f"{lib.parent}:{dirs}" if dirs else str(lib.parent)}


@dataclass
class RunResult:
    ok: bool
    metrics: Dict[str, object] = field(default_factory=dict)
    error: str = ""
    returncode: Optional[int] = None
    stderr_tail: str = ""
    stdout: str = ""


class UsageError(Exception):
    """Bad input found below the command functions; main() prints it as one line."""


def fail(msg: str) -> NoReturn:
    raise UsageError(msg)


class Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one `hakmem: error:` line, not a usage dump."""

    def error(self, message: str) -> NoReturn:
        hint = " (a program goes after --: A B -- PROGRAM ARGS)" if "unrecognized arguments" in message else ""
        fail(f"{self.prog.split()[-1]}: {message}{hint} (see {self.prog} --help)")


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def project_root() -> Path:
    """The source tree this script belongs to, or the working directory for an installed copy."""
    here = Path(__file__).resolve().parent.parent
    if (here / "meson.build").is_file() and (here / "bench").is_dir():
        return here
    return Path.cwd()


def default_build_dir(root: Path) -> Path:
    """The Meson build the running `hakmem` belongs to (BUILD/tools/hakmem), so a tool built in
    any directory measures that build's library and benchmarks; else SOURCE/build."""
    tool = os.environ.get("HAKMEM_TOOL")
    if tool:
        build = Path(tool).resolve().parent.parent
        if (build / "meson-info").is_dir():
            return build
    return root / "build"


def clean_env() -> Tuple[Dict[str, str], List[str]]:
    env, dropped = {}, []
    for name, value in os.environ.items():
        if name in SCRUBBED_ENV_NAMES or name.startswith(SCRUBBED_ENV_PREFIXES):
            dropped.append(name)
        else:
            env[name] = value
    return env, sorted(dropped)


@functools.lru_cache(maxsize=None)
def links_own_allocator(program: Path) -> bool:
    """Whether the ELF names jemalloc, tcmalloc or mimalloc among its libraries.  A search of
    the bytes finds the dynamic string table's NEEDED names without parsing the ELF."""
    try:
        with open(program, "rb") as f:
            data = f.read(64 << 20)
    except OSError:
        return False
    return data[:4] == b"\x7fELF" and any(name in data for name in OWN_ALLOCATOR_SONAMES)


_measure_tool: Optional[Path] = None


def set_measure_tool(build_dir: Path) -> None:
    """`hakmem measure`: the binary that started us (HAKMEM_TOOL), else the build's."""
    global _measure_tool
    given = os.environ.pop("HAKMEM_TOOL", None)  # ours, not the user's: not reported as dropped
    for cand in ([Path(given)] if given else []) + [build_dir / "tools" / "hakmem"]:
        if cand.is_file() and os.access(cand, os.X_OK):
            _measure_tool = cand.resolve()
            return
    fail(f"{build_dir / 'tools' / 'hakmem'} not found: it measures every run (run: ninja -C {build_dir})")


def resolve_program(name: str, env: Dict[str, str]) -> Path:
    """The executable a command names, or one clear error: missing, not executable, a folder."""
    if "/" in name:
        path = Path(name)
        if not path.exists():
            fail(f"{name}: no such file")
    else:
        found = shutil.which(name, path=env.get("PATH", os.defpath))
        if not found:
            fail(f"{name}: command not found on PATH")
        path = Path(found)
    # Absolute but not resolved: a multi-call binary (busybox) tells its tools apart by argv[0].
    path = Path(os.path.abspath(path))
    if path.is_dir():
        fail(f"{name}: is a directory, not a program")
    if not os.access(path, os.X_OK):
        fail(f"{name}: not executable (chmod +x {name}?)")
    return path


def describe_exit(code: int) -> str:
    # `hakmem measure` reports a command killed by signal N as status 128+N.
    signo = -code if code < 0 else code - 128 if code > 128 else 0
    if signo:
        try:
            return f"killed by {signal.Signals(signo).name}"
        except ValueError:
            return f"exit status {code}"
    return f"exit status {code}"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Measured:
    """One command under `hakmem measure`, in its own session so that a timeout, Ctrl-C or a
    process the command left behind can be killed with the whole group.  stdout and stderr
    go to files, not pipes: a server that runs for a while cannot fill a pipe and stall."""

    def __init__(self, argv: Sequence[str], extra_env: Dict[str, str], base_env: Dict[str, str],
                 cwd: Optional[Path] = None):
        assert _measure_tool is not None, "set_measure_tool() first"
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        rfd, wfd = os.pipe()
        cmd = [str(_measure_tool), "measure", "--fd", str(wfd)]
        for k, v in extra_env.items():
            cmd += ["-e", f"{k}={v}"]
        cmd += ["--", *argv]
        self.rfd = rfd
        try:
            self.proc = subprocess.Popen(cmd, env=base_env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=self.out,
                                         stderr=self.err, pass_fds=(wfd,), start_new_session=True)
        except OSError as exc:
            os.close(rfd)
            raise UsageError(f"cannot start {_measure_tool}: {exc}") from exc
        finally:
            os.close(wfd)

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        _kill_group(self.proc.pid)

    def _read(self, f) -> str:
        f.seek(0)
        return f.read().decode(errors="replace")

    def stderr_text(self) -> str:
        return self._read(self.err)

    def wait(self, timeout: float) -> RunResult:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
            os.close(self.rfd)
            return RunResult(False, error=f"timed out after {timeout:g} s (killed with its process group)",
                             stderr_tail=self._tail(self.stderr_text()))
        except KeyboardInterrupt:
            self.kill()
            raise
        finally:
            self.kill()  # whatever the command left running in its group
        os.set_blocking(self.rfd, False)
        try:
            report = os.read(self.rfd, 4096).decode()
        except BlockingIOError:
            report = ""
        os.close(self.rfd)
        stdout, stderr = self._read(self.out), self.stderr_text()
        self.out.close()
        self.err.close()
        tail = self._tail(stderr)
        fields = {k: parse_value(v) for k, v in (f.split("=", 1) for f in report.split() if "=" in f)}
        if "exec_errno" in fields:
            return RunResult(False, error=f"cannot execute: {os.strerror(int(fields['exec_errno']))}",
                             returncode=self.proc.returncode, stderr_tail=tail, stdout=stdout)
        if "wall_s" not in fields:
            return RunResult(False, error=f"hakmem measure reported nothing (exit status {self.proc.returncode})",
                             returncode=self.proc.returncode, stderr_tail=tail, stdout=stdout)
        metrics = {"wall_s": fields["wall_s"], "cpu_s": float(fields["user_s"]) + float(fields["sys_s"]),
                   "user_s": fields["user_s"], "sys_s": fields["sys_s"], "peak_rss_kb": fields["peak_rss_kb"]}
        code = int(fields["exit"]) if "exit" in fields else 128 + int(fields.get("signal", 0))
        # ld.so only warns and runs the program with glibc when a preload fails; that would
        # file glibc's numbers under another allocator's name.
        preload_error = find_preload_error(stderr)
        if preload_error:
            return RunResult(False, metrics, f"preload failed: {preload_error}", code, tail, stdout)
        if code != 0:
            return RunResult(False, metrics, describe_exit(code), code, tail, stdout)
        return RunResult(True, metrics, "", 0, tail, stdout)

    @staticmethod
    def _tail(text: str) -> str:
        return "\n".join(text.splitlines()[-STDERR_TAIL_LINES:])


def find_preload_error(stderr: str) -> Optional[str]:
    """ld.so's `ERROR: ld.so: object ... from LD_PRELOAD cannot be preloaded (...): ignored.`"""
    for line in stderr.splitlines():
        if "ld.so" in line and "LD_PRELOAD" in line:
            return line.strip()
    return None


def run_command(argv: Sequence[str], extra_env: Dict[str, str], base_env: Dict[str, str], timeout: float,
                cwd: Optional[Path] = None) -> RunResult:
    return Measured(argv, extra_env, base_env, cwd).wait(timeout)


def command_line(argv: Sequence[str], extra_env: Dict[str, str]) -> str:
    """The command as a user would type it to reproduce one run."""
    return shlex.join((["env"] + [f"{k}={v}" for k, v in extra_env.items()] if extra_env else []) + list(argv))


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


def parse_ops(stdout: str) -> Optional[float]:
    """The number of the last `ops_per_sec=N` anywhere in a program's output."""
    for line in reversed(stdout.splitlines()):
        for f in reversed(line.split()):
            if f.startswith("ops_per_sec="):
                v = parse_value(f.split("=", 1)[1])
                if isinstance(v, (int, float)):
                    return float(v)
    return None


def run_bench(bench: Path, args: Sequence[str], setup: Setup, base_env: Dict[str, str], timeout: float) -> RunResult:
    """A built-in benchmark: its own result line, with the measured time, CPU and RSS."""
    res = run_command([str(bench), *args], setup.env(), base_env, timeout)
    if not res.ok:
        return res
    line = parse_result_line(res.stdout)
    if line is None:
        shown = res.stdout.strip().splitlines()[-1:] or ["(nothing)"]
        return RunResult(False, res.metrics, f"no result line in output: {shown[0][:120]}", 0, res.stderr_tail)
    # The benchmark's own peak_rss_kb is its ru_maxrss: the same figure as the measured one.
    res.metrics = {**line, **res.metrics}
    return res


def first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}: {x[:80]!r} vs {y[:80]!r}"
    if len(la) != len(lb):
        return f"{len(la)} lines vs {len(lb)} lines"
    return "line endings differ"


def report_failure(what: str, cmd: str, res: RunResult, fatal: bool = False) -> None:
    progress(f"{'hakmem: error: ' if fatal else 'FAIL '}{what}: {res.error}")
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
    """A or B: `glibc` (nothing preloaded: the system allocator, as compare runs it), an existing
    file or folder whatever its path holds (a build directory, a shared library, an INI policy
    file), `build:DIR` (DIR/libhakmem.so), or `HAKMEM_VAR=VALUE[,...]` (policy variables over
    the defaults: a phase switched without a file of its own)."""
    if spec == "glibc":
        return Setup(side, "glibc")
    path = Path(spec)
    if path.is_dir():
        lib = path / "libhakmem.so"
    elif path.is_file() and is_elf(path):
        lib = path
    elif path.is_file():
        config = path.resolve()
        lib = build_dir / "libhakmem.so"
        if not lib.is_file():
            fail(f"ab: {side} is a policy file, but {lib} is not built (run: ninja -C {build_dir})")
        check_policy(config, side, build_dir)
        return Setup(side, spec, lib=lib.resolve(), config=config)
    elif spec.startswith("build:"):
        lib = Path(spec[len("build:"):]) / "libhakmem.so"
    elif re.fullmatch(r"HAKMEM_[A-Z0-9_]+=[^,]*(,HAKMEM_[A-Z0-9_]+=[^,]*)*", spec):
        policy_env = dict(item.split("=", 1) for item in spec.split(","))
        lib = build_dir / "libhakmem.so"
        if not lib.is_file():
            fail(f"ab: {side} sets policy variables, but {lib} is not built (run: ninja -C {build_dir})")
        check_policy_env(policy_env, side, build_dir)
        return Setup(side, spec, lib=lib.resolve(), policy_env=policy_env)
    elif "=" in spec:
        fail(f"ab: {side} '{spec}': no such file, and not a setting (HAKMEM_VAR=VALUE[,...]: only variables "
             "whose name starts with HAKMEM_)")
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


def verdict(lo: float, hi: float, threshold: float, higher_is_better: bool) -> str:
    """GO when B is better than A by more than the threshold over the whole interval."""
    if higher_is_better:
        if lo > threshold:
            return f"GO (the whole CI is above +{threshold:g} %: B is better)"
        if hi < -threshold:
            return f"NO-GO (the whole CI is below -{threshold:g} %: B is worse)"
    else:
        if hi < -threshold:
            return f"GO (the whole CI is below -{threshold:g} %: B is better)"
        if lo > threshold:
            return f"NO-GO (the whole CI is above +{threshold:g} %: B is worse)"
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


def split_command(argv: List[str]) -> Tuple[List[str], List[str]]:
    """Options and A/B before the first `--`, the program or benchmark arguments after it."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def ab_parser(root: Path) -> Parser:
    p = Parser(
        prog="hakmem ab",
        description="Run a program (or a built-in benchmark) under A and B, interleaved, and decide whether B "
                    "is better. A and B are each an INI policy or HAKMEM_VAR=VALUE[,...] (run under "
                    "--build-dir's libhakmem.so), a "
                    "libhakmem .so (or any allocator's), build:DIR (DIR/libhakmem.so), or glibc (nothing "
                    "preloaded).",
        epilog="Examples: hakmem ab glibc build/libhakmem.so -- python3 script.py; "
               "hakmem ab --bench ssot A.ini B.ini -- 5000000. Without a program and without --bench: ssot.")
    p.add_argument("--bench", help="a built-in benchmark in BUILD_DIR/bench; arguments after -- go to it")
    p.add_argument("--metric", choices=sorted(METRICS),
                   help="what the verdict judges: wall time, CPU user+sys, peak RSS of the process tree, or the "
                        "program's ops_per_sec=N line (default: time for a program, ops for a benchmark)")
    p.add_argument("--runs", type=int, default=10, help="measured runs of each side (default: 10)")
    p.add_argument("--warmup", type=int, default=1, help="discarded runs of each side first (default: 1)")
    p.add_argument("--threshold", type=float, default=1.0,
                   help="percent the whole CI must clear for GO or NO-GO (default: 1)")
    p.add_argument("--allow-output-diff", action="store_true",
                   help="do not compare the program's stdout between runs and between A and B")
    p.add_argument("--build-dir", type=Path, default=default_build_dir(root),
                   help="build with the benchmarks (and the library for INI sides); default: the build this "
                        "hakmem was built in, else SOURCE/build")
    p.add_argument("--csv", type=Path, help="write every run (warm-ups included) to this CSV file")
    p.add_argument("--resamples", type=int, default=BOOTSTRAP_RESAMPLES, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds before a run counts as failed (default: {DEFAULT_TIMEOUT:g})")
    p.add_argument("A")
    p.add_argument("B")
    return p


@dataclass
class AbPlan:
    """What `hakmem ab` was asked to run, once its command line is understood."""

    opts: argparse.Namespace
    argv: List[str]           # the measured command, without the allocator's variables
    program: Optional[Path]   # None for a built-in benchmark
    metric: str
    compare_output: bool


def parse_ab(argv: List[str], root: Path) -> AbPlan:
    head, tail = split_command(argv)
    p = ab_parser(root)
    opts = p.parse_args(head)
    if opts.runs < 1 or opts.warmup < 0 or opts.threshold < 0 or opts.resamples < 1 or opts.timeout <= 0:
        p.error("--runs must be >= 1, --warmup and --threshold >= 0, --timeout > 0")
    if opts.bench or not tail:
        name = opts.bench or "ssot"
        bench = opts.build_dir / "bench" / name
        if not bench.is_file():
            have = ", ".join(discover_benches(opts.build_dir / "bench")) or "none"
            fail(f"ab: {bench} not found (built benchmarks: {have}; run: ninja -C {opts.build_dir})")
        opts.bench = name
        return AbPlan(opts, [str(bench.resolve()), *tail], None, opts.metric or "ops", False)
    env, _ = clean_env()
    if tail[0].isdigit() and not shutil.which(tail[0], path=env.get("PATH", os.defpath)):
        fail(f"ab: '{tail[0]}' is not a program; arguments for the built-in ssot benchmark go after "
             f"--bench ssot --, e.g. hakmem ab --bench ssot A B -- {shlex.join(tail)}")
    program = resolve_program(tail[0], env)
    return AbPlan(opts, [str(program), *tail[1:]], program, opts.metric or "time", not opts.allow_output_diff)


def cmd_ab(argv: List[str]) -> int:
    plan = parse_ab(argv, project_root())
    opts = plan.opts
    set_measure_tool(opts.build_dir)
    sides = [resolve_ab_side(opts.A, "A", opts.build_dir), resolve_ab_side(opts.B, "B", opts.build_dir)]
    base_env, dropped = clean_env()
    if dropped:
        progress(f"not passed on to the program: {', '.join(dropped)} (put policy settings in an INI file)")

    rows: List[Dict[str, object]] = []
    values = ab_runs(plan, sides, base_env, rows)
    if opts.csv:
        write_ab_csv(opts.csv, rows)
    if values is None:
        return 1
    ab_report(plan, sides, dropped, values)
    if opts.csv:
        print(f"raw runs: {opts.csv}")
    return 0


def comparable_output(stdout: str, metric: str) -> str:
    # A program judged by its ops_per_sec line prints a different number every run.
    if metric == "ops":
        return "\n".join(line for line in stdout.splitlines() if "ops_per_sec=" not in line)
    return stdout


def ab_runs(plan: AbPlan, sides: List[Setup], base_env: Dict[str, str],
            rows: List[Dict[str, object]]) -> Optional[Dict[str, Dict[str, List[float]]]]:
    """Warm-ups then measured runs, A B A B ...; every run is added to rows.  None if a run
    failed or an output differed (reported on stderr)."""
    opts = plan.opts
    values: Dict[str, Dict[str, List[float]]] = {s.key: {m: [] for m in METRICS} for s in sides}
    reference: Optional[Tuple[str, str]] = None   # (which run, its output)
    name = Path(plan.argv[0]).name
    for i in range(opts.warmup + opts.runs):
        measured = i >= opts.warmup
        tag = f"run {i + 1 - opts.warmup}/{opts.runs}" if measured else f"warm-up {i + 1}/{opts.warmup}"
        for s in sides:
            extra = s.env(plan.program)
            if plan.program is None:
                res = run_bench(Path(plan.argv[0]), plan.argv[1:], s, base_env, opts.timeout)
            else:
                res = run_command(plan.argv, extra, base_env, opts.timeout)
                if res.ok and plan.metric == "ops":
                    ops = parse_ops(res.stdout)
                    if ops is None:
                        res.ok, res.error = False, "no ops_per_sec=N in its output (--metric ops needs one)"
                    else:
                        res.metrics["ops_per_sec"] = ops
            rows.append({"phase": "measured" if measured else "warmup", "round": i + 1, "side": s.key,
                         "spec": s.label, "library": s.lib or "", "config": s.config or "",
                         "status": "ok" if res.ok else "FAIL", "error": res.error, **res.metrics})
            what = f"{name} under {s.key} ({s.label}), {tag}"
            if not res.ok:
                # One side failing makes the comparison meaningless; stop rather than skew it.
                report_failure(f"ab: {what}", command_line(plan.argv, extra), res, fatal=True)
                return None
            if plan.compare_output:
                out = comparable_output(res.stdout, plan.metric)
                if reference is None:
                    reference = (f"A, {tag}", out)
                elif out != reference[1]:
                    kind = "between runs of A" if s.key == "A" else f"between A and {s.key}"
                    print(f"hakmem: error: ab: the output of {name} differs {kind}: {what} against "
                          f"{reference[0]}: {first_difference(reference[1], out)}. An allocator must not change "
                          "a program's output; if this program's output varies by itself, add --allow-output-diff",
                          file=sys.stderr)
                    return None
            m = res.metrics
            progress(f"[ab] {tag:>13} {s.key}: {float(m['wall_s']):.3f} s, CPU {float(m['cpu_s']):.3f} s, "
                     f"peak RSS {fmt_kb(float(m['peak_rss_kb']))}"
                     + (f", {fmt_ops(float(m['ops_per_sec']))} ops/s" if "ops_per_sec" in m else ""))
            if measured:
                for metric, (key, *_rest) in METRICS.items():
                    if isinstance(m.get(key), (int, float)):
                        values[s.key][metric].append(float(m[key]))
    return values


def fmt_metric(metric: str, v: float) -> str:
    if metric == "ops":
        return fmt_ops(v)
    if metric == "rss":
        return fmt_kb(v)
    return f"{v:.3f} s"


def ab_report(plan: AbPlan, sides: List[Setup], dropped: List[str],
              values: Dict[str, Dict[str, List[float]]]) -> None:
    opts = plan.opts
    what = f"benchmark {opts.bench}" if plan.program is None else f"program {shlex.join(plan.argv)}"
    print(f"{what}: {opts.runs} measured runs per side after {opts.warmup} warm-up, interleaved A B A B ...")
    for s in sides:
        print(f"{s.key}: {s.label}")
        print(f"   command: {command_line(plan.argv, s.env(plan.program))}")
    print(f"   ({LAUNCHER_NOTE})")
    if dropped:
        print(f"   (removed from the inherited environment: {', '.join(dropped)})")
    if plan.compare_output:
        print("   stdout: identical in every run under A and B")
    print(f"{'metric':<16} {'median A':>14} {'median B':>14} {'B vs A':>9}   95% CI of B vs A")
    judged = None
    for metric, (key, label, _unit, higher) in METRICS.items():
        a, b = values["A"][metric], values["B"][metric]
        if len(a) != opts.runs or len(b) != opts.runs:
            continue  # ops/s exists only for benchmarks and programs that print it
        ma, mb = statistics.median(a), statistics.median(b)
        if ma <= 0 or min(a) <= 0:
            print(f"{label:<16} {fmt_metric(metric, ma):>14} {fmt_metric(metric, mb):>14}   (zero: no ratio)")
            continue
        lo, hi = bootstrap_delta_ci(a, b, opts.resamples, opts.seed)
        mark = "  <- judged" if metric == plan.metric else ""
        direction = "higher is better" if higher else "lower is better"
        print(f"{label:<16} {fmt_metric(metric, ma):>14} {fmt_metric(metric, mb):>14} {(mb / ma - 1) * 100:>+8.2f} %"
              f"   [{lo:+.2f} %, {hi:+.2f} %]  ({direction}){mark}")
        if metric == plan.metric:
            judged = (lo, hi, higher, label)
    print(f"(CI: bootstrap of the medians, {opts.resamples} resamples, seed {opts.seed})")
    if opts.runs < 5:
        print(f"note: with {opts.runs} runs per side the interval is rough; use --runs 10 or more")
    if judged is None:
        print(f"verdict: none (no usable {METRICS[plan.metric][1]} values)")
        return
    lo, hi, higher, label = judged
    print(f"verdict on {label}: {verdict(lo, hi, opts.threshold, higher)}")


# ---------------------------------------------------------------------- compare


def compare_setups(build_dir: Path, pgo_dir: Optional[Path], pgo_explicit: bool,
                   wanted: Optional[List[str]], extras: Sequence[Setup] = ()) -> Tuple[List[Setup], List[str]]:
    """Every allocator to run, plus one line per allocator saying where it came from or why not.
    The user's (--allocator) stand after the installed peers, so hakmem's rows stay last."""
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
    for extra in extras:
        setups.append(extra)
        notes.append(f"{extra.key}: {extra.lib} (given with --allocator)")
    std = build_dir / "libhakmem.so"
    if not std.is_file():
        fail(f"compare: {std} not found (run: ninja -C {build_dir})")
    setups.append(Setup("hakmem", "hakmem Standard", lib=std.resolve(), ours=True))
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
    return Setup("hakmem-pgo", "hakmem FAST PGO", lib=lib.resolve(), ours=True)


def extra_allocators(items: Sequence[str], env: Dict[str, str]) -> List[Setup]:
    """The --allocator NAME=PATH libraries, each checked before anything runs: a library that
    ld.so refuses would otherwise run every workload on glibc and fail every cell of its column."""
    extras: List[Setup] = []
    builtin = {name.lower(): name for name in BUILTIN_ALLOCATORS}
    seen: Dict[str, str] = {}
    for item in items:
        name, sep, given = item.partition("=")
        what = f"compare: --allocator '{item}'"
        if not sep or Path(item).is_file():   # a path that holds '=' is still a path without a name
            fail(f"{what}: wants NAME=PATH, e.g. --allocator mimalloc-2.4=/opt/mimalloc/lib/libmimalloc.so")
        if not name:
            fail(f"{what}: the name before '=' is empty")
        if not ALLOCATOR_NAME.fullmatch(name):
            fail(f"{what}: the name may hold only letters, digits and . _ + - (it stands in --allocators' "
                 "comma list and in the report's tables), starting with a letter or digit")
        if name.lower() in builtin:
            fail(f"{what}: '{name}' is the name of the built-in {builtin[name.lower()]} (built-in names, in any "
                 f"case: {', '.join(BUILTIN_ALLOCATORS)}); choose another, e.g. {name}-custom")
        if name.lower() in seen:
            fail(f"{what}: the name '{name}' is taken by --allocator '{seen[name.lower()]}' (names are compared "
                 "without case); give each library its own name")
        seen[name.lower()] = item
        if not given:
            fail(f"{what}: no library after '='")
        path = Path(given)
        if not path.exists():
            fail(f"{what}: {given}: no such file")
        if path.is_dir():
            fail(f"{what}: {given}: is a directory, not a shared library")
        lib = path.resolve()
        check_preloadable(lib, env, what)
        extras.append(Setup(name, name, lib=lib, colour=EXTRA_COLOURS[len(extras) % len(EXTRA_COLOURS)]))
    return extras


def check_preloadable(lib: Path, env: Dict[str, str], what: str) -> None:
    """Whether ld.so preloads lib into a program that does nothing: it refuses a file that is not
    a shared object (text, an executable, the wrong architecture) only with a warning."""
    argv = ["/bin/true"]
    preload = preload_env(lib)
    try:
        proc = subprocess.run(argv, env={**env, **preload}, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        fail(f"{what}: cannot check {lib} with {command_line(argv, preload)}: {exc}")
    refused = find_preload_error(proc.stderr)
    if refused:
        fail(f"{what}: not a loadable shared library: {refused}")
    if proc.returncode != 0:
        said = proc.stderr.strip().splitlines()[:1] or ["(nothing on stderr)"]
        fail(f"{what}: {command_line(argv, preload)} failed with {describe_exit(proc.returncode)}: "
             f"{said[0]}")


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


@dataclass
class Workload:
    """One row group of a sweep: a built-in benchmark, the user's program, or an application.
    run() makes one measured run under a setup; a workload judged by `time` is faster when its
    wall time is lower, one judged by `ops` (benchmarks, redis) when its ops/s is higher."""

    name: str
    kind: str                                   # bench, program or app
    metric: str                                 # ops or time
    run: Callable[[Setup, Dict[str, str], float], RunResult]
    describe: Callable[[Setup], str]            # the command, for the report and raw.csv
    check_output: bool = False                  # every run's output must equal glibc's
    note: str = ""


def speed(cell: Dict[str, object], metric: str) -> Optional[float]:
    """Higher is better whatever the metric: ops/s, or 1 / wall time."""
    if metric == "ops":
        return cell["median_ops_per_sec"]  # type: ignore[return-value]
    t = cell["median_wall_s"]
    return 1.0 / t if t else None  # type: ignore[operator]


def summarise(workloads: List[Workload], setups: List[Setup], results: Dict[Tuple[str, str], List[RunResult]],
              failed: Dict[Tuple[str, str], str]) -> List[Dict[str, object]]:
    rows = []
    for w in workloads:
        cells = {}
        for s in setups:
            # A cell with any failed run reports nothing but FAIL: its other runs may be wrong too.
            runs = [] if (w.name, s.key) in failed else [r for r in results[(w.name, s.key)] if r.ok]
            ops = [float(r.metrics["ops_per_sec"]) for r in runs if "ops_per_sec" in r.metrics]
            cells[s.key] = {
                "benchmark": w.name, "kind": w.kind, "allocator": s.key, "label": s.label,
                "library": str(s.lib or "libc"),
                "status": "FAIL" if (w.name, s.key) in failed else "ok", "runs_ok": len(runs),
                "error": failed.get((w.name, s.key), ""),
                "median_ops_per_sec": median_or_none(ops),
                "min_ops_per_sec": min(ops, default=None),
                "max_ops_per_sec": max(ops, default=None),
                "median_wall_s": metric_median(runs, "wall_s"),
                "median_cpu_s": metric_median(runs, "cpu_s"),
                "median_peak_rss_kb": metric_median(runs, "peak_rss_kb"),
                "median_final_rss_kb": metric_median(runs, "final_rss_kb"),
                "median_live_kb": metric_median(runs, "live_kb"),
            }
        base = cells.get("glibc", {})
        for c in cells.values():
            c["speed_vs_glibc"] = ratio(speed(c, w.metric), speed(base, w.metric) if base else None)
            c["time_vs_glibc"] = ratio(c["median_wall_s"], base.get("median_wall_s"))
            c["rss_vs_glibc"] = ratio(c["median_peak_rss_kb"], base.get("median_peak_rss_kb"))
            c["final_rss_vs_glibc"] = ratio(c["median_final_rss_kb"], base.get("median_final_rss_kb"))
            rows.append(c)
    return rows


def fmt_s(v: Optional[float]) -> str:
    return "FAIL" if v is None else f"{v:.3f} s"


def markdown_tables(workloads: List[Workload], summary: List[Dict[str, object]]) -> str:
    out = []
    for w in workloads:
        rows = [r for r in summary if r["benchmark"] == w.name]
        has_final = any(r["median_final_rss_kb"] is not None for r in rows)
        live = [r["median_live_kb"] for r in rows if r["median_live_kb"] is not None]
        title = f"### {w.name}" + (f" ({w.note})" if w.note else "")
        if live:
            title += f" (live data at the end: {statistics.median(live):,.0f} KB)"
        out += [title, ""]
        if w.kind == "bench":
            head = "| allocator | median ops/s | vs glibc | median peak RSS | RSS vs glibc |"
            rule = "|---|---:|---:|---:|---:|"
            if has_final:
                head += " median final RSS | final RSS vs glibc |"
                rule += "---:|---:|"
            out += [head, rule]
            for r in rows:
                line = (f"| {r['label']} | {fmt_ops(r['median_ops_per_sec'])} | {fmt_ratio(r['speed_vs_glibc'])} "
                        f"| {fmt_kb(r['median_peak_rss_kb'])} | {fmt_ratio(r['rss_vs_glibc'])} |")
                if has_final:
                    line += f" {fmt_kb(r['median_final_rss_kb'])} | {fmt_ratio(r['final_rss_vs_glibc'])} |"
                out.append(line)
        else:
            ops = w.metric == "ops"
            head = "| allocator | " + ("median requests/s | speed vs glibc | " if ops else "") + \
                   "median time | time vs glibc | CPU user+sys | median peak RSS | RSS vs glibc |"
            out += [head, "|---|" + "---:|" * (head.count("|") - 2)]
            for r in rows:
                line = f"| {r['label']} | "
                if ops:
                    line += f"{fmt_ops(r['median_ops_per_sec'])} | {fmt_ratio(r['speed_vs_glibc'])} | "
                line += (f"{fmt_s(r['median_wall_s'])} | {fmt_ratio(r['time_vs_glibc'])} | {fmt_s(r['median_cpu_s'])} "
                         f"| {fmt_kb(r['median_peak_rss_kb'])} | {fmt_ratio(r['rss_vs_glibc'])} |")
                out.append(line)
        out.append("")
    return "\n".join(out)


def standing_table(workloads: List[Workload], setups: List[Setup], summary: List[Dict[str, object]]) -> str:
    """Where each hakmem build stands against every peer on each workload: wall time (1 / speed
    for ops workloads), CPU time and peak RSS as ratios hakmem / peer, so below 1.00 means hakmem
    wins.  CPU time is there because on a busy machine wall time mostly measures the neighbours."""
    if not workloads:
        return ""
    cell = {(r["benchmark"], r["allocator"]): r for r in summary}
    peers = [s for s in setups if not s.ours]
    out = []
    for h in [s for s in setups if s.ours]:
        out += [f"#### {h.label} against each peer (time / CPU / peak RSS, ratio {h.label} ÷ peer; "
                f"below 1.00: {h.label} wins)",
                "", "| workload | " + " | ".join(p.label for p in peers) + " |",
                "|---|" + "---:|" * len(peers)]
        for w in workloads:
            mine = cell.get((w.name, h.key))
            parts = []
            for p in peers:
                theirs = cell.get((w.name, p.key))
                if not mine or not theirs or mine["status"] != "ok" or theirs["status"] != "ok":
                    parts.append("FAIL")
                    continue
                t = ratio(speed(theirs, w.metric), speed(mine, w.metric))
                c = ratio(mine["median_cpu_s"], theirs["median_cpu_s"])  # type: ignore[arg-type]
                m = ratio(mine["median_peak_rss_kb"], theirs["median_peak_rss_kb"])  # type: ignore[arg-type]
                parts.append(f"{fmt_ratio(t)} / {fmt_ratio(c)} / {fmt_ratio(m)}")
            out.append(f"| {w.name} | " + " | ".join(parts) + " |")
        out.append("")
    return "\n".join(out)


def best_and_lowest_table(workloads: List[Workload], setups: List[Setup], summary: List[Dict[str, object]]) -> str:
    """Each hakmem build against the fastest peer and the peer with the lowest peak RSS, per
    workload, so a trade of memory for speed (or the other way) shows at a glance: speed as
    hakmem ÷ the fastest (at least 1.00 leads), peak RSS as hakmem ÷ the lowest (at most
    1.00 is the lowest)."""
    cell = {(r["benchmark"], r["allocator"]): r for r in summary}
    peers = [s for s in setups if not s.ours]
    ours = [s for s in setups if s.ours]
    if not peers or not ours or not workloads:
        return ""
    out = ["#### Against the fastest peer and the peer with the lowest peak RSS (hakmem ÷ peer; speed "
           "at least 1.00 leads, peak RSS at most 1.00 is the lowest)", "",
           "| workload | " + " | ".join(f"{h.label}: speed ÷ fastest | {h.label}: peak RSS ÷ lowest" for h in ours)
           + " |", "|---|" + "---:|---:|" * len(ours)]
    for w in workloads:
        ok = [(p, cell[(w.name, p.key)]) for p in peers
              if (w.name, p.key) in cell and cell[(w.name, p.key)]["status"] == "ok"]
        fastest = max(ok, key=lambda pc: speed(pc[1], w.metric) or 0.0, default=None)
        lowest = min(ok, key=lambda pc: pc[1]["median_peak_rss_kb"] or float("inf"), default=None)  # type: ignore
        parts = []
        for h in ours:
            mine = cell.get((w.name, h.key))
            if not mine or mine["status"] != "ok" or fastest is None or lowest is None:
                parts += ["FAIL", "FAIL"]
                continue
            parts.append(f"{fmt_ratio(ratio(speed(mine, w.metric), speed(fastest[1], w.metric)))} ({fastest[0].label})")
            parts.append(f"{fmt_ratio(ratio(mine['median_peak_rss_kb'], lowest[1]['median_peak_rss_kb']))} "  # type: ignore
                         f"({lowest[0].label})")
        out.append(f"| {w.name} | " + " | ".join(parts) + " |")
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
    fill = {s.key: s.colour or COLOURS.get(s.key, "#333") for s in series}
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
        parts.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{fill[s.key]}"/>')
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
                         f'fill="{fill[s.key]}"><title>{e(g)} {e(s.label)}: {v:.2f}x</title></rect>')
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


def compare_parser(root: Path) -> Parser:
    p = Parser(
        prog="hakmem compare",
        description="Run the built-in benchmarks, the real-application suite, or PROGRAM under glibc, the installed "
                    "mimalloc/jemalloc/tcmalloc, any library given with --allocator, hakmem Standard and hakmem "
                    "FAST PGO, interleaved; write medians, tables and charts.",
        epilog="Examples: hakmem compare --runs 7; hakmem compare --suite apps --runs 3; "
               "hakmem compare --allocator mimalloc-2.4=/opt/mimalloc/lib/libmimalloc.so; "
               "hakmem compare -- python3 script.py")
    p.add_argument("--runs", type=int, default=5, help="runs of each workload under each allocator (default: 5)")
    p.add_argument("--suite", choices=("bench", "apps", "all", "none"),
                   help="built-in benchmarks, real applications, both, or none (default: bench, or none with a PROGRAM)")
    p.add_argument("--benches", help="comma-separated benchmarks (default: every one built)")
    p.add_argument("--apps", help="comma-separated applications (default: every one; see docs/BENCHMARKS.md)")
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply every application's work by this factor (default: 1)")
    p.add_argument("--port", type=int, help="TCP port on 127.0.0.1 for the redis server (default: a free one)")
    p.add_argument("--allocators", help="comma-separated subset of glibc,mimalloc,jemalloc,tcmalloc,hakmem,hakmem-pgo "
                                        "and the names given with --allocator")
    p.add_argument("--allocator", action="append", default=[], metavar="NAME=PATH",
                   help="one more allocator: the shared library PATH, preloaded like the others, in a column "
                        "named NAME (repeatable)")
    p.add_argument("--bench-args", action="append", default=[], metavar="NAME=ARGS",
                   help="arguments for one benchmark, e.g. --bench-args 'ssot=5000000 400' (repeatable)")
    p.add_argument("--allow-output-diff", action="store_true",
                   help="do not compare PROGRAM's stdout with its stdout under glibc")
    p.add_argument("--out", type=Path, help="results folder (default: results/<timestamp>/)")
    p.add_argument("--build-dir", type=Path, default=default_build_dir(root),
                   help="Standard build: benchmarks and libhakmem.so (default: the build this hakmem was built "
                        "in, else SOURCE/build)")
    p.add_argument("--pgo-build-dir", type=Path, help="FAST PGO build (default: build-pgo, if built)")
    p.add_argument("--no-pgo", action="store_true", help="leave out hakmem FAST PGO even if it is built")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds before a run counts as failed (default: {DEFAULT_TIMEOUT:g})")
    return p


def bench_workloads(opts: argparse.Namespace) -> List[Workload]:
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
    out = []
    for b in benches:
        path, args = (bench_dir / b).resolve(), bench_args.get(b, [])
        out.append(Workload(
            b, "bench", "ops",
            run=lambda s, env, t, path=path, args=args: run_bench(path, args, s, env, t),
            describe=lambda s, path=path, args=args: command_line([str(path), *args], s.env()),
            note="" if not args else f"arguments `{shlex.join(args)}`"))
    return out


def program_workload(argv: List[str], check_output: bool) -> Workload:
    env, _ = clean_env()
    program = resolve_program(argv[0], env)
    full = [str(program), *argv[1:]]
    return Workload(
        program.name, "program", "time",
        run=lambda s, base, t: run_command(full, s.env(program), base, t),
        describe=lambda s: command_line(full, s.env(program)),
        check_output=check_output, note=f"`{shlex.join(argv)}`")


def cmd_compare(argv: List[str]) -> int:
    root = project_root()
    head, program = split_command(argv)
    p = compare_parser(root)
    opts = p.parse_args(head)
    if opts.runs < 1 or opts.timeout <= 0 or opts.scale <= 0:
        p.error("--runs must be >= 1, --timeout and --scale > 0")
    if opts.no_pgo and opts.pgo_build_dir:
        p.error("--no-pgo and --pgo-build-dir exclude each other")
    suite = opts.suite or ("none" if program else "bench")
    if suite == "none" and not program:
        p.error("--suite none needs a PROGRAM after --")
    set_measure_tool(opts.build_dir)
    extras = extra_allocators(opts.allocator, clean_env()[0])

    workloads: List[Workload] = []
    missing_apps: List[str] = []
    if suite in ("bench", "all"):
        workloads += bench_workloads(opts)
    if program:
        workloads.append(program_workload(program, not opts.allow_output_diff))
    pgo_dir = None if opts.no_pgo else opts.pgo_build_dir or root / "build-pgo"
    wanted = [a for a in opts.allocators.split(",") if a] if opts.allocators else None
    setups, notes = compare_setups(opts.build_dir, pgo_dir, opts.pgo_build_dir is not None, wanted, extras)
    base_env, dropped = clean_env()

    started = datetime.datetime.now().astimezone()
    machine = machine_description()  # before the sweep: its load average describes the machine, not us
    version = source_version(root)
    out = opts.out or new_results_dir(root / "results")
    with tempfile.TemporaryDirectory(prefix="hakmem-apps-") as workdir:
        if suite in ("apps", "all"):
            sys.dont_write_bytecode = True  # no __pycache__ in the source tree
            import hakmem_apps  # here: only the application suite needs it
            app_loads, missing_apps, app_notes = hakmem_apps.workloads(
                opts.apps, Path(workdir), opts.scale, opts.port, base_env)
            workloads += app_loads
            notes += app_notes
        if not workloads:
            fail("compare: nothing to run: " + "; ".join(missing_apps))
        out.mkdir(parents=True, exist_ok=True)
        for n in notes:
            progress(n)
        if dropped:
            progress(f"not passed on to the programs: {', '.join(dropped)}")
        progress(f"workloads: {', '.join(w.name for w in workloads)}; {opts.runs} interleaved runs each; "
                 f"results in {out}")
        sweep = run_sweep(workloads, setups, opts.runs, base_env, opts.timeout)

    summary = summarise(workloads, setups, sweep.results, sweep.failed)
    tables = markdown_tables(workloads, summary)
    standing = standing_table([w for w in workloads if w.kind != "bench"], setups, summary)
    standing = best_and_lowest_table(workloads, setups, summary) + ("\n" + standing if standing else "")
    sub = (f"median of {opts.runs} interleaved runs, {started:%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs; "
           "dashed line: glibc")
    groups = [w.name for w in workloads]
    for name, title, column in (
            ("throughput.svg", "Speed relative to glibc (higher is better; ops/s, or 1 / time for apps)",
             "speed_vs_glibc"),
            ("peak_rss.svg", "Peak RSS relative to glibc (lower is better)", "rss_vs_glibc")):
        values = {(r["benchmark"], r["allocator"]): r[column] for r in summary}
        (out / name).write_text(svg_grouped_bars(title, sub, groups, setups, values, sweep.failed))
    write_compare_csvs(out, sweep.raw, summary)

    labels = {s.key: s.label for s in setups}
    failures = [f"{b} under {labels[a]}: {err}" for (b, a), err in sweep.failed.items()]
    lines = [f"# hakmem compare, {started:%Y-%m-%d %H:%M %Z}", "",
             f"- command: `{shlex.join(['hakmem', 'compare', *argv])}`",
             f"- machine: {machine}",
             f"- source: {version}",
             f"- {opts.runs} runs of each workload under each allocator, interleaved "
             "(run 1 of every workload under every allocator, then run 2, ...); medians"]
    lines += [f"- {w.name}: `{w.describe(setups[0])}`" for w in workloads if w.kind != "app"]
    lines += [f"- {n}" for n in notes]
    lines.append(f"- {LAUNCHER_NOTE}")
    if missing_apps:
        lines.append("- applications not run:")
        lines += [f"  - {m}" for m in missing_apps]
    if failures:
        lines.append("- failed cells (FAIL in the tables):")
        lines += [f"  - {f}" for f in failures]
    lines += ["", tables]
    if standing:
        lines += ["### Where hakmem stands", "", standing]
    lines += ["![speed](throughput.svg)", "", "![peak RSS](peak_rss.svg)", ""]
    (out / "report.md").write_text("\n".join(lines))

    print(tables)
    if standing:
        print(standing)
    for name in ("report.md", "summary.csv", "raw.csv", "throughput.svg", "peak_rss.svg"):
        print(f"wrote {out / name}")
    if failures:
        print("failed cells (FAIL above; the progress log on stderr has their commands and stderr):")
        for f in failures:
            print(f"  {f}")
    for m in missing_apps:
        print(f"hakmem: error: compare: {m}", file=sys.stderr)
    return 1 if failures or missing_apps else 0


@dataclass
class Sweep:
    """Every run of a compare: per (workload, allocator) cell, its runs and why it failed."""

    results: Dict[Tuple[str, str], List[RunResult]]
    failed: Dict[Tuple[str, str], str]
    raw: List[Dict[str, object]]


def run_sweep(workloads: List[Workload], setups: List[Setup], runs: int, base_env: Dict[str, str],
              timeout: float) -> Sweep:
    sweep = Sweep({(w.name, s.key): [] for w in workloads for s in setups}, {}, [])
    # glibc's output is the reference (setups list glibc first): an allocator must not change it.
    reference: Dict[str, Tuple[str, str]] = {}
    # Interleaving spreads slow drifts (thermal, noisy neighbours) over all allocators
    # instead of penalising whichever one runs during a bad stretch.
    for run in range(1, runs + 1):
        for w in workloads:
            for s in setups:
                if (w.name, s.key) in sweep.failed:
                    continue  # the cell is FAIL already; more runs cannot change that
                cmd = w.describe(s)
                res = w.run(s, base_env, timeout)
                if res.ok and w.check_output:
                    ref = reference.setdefault(w.name, (s.label, res.stdout))
                    if res.stdout != ref[1]:
                        res.ok = False
                        res.error = (f"output differs from {ref[0]}'s: {first_difference(ref[1], res.stdout)} "
                                     "(an allocator must not change a program's output)")
                sweep.results[(w.name, s.key)].append(res)
                sweep.raw.append({"run": run, "benchmark": w.name, "allocator": s.key,
                                  "library": str(s.lib or "libc"), "status": "ok" if res.ok else "FAIL",
                                  "error": res.error, "command": cmd,
                                  **{k: v for k, v in res.metrics.items() if k != "bench"}})
                where = f"[compare] run {run}/{runs} {w.name:<9} {s.label:<16}"
                if res.ok:
                    m = res.metrics
                    speed_txt = (f"{fmt_ops(float(m['ops_per_sec'])):>10} ops/s" if w.metric == "ops"
                                 else f"{float(m['wall_s']):>8.3f} s")
                    progress(f"{where} {speed_txt}  {fmt_kb(float(m.get('peak_rss_kb', 0))):>12} peak")
                else:
                    sweep.failed[(w.name, s.key)] = res.error
                    report_failure(where.strip(), cmd, res)
    return sweep


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("ab", "compare"):
        print("usage: hakmem_bench.py ab [options] A B [-- PROGRAM [ARGS...]]\n"
              "       hakmem_bench.py compare [options] [-- PROGRAM [ARGS...]]\n"
              "(run `hakmem ab --help` or `hakmem compare --help` for the options)", file=sys.stderr)
        return 2
    # hakmem_apps imports this module by name; let it find this copy rather than load a second.
    sys.modules.setdefault("hakmem_bench", sys.modules[__name__])
    try:
        if sys.argv[1] == "ab":
            return cmd_ab(sys.argv[2:])
        return cmd_compare(sys.argv[2:])
    except UsageError as exc:
        print(f"hakmem: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
