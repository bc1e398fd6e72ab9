"""Benchmark the commands users run, as processes, on the block-style inventory (8 GPUs per node).

    .venv/bin/python benchmarks/commands.py [--nodes 1000] [--repeat 3] [--run-seconds 40] [--no-run]

Self-contained: writes the block-style inventory of benchmarks/validate.py (every placement left to the solver,
`configPropagationSeconds: 1` so the adopting cycle is the second one, not 150 s later) into a Git repository,
starts a cluster twin built from it in a child process (`ClusterTwin.from_inventory`: API server + GPU Operator,
no per-node kubelets), then times, each as a whole process (interpreter start, imports, Git, API, report commit):

1. `migplan reconcile --once --repo R`: the first cycle (cold cache: ConfigMap + first report commit), the adopting
   cycle (every node relabelled to migplan's config names, report commit), the report-changing cycle (1% of the
   nodes recut by hand: `gpu-recut` drift) and the in-sync cycle (no write, no report change, --repeat times);
2. `migplan run` (no election): cycles per interval in steady state, and the report-changing cycle inside the
   long-lived process (1% drift injected while it runs), from its JSON log's "cycle finished" lines.

Each prints wall time, peak RSS of the measured process (wait4's ru_maxrss; /proc VmHWM for `migplan run`, which
spawns no child) and its ratio to floors measured in the same run, interleaved with it:
- floor = `migplan validate` of the same revision (a process) + a bare official-client process listing the same
  node and pod pages raw (`_preload_content=False`, orjson);
- the adopting cycle's write floor: a bare official-client process sending the same number of node merge patches
  at the same concurrency (spec.apply.writeConcurrency, default 16).
The CPU seconds (user + system) of each reconcile process are printed too: on a shared machine they move much less
than wall time; and beside them, for every timed process (cycle or floor), the CPU seconds the twin's process spent
while it ran (`/proc/<pid>/stat` before and after; the twin shares the machine, and a real API server would not).
`--compare DIR` also times another source tree's `migplan` (PYTHONPATH=DIR, its own cache) on the same in-sync
cycles, interleaved; `PYTHONPATH=DIR` on the whole benchmark measures that tree's every cycle.
Before timing, the bytecode of each measured tree's `reconciler` package is written, as pip writes it on install
(`--source-bytecode`: not, as before; see `precompile`).
Targets (issue 29) at 5,000 nodes: each cycle <= 15 s (goal 10), in-sync <= 1.3x its floor, the report-changing
cycle of `migplan run` <= 5 s, peak RSS <= 400 MB (goal 300); at 1,000 nodes each cycle <= 4 s. Figures are noisy
on a shared machine: the minimum of the repeats is printed next to the median.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson
from twinchild import answer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}
CLUSTER = """\
# yaml-language-server: $schema=../schemas/cluster.schema.json
apiVersion: migplan/v1
kind: Cluster
metadata: {name: bench}
spec:
  migStrategy: mixed
  apply:
    configPropagationSeconds: 1
