"""The real-application suite of `hakmem compare --suite apps`: redis, sqlite3, python3, lua5.4, z3,
ghostscript and gcc on inputs generated here at run time, each run's output checked against glibc's."""

import hashlib
import os
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import hakmem_bench as hb

# Every generator draws from this seed: the same input for every allocator and every run.
SEED = 20261206


@dataclass
class AppSpec:
    """An application: the Debian package that ships it, the program it runs, and how to make
    its input.  prepare() writes the input into the app's folder and returns the argv."""

    name: str
    package: str
    program: str
    about: str
    prepare: Callable[[Path, float], List[str]]
    outputs: Tuple[str, ...] = ()     # files the run writes; their digests are part of its output
    scratch: Tuple[str, ...] = ()     # files removed before every run, so each starts afresh
    env: Tuple[Tuple[str, str], ...] = ()


# ------------------------------------------------------------------ inputs


def gen_sqlite(d: Path, scale: float) -> List[str]:
    rows = max(1000, int(80000 * scale))
    sql = f"""
PRAGMA journal_mode = DELETE;
PRAGMA synchronous = OFF;
PRAGMA cache_size = -8000;
CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT, score INTEGER);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, item TEXT, qty INTEGER, note TEXT);
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX orders_item ON orders(item);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows // 10})
INSERT INTO customer SELECT i, 'customer-' || i || '-' || substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26),
  'city' || (i * 7 % 97), (i * 7919) % 1000 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
INSERT INTO orders SELECT i, 1 + (i * 48271) % {rows // 10}, 'item-' || ((i * 16807) % 5003),
  1 + i % 17, printf('%.*c', 8 + (i * 31) % 200, 'x') FROM n;
COMMIT;
UPDATE orders SET qty = qty * 2, note = note || '-updated' WHERE item LIKE 'item-1%';
UPDATE customer SET score = score + 1 WHERE city IN (SELECT city FROM customer GROUP BY city HAVING count(*) > 10);
DELETE FROM orders WHERE id % 13 = 0;
SELECT count(*), sum(qty), sum(length(note)) FROM orders;
SELECT c.city, count(*), sum(o.qty), max(length(o.note))
  FROM orders o JOIN customer c ON c.id = o.customer GROUP BY c.city ORDER BY c.city LIMIT 20;
SELECT o.item, group_concat(DISTINCT c.city) IS NOT NULL, count(*) FROM orders o JOIN customer c ON c.id = o.customer
  WHERE o.item < 'item-2' GROUP BY o.item ORDER BY count(*) DESC, o.item LIMIT 10;
CREATE TABLE summary AS SELECT customer, count(*) AS n, sum(qty) AS q FROM orders GROUP BY customer;
SELECT count(*), sum(n), sum(q) FROM summary;
VACUUM;
SELECT count(*) FROM orders o JOIN summary s ON s.customer = o.customer WHERE s.n > 5;
"""
    (d / "script.sql").write_text(sql)
    return ["{program}", "db.sqlite", ".read script.sql"]


PYTHON_WORK = r'''
import json, sys
n = int(sys.argv[1])

class Node:
    def __init__(self, name, parent):
        self.name, self.parent, self.children, self.attrs = name, parent, [], {}

def build(n):
    root = Node("root", None)
    nodes = [root]
    for i in range(n):
        parent = nodes[(i * 7919) % len(nodes)]
        node = Node("node-%d-%s" % (i, "x" * (i % 37)), parent)
        node.attrs = {"k%d" % j: str(i * j) for j in range(i % 9)}
        parent.children.append(node)
        nodes.append(node)
    return root, nodes

total = 0
for rnd in range(4):
    root, nodes = build(n)
    words = {}
    for node in nodes:
        for w in node.name.split("-"):
            words.setdefault(w[:6], []).append(len(node.children))
    doc = [{"name": x.name, "attrs": x.attrs, "kids": [c.name for c in x.children[:5]]} for x in nodes[::3]]
    text = json.dumps(doc)
    back = json.loads(text)
    lines = sorted(("%s:%d" % (k, sum(v)) for k, v in words.items()), key=len)
    total += len(text) + len(back) + len(lines) + sum(len(x["attrs"]) for x in back)
    del root, nodes, words, doc, back
print("checksum", total)
'''


