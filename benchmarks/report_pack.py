"""Benchmark: the first report at fleet size written into Git, as loose objects and in bulk (issue 29).

    .venv/bin/python benchmarks/report_pack.py [--nodes 1000] [--repeat 3] [--push]

In-process: renders every node page and GPU map of a fleet where every node is out of sync (benchmarks/reports.py's
fleet, 9 files a node: 9,000 at 1,000 nodes, 45,000 at 5,000), keeps the bytes, then writes them into a fresh bare
repository per run, each way interleaved --repeat times, and prints the CPU seconds (user + system, os.times) and
wall time of the write, and the size and number of files under objects/:

- loose: `repo.create_blob` per file, what reportstore.py did before (libgit2's loose backend, zlib level 1);
- loose-0: an `OdbBackendLoose(objects, 0, False)` at top priority (compression level 0), read back once: libgit2
  writes level-0 objects unreadable ("failed to inflate"), so it is reported and left out;
- sink: adapters/git/packwrite.py's BlobSink as store_report uses it (packs of PACK_BYTES, 8 MiB, of content; the
  delta search in PACK_THREADS libgit2 threads);
- sink-1: the same with the delta search on the caller's thread only (PACK_THREADS = 1, as before);
- one-pack: the same with one pack for the whole report (no bound on the content held);
- hash: `pygit2.hash` of every file, nothing written (the floor: the blob ids alone).
With --push, each written report is also committed (one tree) and pushed to a bare repository served by
`git daemon` on loopback, and the commit and push CPU are printed too (the push builds its own pack either way).
Every written run reads 100 blobs back through a second handle; every pushed run checks the remote's tip.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pygit2
from pygit2.enums import FileMode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from reports import fleet  # noqa: E402

from reconciler.adapters.git import packwrite  # noqa: E402
from reconciler.adapters.git.packwrite import PACK_BYTES, BlobSink  # noqa: E402
from reconciler.logic.reports import reports  # noqa: E402

Files = list[tuple[str, bytes]]


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def sys_cpu() -> float:
    return os.times().system


def write_loose(repo: pygit2.Repository, files: Files) -> dict[str, pygit2.Oid]:
    return {path: repo.create_blob(data) for path, data in files}


def write_loose_0(repo: pygit2.Repository, files: Files) -> dict[str, pygit2.Oid]:
    repo.odb.add_backend(pygit2.OdbBackendLoose(str(Path(repo.path) / "objects"), 0, False), 1000)
    return {path: repo.create_blob(data) for path, data in files}


def sink_writer(pack_bytes: int) -> Callable[[pygit2.Repository, Files], dict[str, pygit2.Oid]]:
    def write(repo: pygit2.Repository, files: Files) -> dict[str, pygit2.Oid]:
        sink = BlobSink(repo, pack_bytes=pack_bytes)
        ids = {path: sink.add(data) for path, data in files}
        sink.close()
        return {path: pygit2.Oid(hex=oid) for path, oid in ids.items()}

    return write


def one_thread(
    write: Callable[[pygit2.Repository, Files], dict[str, pygit2.Oid]],
) -> Callable[..., dict[str, pygit2.Oid]]:
    def run(repo: pygit2.Repository, files: Files) -> dict[str, pygit2.Oid]:
        threads, packwrite.PACK_THREADS = packwrite.PACK_THREADS, 1
        try:
            return write(repo, files)
        finally:
            packwrite.PACK_THREADS = threads

    return run


WAYS: dict[str, Callable[[pygit2.Repository, Files], dict[str, pygit2.Oid]]] = {
    "loose": write_loose,
    "sink": sink_writer(PACK_BYTES),
    "sink-1": one_thread(sink_writer(PACK_BYTES)),
    "one-pack": sink_writer(1 << 62),
}


def tree_of(repo: pygit2.Repository, ids: dict[str, pygit2.Oid]) -> pygit2.Oid:
    nested: dict[str, object] = {}
    for path, oid in ids.items():
        *dirs, base = path.split("/")
        node = nested
        for d in dirs:
            child = node.setdefault(d, {})
            assert isinstance(child, dict)
            node = child
        node[base] = oid

    def write(node: dict[str, object]) -> pygit2.Oid:
        builder = repo.TreeBuilder()
        for name, value in sorted(node.items()):
            if isinstance(value, dict):
                builder.insert(name, write(value), FileMode.TREE)
            else:
                assert isinstance(value, pygit2.Oid)
                builder.insert(name, value, FileMode.BLOB)
        oid: pygit2.Oid = builder.write()
        return oid

    return write(nested)


def objects_on_disk(path: Path) -> tuple[int, int]:
    sizes = [f.stat().st_size for f in (path / "objects").rglob("*") if f.is_file()]
    return sum(sizes), len(sizes)


class Daemon:
    def __init__(self, root: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.root = root
        argv = ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", f"--base-path={root}",
                "--listen=127.0.0.1", f"--port={self.port}", str(root)]  # fmt: skip
        self.proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("git daemon did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def one_run(way: str, files: Files, tmp: Path, n: int, daemon: Daemon | None) -> dict[str, float]:
    path = tmp / f"{way}-{n}.git"
    repo = pygit2.init_repository(str(path), bare=True)
    c0, s0, w0 = cpu(), sys_cpu(), time.perf_counter()
    ids = WAYS[way](repo, files)
    c1, s1, w1 = cpu(), sys_cpu(), time.perf_counter()
    out = {"write_cpu": c1 - c0, "write_sys": s1 - s0, "write_wall": w1 - w0}
    other = pygit2.Repository(str(path))
    for p, data in files[:: max(1, len(files) // 100)]:
        assert bytes(other[ids[p]].peel(pygit2.Blob).data) == data, (way, p)
    out["bytes"], out["files"] = (float(x) for x in objects_on_disk(path))
    if daemon is not None:
        who = pygit2.Signature("bench", "bench@example.com")
        c2 = cpu()
        commit = repo.create_commit("refs/heads/reports", who, who, "report", tree_of(repo, ids), [])
        c3 = cpu()
        pygit2.init_repository(str(daemon.root / f"{way}-{n}.git"), bare=True)
        remote = repo.remotes.create_anonymous(f"git://127.0.0.1:{daemon.port}/{way}-{n}.git")
        remote.push(["refs/heads/reports:refs/heads/reports"])
        c4 = cpu()
        assert pygit2.Repository(str(daemon.root / f"{way}-{n}.git")).revparse_single("reports").id == commit
        out["commit_cpu"], out["push_cpu"] = c3 - c2, c4 - c3
    shutil.rmtree(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--push", action="store_true", help="also commit and push each report to a git daemon")
    args = ap.parse_args()
    t0 = time.process_time()
    files = [(page.path, page.render()) for page in reports.page_sources(fleet(args.nodes, 100.0))]
    rendered = time.process_time() - t0
    total = sum(len(data) for _, data in files)
    print(f"{args.nodes} nodes: {len(files):,} files, {total / 2**20:.1f} MiB, rendered in {rendered:.2f} s CPU")
    with tempfile.TemporaryDirectory(prefix="migplan-bench-pack-") as tmp_name:
        tmp = Path(tmp_name)
        start = time.perf_counter()
        t = time.process_time()
        hashes = [pygit2.hash(data) for _, data in files]
        print(f"  hash (floor, nothing written): {time.process_time() - t:.2f} s CPU, {len(set(hashes)):,} ids")
        try:
            probe = pygit2.init_repository(str(tmp / "level0.git"), bare=True)
            ids = write_loose_0(probe, files[:20])
            readable = all(bytes(pygit2.Repository(probe.path)[o].peel(pygit2.Blob).data) for o in ids.values())
            print(f"  loose-0: {'read back' if readable else 'unreadable'}")
        except pygit2.GitError as exc:
            print(f"  loose-0 (OdbBackendLoose, level 0): unreadable once written ({exc}); left out")
        served = tmp / "served"
        served.mkdir()
        daemon = Daemon(served) if args.push else None
        runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
        try:
            for n in range(args.repeat):
                for way in WAYS:
                    runs[way].append(one_run(way, files, tmp, n, daemon))
        finally:
            if daemon is not None:
                daemon.stop()
        for way, results in runs.items():

            def fig(key: str, results: list[dict[str, float]] = results) -> str:
                values = [r[key] for r in results]
                return f"{min(values):.2f} (median {statistics.median(values):.2f})"

            line = f"  {way:9} write {fig('write_cpu')} s CPU (system {fig('write_sys')}), {fig('write_wall')} s wall"
            line += f"; objects/ {results[0]['bytes'] / 2**20:.1f} MiB in {int(results[0]['files']):,} files"
            if daemon is not None:
                line += f"; commit {fig('commit_cpu')} s CPU, push {fig('push_cpu')} s CPU"
            print(line, flush=True)
        print(f"  ({args.repeat} runs each, interleaved, {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