"""
PAGE_SIZE = 500  # migplan's default LIST page size (adapters/kubeclient)


# ------------------------------------------------------------------------------ the inventory repository


def make_repo(root: Path, nodes: int) -> Path:
    from validate import generate  # the block-style inventory of the validate benchmark

    work = root / "inventory"
    generate(work, nodes, "block")
    (work / "cluster.yaml").write_text(CLUSTER)
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "inventory")):
        subprocess.run(["git", *args], cwd=work, env=GIT_ENV, check=True, capture_output=True)
    return work


# ------------------------------------------------------------------------------ the twin, in a child process


def _serve_twin(conn: Connection, inventory: str, kubeconfig: str) -> None:
    from reconciler.twin.cluster import ClusterTwin

    twin = ClusterTwin.from_inventory(inventory, kubeconfig=kubeconfig)
    twin.start()
    twin.settle(timeout=600)
    conn.send(len(twin.store.list("pods")))
    answer(conn, twin)


class Twin:
    def __init__(self, inventory: Path, kubeconfig: Path) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve_twin, args=(child, str(inventory), str(kubeconfig)), daemon=True)
        self.proc.start()
        self.pods: int = self.conn.recv()
        if self.proc.pid is not None:
            TWIN_PID[:] = [self.proc.pid]

    def call(self, cmd: str, arg: Any = None) -> Any:
        self.conn.send((cmd, arg))
        return self.conn.recv()

    def writes(self) -> int:
        return sum(n for (_, _, verb), n in self.call("counts").items() if verb not in ("list", "get", "watch"))

    def stop(self) -> None:
        self.call("stop")
        self.proc.join(30)


# ------------------------------------------------------------------------------ processes


def migplan() -> list[str]:
    exe = Path(sys.executable).parent / "migplan"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "reconciler.cli"]


CPU: list[float] = [0.0]  # CPU seconds (user + system) of the last timed process: steadier than wall when shared
TWIN_PID: list[int] = []  # the twin child, once started: its CPU is read around every timed process
TWIN_CPU: list[float] = [0.0]  # the twin's CPU seconds while the last timed process ran


def stat_cpu_ticks(stat: str) -> int:
    """utime + stime + cutime + cstime (clock ticks) of one `/proc/<pid>/stat` line.

    Field 2, the command name, is in parentheses and may itself hold spaces and parentheses (`(a) (b)`): the fields
    after it are counted from its last `)`, which nothing after it can contain (proc(5))."""
    head, sep, tail = stat.rpartition(")")
    if not sep or "(" not in head:
        raise ValueError(f"not a /proc/<pid>/stat line: {stat[:80]!r}")
    fields = tail.split()  # fields[0] is field 3 (state); utime is field 14
    if len(fields) < 15:
        raise ValueError(f"a /proc/<pid>/stat line with {len(fields) + 2} fields: {stat[:80]!r}")
    return sum(int(f) for f in fields[11:15])


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process so far: all its threads, its waited-for children, and its live
    descendants (read from /proc/<pid>/task/*/children); 0.0 for a process already gone."""
    ticks = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        proc = Path(f"/proc/{current}")
        try:
            ticks += stat_cpu_ticks((proc / "stat").read_text())
            for task in (proc / "task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone since it was listed
    return ticks / os.sysconf("SC_CLK_TCK")


def timed_process(argv: list[str], *, env: dict[str, str] | None = None) -> tuple[float, float, int, bytes]:
    """(wall s, peak RSS MB, exit code, stdout) of one whole process; its CPU seconds in CPU[0]."""
    twin0 = process_cpu(TWIN_PID[0]) if TWIN_PID else 0.0
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else b"")),
        threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else b"")),
    ]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    TWIN_CPU[0] = process_cpu(TWIN_PID[0]) - twin0 if TWIN_PID else 0.0
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    CPU[0] = usage.ru_utime + usage.ru_stime
    if proc.returncode not in (0, 1):
        sys.stderr.write(f"{' '.join(argv[:3])} exited {proc.returncode}: {(out[0] + err[0])[-3000:].decode()}\n")
    return wall, usage.ru_maxrss / 1024, proc.returncode, out[0]


def twin_sampler(folder: Path, label: str) -> subprocess.Popen[bytes]:
    """py-spy recording the twin's process until interrupted: the samples of whichever thread holds the GIL (its CPU in
    Python; a thread blocked on a socket is not counted)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = Path(sys.executable).parent / "py-spy"
    out = folder / f"twin-{label}-{time.time_ns()}.txt"
    argv = [str(exe), "record", "--pid", str(TWIN_PID[0]), "--format", "raw", "--rate", "100", "--gil", "-o", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the cycle starts
    return proc


def floor_list_main(kubeconfig: str) -> None:
    """The bare official client listing every node and pod page raw (a process of its own)."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    for fn in (api.list_node, api.list_pod_for_all_namespaces):
        cont = None
        while True:
            doc = orjson.loads(fn(limit=PAGE_SIZE, _continue=cont, _preload_content=False).data)
            cont = (doc.get("metadata") or {}).get("continue")
            if not cont:
                break
    api.api_client.close()


def floor_write_main(kubeconfig: str, count: int, concurrency: int) -> None:
    """The bare official client sending `count` node merge patches, `concurrency` at a time (a process)."""
    from concurrent.futures import ThreadPoolExecutor

    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=kubeconfig)
    api_client.configuration.connection_pool_maxsize = max(concurrency, 10)
    api_client.rest_client = type(api_client.rest_client)(api_client.configuration)
    api = client.CoreV1Api(api_client)
    names = [n["metadata"]["name"] for n in orjson.loads(api.list_node(_preload_content=False).data)["items"]]
    body = {"metadata": {"labels": {"bench.migplan.io/floor": str(time.time_ns())}}}

    def patch(name: str) -> None:
        resp = api.patch_node(name, body, _content_type="application/merge-patch+json", _preload_content=False)
        resp.data  # noqa: B018 - read the body, as migplan does
        resp.release_conn()

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(patch, [names[i % len(names)] for i in range(count)]))
    api_client.close()