def gen_python(d: Path, scale: float) -> List[str]:
    (d / "work.py").write_text(PYTHON_WORK)
    # Not -I: it would ignore PYTHONHASHSEED, which keeps dict layouts (and so the work) the same every run.
    return ["{program}", "-s", "work.py", str(max(1000, int(20000 * scale)))]


LUA_WORK = r'''
local n = tonumber(arg[1])
local total = 0
for round = 1, 3 do
  local t = {}
  for i = 1, n do
    t[i] = string.format("item-%d-%s", (i * 7919) % n, string.rep("ab", i % 23))
  end
  table.sort(t)
  local index = {}
  for i, s in ipairs(t) do
    local key = s:sub(1, 8)
    local bucket = index[key]
    if not bucket then bucket = {} index[key] = bucket end
    bucket[#bucket + 1] = s:upper():gsub("AB", "c")
  end
  local parts = {}
  for k, v in pairs(index) do parts[#parts + 1] = k .. "=" .. #v end
  table.sort(parts)
  local joined = table.concat(parts, ",")
  local objs = {}
  for i = 1, n // 2 do objs[i] = { id = i, name = t[i], tags = { t[i]:len(), i % 7, "x" .. i } } end
  for i = 1, #objs do total = total + #objs[i].tags + objs[i].tags[1] end
  total = total + #joined + #t
end
print("checksum", total)
'''


def gen_lua(d: Path, scale: float) -> List[str]:
    (d / "work.lua").write_text(LUA_WORK)
    return ["{program}", "work.lua", str(max(1000, int(100000 * scale)))]


def gen_z3(d: Path, scale: float) -> List[str]:
    """Random 3-SAT near the phase transition plus linear integer problems, each in its own
    push/pop scope: z3 builds and frees terms, clauses and lemmas throughout."""
    rng = random.Random(SEED)
    out = ["(set-option :random-seed 1)"]
    problems = max(1, round(3 * scale))
    # 200 variables at 4.26 clauses per variable take z3 most of a second each; fewer when scaled down.
    nv = 200 if scale >= 1 else max(30, int(200 * scale))
    for p in range(problems):
        out.append("(push)")
        out += [f"(declare-const b{p}_{i} Bool)" for i in range(nv)]
        for _ in range(int(nv * 4.26)):
            lits = []
            for v in rng.sample(range(nv), 3):
                lits.append(f"b{p}_{v}" if rng.random() < 0.5 else f"(not b{p}_{v})")
            out.append(f"(assert (or {' '.join(lits)}))")
        out.append("(check-sat)")
        out.append("(pop)")
        out.append("(push)")
        nx = 12
        out += [f"(declare-const x{p}_{i} Int)" for i in range(nx)]
        out += [f"(assert (and (>= x{p}_{i} -50) (<= x{p}_{i} 50)))" for i in range(nx)]
        for _ in range(16):
            terms = " ".join(f"(* {rng.randint(-9, 9)} x{p}_{rng.randrange(nx)})" for _ in range(4))
            out.append(f"(assert ({rng.choice(['<=', '>='])} (+ {terms}) {rng.randint(-40, 40)}))")
        out.append(f"(assert (= (mod (+ {' '.join(f'x{p}_{i}' for i in range(nx))}) 7) 3))")
        out.append("(check-sat)")
        out.append("(pop)")
    (d / "problems.smt2").write_text("\n".join(out) + "\n")
    return ["{program}", "-smt2", "problems.smt2"]


def gen_gs(d: Path, scale: float) -> List[str]:
    """Pages of random curves, gradients-by-hand and text in several fonts, rendered to PPM."""
    rng = random.Random(SEED)
    pages = max(1, round(20 * scale))
    ps = ["%!PS-Adobe-3.0", "/rgb { setrgbcolor } def"]
    fonts = ["Times-Roman", "Helvetica-Bold", "Courier", "Palatino-Italic", "NewCenturySchlbk-Roman"]
    for pg in range(pages):
        for _ in range(60):
            pts = " ".join(f"{rng.uniform(0, 600):.1f} {rng.uniform(0, 800):.1f}" for _ in range(6))
            ps.append(f"{rng.random():.2f} {rng.random():.2f} {rng.random():.2f} rgb newpath "
                      f"{rng.uniform(0, 600):.1f} {rng.uniform(0, 800):.1f} moveto {pts} curveto closepath "
                      + ("fill" if rng.random() < 0.5 else f"{rng.uniform(0.5, 6):.1f} setlinewidth stroke"))
        for _ in range(40):
            ps.append(f"/{rng.choice(fonts)} findfont {rng.randint(6, 48)} scalefont setfont "
                      f"gsave {rng.uniform(0, 500):.1f} {rng.uniform(0, 780):.1f} translate {rng.randint(0, 359)} rotate "
                      f"0 0 moveto (hakmem page {pg} text {rng.randint(0, 10 ** 6)}) show grestore")
        ps.append(f"0 1 99 {{ /i exch def i 100 div 0.5 1 i 100 div sub rgb newpath 300 400 i 3 mul 0 360 arc "
                  f"stroke }} for showpage")
    (d / "doc.ps").write_text("\n".join(ps) + "\n")
    return ["{program}", "-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-r120", "-sDEVICE=ppmraw",
            "-sOutputFile=page-%02d.ppm", "doc.ps"]


def gen_gcc(d: Path, scale: float) -> List[str]:
    """A C file of many functions with loops, switches and structs: the optimiser's passes
    allocate per function, and the driver runs cc1 and as (a process tree)."""
    rng = random.Random(SEED)
    funcs = max(4, int(40 * scale))
    c = ["#include <stddef.h>", "struct s { int a; long b; double c; unsigned char d[16]; };"]
    for f in range(funcs):
        body = []
        for k in range(rng.randint(3, 8)):
            op = rng.choice(["+", "-", "*", "^", "|"])
            body.append(f"  for (int i{k} = 0; i{k} < n; i{k}++) {{ acc = acc {op} (v[i{k}] * {rng.randint(1, 99)}); "
                        f"p->d[i{k} & 15] += (unsigned char)acc; }}")
            cases = " ".join(f"case {j}: acc += {rng.randint(1, 1000)} * p->b; break;" for j in range(rng.randint(3, 10)))
            body.append(f"  switch (acc & 15) {{ {cases} default: p->c += acc; }}")
        c.append(f"long f{f}(struct s *p, const long *v, int n) {{\n  long acc = {f};\n" + "\n".join(body)
                 + "\n  return acc + p->a;\n}")
    c.append("long (*table[])(struct s *, const long *, int) = {" + ", ".join(f"f{f}" for f in range(funcs)) + "};")
    (d / "gen.c").write_text("\n".join(c) + "\n")
    return ["{program}", "-O2", "-c", "gen.c", "-o", "gen.o"]


APPS: Tuple[AppSpec, ...] = (
    AppSpec("redis", "redis-server", "redis-server",
            "redis-server on 127.0.0.1 driven by redis-benchmark (SET/GET/LPUSH/LRANGE, values of 16 B to 4 KiB)",
            lambda d, s: []),
    AppSpec("sqlite", "sqlite3", "sqlite3",
            "sqlite3 on a generated script: bulk inserts with indexes, updates, joins, VACUUM", gen_sqlite,
            scratch=("db.sqlite", "db.sqlite-journal")),
    AppSpec("python", "python3", "python3",
            "python3 on pure-Python work: object graphs, dicts and lists of strings, json dump/load", gen_python,
            env=(("PYTHONHASHSEED", "0"),)),
    AppSpec("lua", "lua5.4", "lua5.4", "lua5.4 on string- and table-heavy work", gen_lua),
    AppSpec("z3", "z3", "z3", "z3 on generated SMT problems (3-SAT and linear integer arithmetic)", gen_z3),
    AppSpec("gs", "ghostscript", "gs", "ghostscript rendering generated PostScript (curves, fonts) to PPM",
            gen_gs, outputs=("page-*.ppm",), scratch=("page-*.ppm",)),
    AppSpec("gcc", "gcc", "gcc", "gcc -O2 -c on a generated C file (driver, cc1 and as)", gen_gcc,
            outputs=("gen.o",), scratch=("gen.o",)),
)