def precompile(trees: list[Path]) -> int:
    """Write the bytecode of each tree's `reconciler` package (its __pycache__, git-ignored) before anything is timed.

    An installed migplan has it: pip compiles a wheel's modules when it installs them, and the image (deploy/
    Dockerfile) copies them with it. A source checkout run with PYTHONDONTWRITEBYTECODE=1 (this benchmark machine's
    environment) has none and never writes any, so every timed process compiled the ~105 modules a cycle imports
    from source: 0.15 s CPU per process (docs/explanation/scale.md), which a user's process does not spend.
    Returns the number of modules compiled or already current; `--source-bytecode` skips this (the figures before)."""
    import compileall

    done = 0
    for tree in trees:
        package = tree / "reconciler"
        if package.is_dir():
            compileall.compile_dir(str(package), quiet=1, workers=1)
            done += sum(1 for _ in package.rglob("*.py"))
    return done


def floor(inventory: Path, kubeconfig: Path) -> tuple[float, float, float]:
    """(validate s, bare list s, peak MB of the two) — the in-sync cycle's floor, both as processes."""
    tv, mv, rc, _ = timed_process([*migplan(), "validate", str(inventory), "-o", "json"])
    assert rc == 0, "the benchmark inventory must be valid"
    validate_cpu, validate_twin = CPU[0], TWIN_CPU[0]
    tl, ml, _, _ = timed_process([sys.executable, __file__, "--floor-list", str(kubeconfig)])
    print(
        f"    (floor: validate {validate_cpu:.2f} s CPU; twin {validate_twin:.2f} s CPU;"
        f" bare list {CPU[0]:.2f} s CPU; twin {TWIN_CPU[0]:.2f} s CPU)",
        flush=True,
    )
    return tv, tl, max(mv, ml)