# ------------------------------------------------------------------ redis

REDIS_KEYSPACE = 10000
# (value size, redis-benchmark tests): LRANGE only on small values, where a reply of 100
# elements stays a few KB; on 4 KiB values it would measure the network copy, not the server.
REDIS_PASSES = ((16, "set,get,lpush,lrange_100"), (512, "set,get,lpush"), (4096, "set,get"))
REDIS_REQUESTS = 20000
REDIS_START_TIMEOUT = 10.0


def port_busy(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def redis_check_script(scale: float) -> str:
    """Commands whose replies are the run's output: the same for every allocator, or the server
    is broken.  Values of mixed sizes, lists, hashes, counters, deletes."""
    rng = random.Random(SEED)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    cmds = []
    for i in range(max(20, int(300 * min(scale, 1.0)))):
        size = rng.choice((8, 60, 300, 1500, 5000))
        value = "".join(rng.choice(alphabet) for _ in range(size))
        cmds += [f"SET chk:{i} {value}", f"APPEND chk:{i} tail{i}", f"STRLEN chk:{i}", f"GETRANGE chk:{i} 0 40",
                 f"RPUSH chkl:{i % 17} {value[:50]}", f"HSET chkh:{i % 11} f{i} {value[:30]}",
                 f"INCRBY chkc {size}"]
        if i % 3 == 0:
            cmds.append(f"DEL chk:{i}")
    for j in range(17):
        cmds += [f"LLEN chkl:{j}", f"LRANGE chkl:{j} 0 3"]
    for j in range(11):
        cmds += [f"HLEN chkh:{j}", f"HGET chkh:{j} f{j}"]
    cmds += ["GET chkc", "EXISTS chk:0 chk:1 chk:2"]
    return "\n".join(cmds) + "\n"


def redis_rps(csv_text: str) -> Tuple[int, float]:
    """Requests and the seconds they took, summed over redis-benchmark's --csv lines."""
    tests, seconds = 0, 0.0
    for line in csv_text.splitlines():
        fields = [f.strip('"') for f in line.split('","')]
        if len(fields) >= 2 and fields[0] != "test":
            rps = float(fields[1].strip('"'))
            if rps > 0:
                tests += 1
                seconds += 1.0 / rps
    return tests, seconds


class Redis:
    """One run: start the server under the allocator, drive it with redis-benchmark (under
    glibc, so only the server's allocator differs), replay the check script with redis-cli,
    shut the server down and report its peak RSS and CPU.  The server's whole process group
    is killed on the way out, whatever happened."""

    def __init__(self, d: Path, server: Path, bench: Path, cli: Path, scale: float, port: Optional[int]):
        self.d, self.server, self.bench, self.cli, self.port = d, server, bench, cli, port
        self.requests = max(200, int(REDIS_REQUESTS * scale))
        (d / "check.txt").write_text(redis_check_script(scale))

    def argv(self, port: str) -> List[str]:
        return [str(self.server), "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.d / "data"), "--daemonize", "no", "--logfile", "", "--databases", "1"]

    def describe(self, setup: "hb.Setup") -> str:
        passes = "; ".join(f"-d {size} -t {tests}" for size, tests in REDIS_PASSES)
        return (hb.command_line(self.argv(str(self.port or 'PORT')), setup.env(self.server))
                + f" with redis-benchmark -n {self.requests} -r {REDIS_KEYSPACE} -P 8 ({passes})")

    def run(self, setup: "hb.Setup", base_env: Dict[str, str], timeout: float) -> "hb.RunResult":
        port = self.port or free_port()
        if port_busy(port):
            return hb.RunResult(False, error=f"port {port} on 127.0.0.1 is busy (another server listens there)")
        shutil.rmtree(self.d / "data", ignore_errors=True)
        (self.d / "data").mkdir()
        deadline = time.monotonic() + timeout
        server = hb.Measured(self.argv(str(port)), setup.env(self.server), base_env, cwd=self.d)
        try:
            return self._drive(server, port, base_env, deadline)
        except subprocess.TimeoutExpired as exc:
            return hb.RunResult(False, error=f"timed out: {exc.cmd[0]} (the server was killed)",
                                stderr_tail=hb.Measured._tail(server.stderr_text()))
        finally:
            server.kill()

    def _drive(self, server: "hb.Measured", port: int, base_env: Dict[str, str],
               deadline: float) -> "hb.RunResult":
        start_by = time.monotonic() + REDIS_START_TIMEOUT
        while not redis_ready(port):
            if not server.running():
                res = server.wait(1.0)
                busy = "Address already in use" in server.stderr_text() or "already in use" in res.stderr_tail
                why = f"port {port} on 127.0.0.1 is busy" if busy else "redis-server exited at start"
                return hb.RunResult(False, error=why + (f" ({res.error})" if res.error else ""),
                                    stderr_tail=res.stderr_tail)
            if time.monotonic() > min(start_by, deadline):
                server.kill()
                return hb.RunResult(False, error=f"redis-server did not answer on port {port} within "
                                                 f"{REDIS_START_TIMEOUT:g} s", stderr_tail=server.wait(1.0).stderr_tail)
            time.sleep(0.02)
        tests, seconds, wall = 0, 0.0, 0.0
        for size, which in REDIS_PASSES:
            res = hb.run_command([str(self.bench), "-h", "127.0.0.1", "-p", str(port), "-q", "--csv",
                                  "-n", str(self.requests), "-r", str(REDIS_KEYSPACE), "-P", "8", "-d", str(size),
                                  "-t", which], {}, base_env, max(1.0, deadline - time.monotonic()))
            if not res.ok:
                res.error = f"redis-benchmark -d {size}: {res.error}"
                return res
            t, sec = redis_rps(res.stdout)
            if t == 0:
                return hb.RunResult(False, error=f"redis-benchmark -d {size} printed no results",
                                    stderr_tail=res.stderr_tail)
            tests, seconds, wall = tests + t, seconds + sec * self.requests, wall + float(res.metrics["wall_s"])
        with open(self.d / "check.txt", "rb") as script:
            check = subprocess.run([str(self.cli), "-h", "127.0.0.1", "-p", str(port)], stdin=script,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env,
                                   timeout=max(1.0, deadline - time.monotonic()), check=False)
        subprocess.run([str(self.cli), "-h", "127.0.0.1", "-p", str(port), "shutdown", "nosave"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=base_env, timeout=10, check=False)
        res = server.wait(max(1.0, deadline - time.monotonic()))
        if not res.ok:
            res.error = f"redis-server: {res.error}"
            return res
        if check.returncode != 0:
            return hb.RunResult(False, error=f"redis-cli exit status {check.returncode}",
                                stderr_tail=check.stderr.decode(errors="replace")[-400:])
        # The server's CPU and peak RSS; its throughput over every request of every pass.
        res.metrics.update(ops_per_sec=tests * self.requests / seconds, wall_s=wall,
                           server_wall_s=res.metrics["wall_s"])
        res.stdout = check.stdout.decode(errors="replace")
        return res


# ------------------------------------------------------------------ the suite


def find(program: str, base_env: Dict[str, str]) -> Optional[Path]:
    found = shutil.which(program, path=base_env.get("PATH", os.defpath))
    return Path(os.path.abspath(found)) if found else None


def real_python(python: Path, base_env: Dict[str, str]) -> Path:
    """The interpreter itself, not a launcher script (pyenv's shims are bash scripts, which
    would be measured too)."""
    try:
        out = subprocess.run([str(python), "-c", "import sys; print(sys.executable)"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=base_env, text=True, timeout=30, check=True).stdout
        exe = Path(out.strip())
        return exe if exe.is_file() else python
    except (OSError, subprocess.SubprocessError):
        return python


def digest_outputs(d: Path, patterns: Sequence[str]) -> str:
    lines = []
    for pattern in patterns:
        files = sorted(d.glob(pattern))
        lines += [f"{f.name} sha256={hashlib.sha256(f.read_bytes()).hexdigest()}" for f in files]
        if not files:
            lines.append(f"{pattern}: no such file")
    return "\n".join(lines)


def simple_workload(spec: AppSpec, d: Path, program: Path, argv: List[str]) -> "hb.Workload":
    extra_env = dict(spec.env)

    def run(setup: "hb.Setup", base_env: Dict[str, str], timeout: float) -> "hb.RunResult":
        for pattern in spec.scratch:
            for f in d.glob(pattern):
                f.unlink()
        res = hb.run_command(argv, {**setup.env(program), **extra_env}, base_env, timeout, cwd=d)
        if res.ok and spec.outputs:
            res.stdout += "\n" + digest_outputs(d, spec.outputs)
        return res

    return hb.Workload(spec.name, "app", "time", run=run,
                       describe=lambda s: f"(cd {d.name}/ && {hb.command_line(argv, {**s.env(program), **extra_env})})",
                       check_output=True, note=spec.about)


def workloads(selection: Optional[str], workdir: Path, scale: float, port: Optional[int],
              base_env: Dict[str, str]) -> Tuple[List["hb.Workload"], List[str], List[str]]:
    """The chosen applications that are installed, a line per application that is not, and
    notes for the report.  Inputs are generated into workdir."""
    by_name = {a.name: a for a in APPS}
    names = [n for n in selection.split(",") if n] if selection else list(by_name)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        hb.fail(f"compare: --apps: unknown application {', '.join(unknown)} (known: {', '.join(by_name)})")
    if port is not None:
        if not 1 <= port <= 65535:
            hb.fail(f"compare: --port {port}: not a TCP port")
        if "redis" in names and port_busy(port):
            hb.fail(f"compare: --port {port}: port {port} on 127.0.0.1 is busy (another server listens there); "
                    "choose another, or leave --port out to take a free one")
    loads, missing, notes = [], [], []
    for name in names:
        spec = by_name[name]
        needed = [(spec.program, spec.package)]
        if name == "redis":
            needed += [("redis-benchmark", "redis-tools"), ("redis-cli", "redis-tools")]
        paths = [find(prog, base_env) for prog, _ in needed]
        absent = [(prog, pkg) for (prog, pkg), path in zip(needed, paths) if path is None]
        if absent:
            missing.append(f"{name}: not run: " + ", ".join(f"{prog} not found on PATH" for prog, _ in absent)
                           + f"; install the Debian package {', '.join(sorted({pkg for _, pkg in absent}))} "
                           "(as root: scripts/deps.sh apps)")
            hb.progress(missing[-1])  # the error line itself comes once, at the end
            continue
        program = paths[0]
        if name == "python":
            program = real_python(program, base_env)
        d = workdir / name
        d.mkdir(parents=True, exist_ok=True)
        if name == "redis":
            r = Redis(d, program, paths[1], paths[2], scale, port)
            loads.append(hb.Workload(name, "app", "ops", run=r.run, describe=r.describe, check_output=True,
                                     note=spec.about + "; requests/s, the server's CPU and peak RSS"))
        else:
            argv = [str(program) if a == "{program}" else a for a in spec.prepare(d, scale)]
            loads.append(simple_workload(spec, d, program, argv))
        notes.append(f"app {name}: {program}" + (f" (links its own allocator: under glibc, glibc's malloc is "
                                                   "preloaded)" if hb.links_own_allocator(program) else ""))
    if scale != 1.0:
        notes.append(f"applications scaled by --scale {scale:g}")
    return loads, missing, notes