# ------------------------------------------------------------------------------ the measurements


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--drift-percent", type=float, default=1.0)
    ap.add_argument("--run-seconds", type=float, default=40.0, help="how long `migplan run` is watched")
    ap.add_argument("--interval", type=float, default=10.0, help="`migplan run --interval`")
    ap.add_argument("--no-run", action="store_true", help="skip the `migplan run` part")
    ap.add_argument("--profile", type=Path, help="write a cProfile of each reconcile process into this folder")
    ap.add_argument(
        "--twin-profile",
        type=Path,
        help="sample the twin's process with py-spy (if installed; never a dependency) during each reconcile process:"
        " one collapsed-stack file per cycle in this folder",
    )
    ap.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="DIR",
        help="another migplan source tree (PYTHONPATH=DIR) timed on the same in-sync cycles, interleaved",
    )
    ap.add_argument(
        "--source-bytecode",
        action="store_true",
        help="do not precompile migplan's modules first (each process compiles them when PYTHONDONTWRITEBYTECODE=1)",
    )
    ap.add_argument("--floor-list", help=argparse.SUPPRESS)
    ap.add_argument("--floor-write", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_list:
        floor_list_main(args.floor_list)
        return 0
    if args.floor_write:
        floor_write_main(args.floor_write[0], int(args.floor_write[1]), int(args.floor_write[2]))
        return 0

    if not args.source_bytecode:
        trees = [REPO, *(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
        trees += [Path(d) for d in args.compare]
        print(f"bytecode of migplan's modules written beforehand, as pip does on install ({precompile(trees)} modules)")
    big = args.nodes >= 5000
    cycle_target = 15.0 if big else 4.0
    failed = False
    with tempfile.TemporaryDirectory(prefix="migplan-bench-cmd-") as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        repo = make_repo(tmp, args.nodes)
        print(f"inventory: {args.nodes} nodes x 8 GPUs, block style, in Git ({time.perf_counter() - t0:.1f} s)")
        kubeconfig = tmp / "kubeconfig"
        t0 = time.perf_counter()
        twin = Twin(repo, kubeconfig)
        took = time.perf_counter() - t0
        print(f"twin (child process, from the inventory, no kubelets): {twin.pods} pods, {took:.1f} s")
        reconcile = [
            *migplan(), "reconcile", "--once", "--repo", str(repo), "--kubeconfig", str(kubeconfig),
            "--cache-dir", str(tmp / "cache"), "--deadline", "600",
        ]  # fmt: skip

        def cycle(label: str) -> tuple[float, float, int, int]:
            twin.call("reset")
            argv = reconcile
            if args.profile:  # (slower: for where the time goes, not for the figures)
                args.profile.mkdir(parents=True, exist_ok=True)
                out = args.profile / f"{label}-{time.time_ns()}.prof"
                rest = reconcile[len(migplan()) :]
                argv = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "reconciler", *rest]
            sampler = twin_sampler(args.twin_profile, label) if args.twin_profile else None
            twin0 = process_cpu(TWIN_PID[0])
            wall, peak, rc, _ = timed_process(argv)
            cpu, twin_cpu = CPU[0], TWIN_CPU[0]
            if sampler:
                sampler.send_signal(signal.SIGINT)  # py-spy writes its file when interrupted
                sampler.wait(60)
            writes = twin.writes()
            twin.call("settle")
            settled = process_cpu(TWIN_PID[0]) - twin0  # with what its operator still did after the process
            twin_line = f"twin {twin_cpu:.2f} s CPU, {settled:.2f} s until settled"
            print(f"    ({label}: {cpu:.2f} s CPU; {twin_line})", flush=True)
            return wall, peak, rc, writes

        def verdict(label: str, wall: float, peak: float, floor_s: float | None, extra: str = "") -> None:
            nonlocal failed
            ratio = f", {wall / floor_s:.2f}x its floor ({floor_s:.2f} s)" if floor_s else ""
            ok = wall <= cycle_target and peak <= 400
            failed |= not ok
            print(f"  {label}: {wall:.2f} s, peak {peak:.0f} MB{ratio}{extra}  [{'ok' if ok else 'OVER'}]", flush=True)

        print("reconcile --once --repo (whole process):")
        tv, tl, _ = floor(repo, kubeconfig)
        wall, peak, rc, writes = cycle("first")
        verdict("first cycle", wall, peak, tv + tl, f"; exit {rc}, {writes} write(s)")
        time.sleep(1.2)  # configPropagationSeconds: 1
        wall, peak, rc, writes = cycle("adopting")
        if writes:
            twin0 = process_cpu(TWIN_PID[0])
            wf, _, _, _ = timed_process([sys.executable, __file__, "--floor-write", str(kubeconfig), str(writes), "16"])
            floor_cpu, floor_twin = CPU[0], TWIN_CPU[0]
            twin.call("settle")
            settled = process_cpu(TWIN_PID[0]) - twin0
            print(
                f"    (write floor: {floor_cpu:.2f} s CPU; twin {floor_twin:.2f} s CPU, {settled:.2f} s until settled)",
                flush=True,
            )
        else:
            wf = 0.0
        verdict(
            "adopting cycle", wall, peak, tv + tl + wf if wf else None,
            f"; exit {rc}, {writes} write(s); write floor {wf:.2f} s (bare client, same patches, 16 at a time)",
        )  # fmt: skip
        for _ in range(3):  # until converged (exit 0)
            wall, peak, rc, writes = cycle("settling")
            print(f"  (converging cycle: {wall:.2f} s, exit {rc}, {writes} write(s))")
            if rc == 0:
                break
        walls, peaks, floors = [], [], []
        others: dict[str, list[tuple[float, float]]] = {d: [] for d in args.compare}

        def other(tree: str) -> tuple[float, float, int]:
            argv = [*reconcile[:-4], "--cache-dir", str(tmp / f"cache-{abs(hash(tree))}"), "--deadline", "600"]
            wall, peak, rc, _ = timed_process(argv, env={**os.environ, "PYTHONPATH": tree})
            return wall, peak, rc

        for tree in args.compare:
            other(tree)  # its own cache: the clone is not the in-sync cycle
        for _ in range(args.repeat):
            for tree in args.compare:
                wall, peak, rc = other(tree)
                others[tree].append((wall, peak))
            wall, peak, rc, writes = cycle("in-sync")
            walls.append(wall)
            peaks.append(peak)
            failed |= rc != 0 or writes != 0
            tv, tl, _ = floor(repo, kubeconfig)
            floors.append((tv, tl))
        best = min(range(len(walls)), key=lambda i: walls[i] / sum(floors[i]))
        ratio = walls[best] / sum(floors[best])
        print(
            f"  in-sync cycle: {min(walls):.2f} s min, {statistics.median(walls):.2f} s median,"
            f" peak {max(peaks):.0f} MB;"
            f" floor validate {floors[best][0]:.2f} s + bare list {floors[best][1]:.2f} s -> {ratio:.2f}x"
            f" (target <= 1.3x)  [{'ok' if ratio <= 1.3 and min(walls) <= cycle_target else 'OVER'}]",
            flush=True,
        )
        failed |= ratio > 1.3
        for tree, runs in others.items():
            print(
                f"  in-sync cycle of {tree}: {min(w for w, _ in runs):.2f} s min, peak {max(p for _, p in runs):.0f} MB"
                f" (this tree, interleaved: {min(walls):.2f} s)"
            )
        names = [f"gpu-{n:05d}" for n in range(args.nodes)]
        n_drift = max(1, int(args.nodes * args.drift_percent / 100))
        victims = names[:: max(1, len(names) // n_drift)][:n_drift]
        twin.call("inject", [f"gpu-recut:{n}" for n in victims])
        twin.call("settle")
        wall, peak, rc, writes = cycle("report-changing")
        tv, tl, _ = floor(repo, kubeconfig)
        label = f"report-changing cycle ({len(victims)} nodes recut)"
        verdict(label, wall, peak, tv + tl, f"; exit {rc}, {writes} write(s)")
        if not args.no_run:
            failed |= run_controller(args, tmp, repo, kubeconfig, twin, names)
        twin.stop()
    print("RESULT:", "FAIL" if failed else "PASS")
    return 1 if failed else 0


def run_controller(
    args: argparse.Namespace, tmp: Path, repo: Path, kubeconfig: Path, twin: Twin, names: list[str]
) -> bool:
    """`migplan run` in steady state: cycles per interval, and the report-changing cycle inside it."""
    log_path = tmp / "run.log"
    argv = [
        *migplan(), "run", "--repo", str(repo), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp / "run-cache"),
        "--interval", str(args.interval), "--jitter", "0", "--no-leader-election", "--listen", "127.0.0.1:0",
        "--log-format", "json", "--cycle-deadline", "600",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    def logged(message: str) -> list[dict[str, Any]]:
        out = []
        for line in log_path.read_bytes().splitlines():
            try:
                doc = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(doc, dict) and doc.get("message") == message:
                out.append(doc)
        return out

    def finished() -> list[dict[str, Any]]:
        return logged("cycle finished")

    def hwm() -> float:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu() -> float:
        """CPU seconds (user + system) of the process so far, all its threads (watches included)."""
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    try:
        deadline = time.monotonic() + 600
        while not finished() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        t0 = time.monotonic()
        start_count = len(finished())
        cpu0, twin0 = cpu(), process_cpu(twin.proc.pid or 0)
        time.sleep(args.run_seconds)
        steady = finished()[start_count:]
        span = time.monotonic() - t0
        steady_cpu, steady_twin = cpu() - cpu0, process_cpu(twin.proc.pid or 0) - twin0
        # 1% drift again (other nodes than the reconcile --once run's), inside the long-lived process
        n_drift = max(1, int(args.nodes * args.drift_percent / 100))
        victims = names[1 :: max(1, len(names) // n_drift)][:n_drift]
        twin.call("inject", [f"gpu-recut:{n}" for n in victims])
        twin.call("settle")
        before = len(logged("cycle started"))  # the first cycle that starts after the drift sees it
        cpu1 = cpu()
        while len(finished()) <= before and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        changed = finished()[before:]
        peak = hwm()
        changed_cpu = cpu() - cpu1  # the cycle, and whatever else the process did until it finished (at most 0.5 s)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    secs = [float(d.get("seconds", 0)) for d in steady]
    print(
        f"migplan run (interval {args.interval:.0f} s, watched {span:.0f} s in steady state): {len(steady)} cycle(s)"
        + (f", {min(secs):.2f} s min / {statistics.median(secs):.2f} s median each" if secs else "")
        + f"; {steady_cpu:.2f} s CPU in all (twin {steady_twin:.2f} s CPU)"
    )
    if not changed:
        print(f"  no cycle after the drift; log tail: {log_path.read_bytes()[-2000:]!r}")
        return True
    rc_secs = float(changed[0].get("seconds", 0))
    ok = rc_secs <= 5.0 and peak <= 400
    print(
        f"  report-changing cycle ({len(victims)} nodes recut): {rc_secs:.2f} s ({changed_cpu:.2f} s CPU),"
        f" report {changed[0].get('report')!r};"
        f" peak RSS {peak:.0f} MB (target <= 5 s, <= 400 MB)  [{'ok' if ok else 'OVER'}]",
        flush=True,
    )
    return not ok


if __name__ == "__main__":
    sys.exit(main())
