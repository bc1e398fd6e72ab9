"""Soak: `migplan run` (two real processes, the CLI) at a short interval on a 200-node twin, for a few
minutes, with drift injected and removed while it runs, a Git push (announced by a signed webhook) in
between, and the leader killed once.

Checked and printed: every injected drift is reported (its finding code in a report committed to the
reports branch) and repaired (or, for drift migplan cannot repair, reported until it is removed); no two
cycles ever overlap (across both processes, from their JSON logs); the survivor's memory stays flat (RSS
samples); nothing is lost from the reports (every report reached the remote: empty outbox). Pods start and stop
on half the nodes all along (a pod a second): report commits per hour are printed, occupancy-only commits come at
most once per `reports.minInterval`, and a change of the findings is committed in the very cycle that sees it.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from gitserver import GitDaemon, git, make_bare, seed

from reconciler.twin.cluster import ClusterTwin

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

NODES = 200
SECRET = "soak-webhook-secret"
CP = "clusterpolicies.nvidia.com"
# reports.minInterval, scaled down like the 2 s cycle interval: occupancy churn commits at most this often
MIN_INTERVAL_S = 20
CHURN_NODES = [f"gpu-{i:04d}" for i in range(100, NODES)]  # none of the drift cases below touch these


# The twin's kubelet projects a ConfigMap 4 s after it sees the write; cluster.yaml below tells migplan 5 s. As on a
# real cluster, configPropagationSeconds must cover the kubelet's worst case plus the time its watch takes to
# deliver the write (here a loaded 2-core machine running two controllers and the twin): equal values race.
SOAK_PROPAGATION_SECONDS = 4.0


def inventory(nodes: int) -> dict[str, str]:
    files = {
        "cluster.yaml": "apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: soak}\n"
        "spec:\n  migStrategy: mixed\n  apply: {maxUnavailableNodes: 5, configPropagationSeconds: 5}\n"
        f"  reports: {{minInterval: {MIN_INTERVAL_S}s}}\n",
        "layouts/bal.yaml": "apiVersion: migplan/v1\nkind: Layout\nmetadata: {name: bal}\nspec:\n  model: H200-141GB\n"
        "  mig:\n    enabled: true\n    partitions:\n"
        + "".join(f"      - {{profile: {p}}}\n" for p in ("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb")),
        "layouts/ones.yaml": "apiVersion: migplan/v1\nkind: Layout\nmetadata: {name: ones}\n"
        "spec:\n  model: H200-141GB\n  mig:\n    enabled: true\n    partitions:\n" + "      - {profile: 1g.18gb}\n" * 7,
    }
    for i in range(nodes):
        gpus = "".join(
            f"    - {{index: {g}, model: H200-141GB, layout: {'bal' if (i + g) % 3 else 'ones'}}}\n" for g in range(8)
        )
        files[f"nodes/gpu-{i:04d}.yaml"] = (
            f"apiVersion: migplan/v1\nkind: Node\nmetadata: {{name: gpu-{i:04d}}}\nspec:\n  gpus:\n{gpus}"
        )
    return files


def wait_for(what: str, predicate: Callable[[], bool], timeout: float) -> float:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)
    return time.monotonic() - t0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def log_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def ts(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(line["time"]).timestamp()


def report_history(bare: Path) -> list[str]:
    """drift.yaml of every commit on the reports branch, oldest first."""
    try:
        commits = git("rev-list", "--reverse", "migplan-reports", cwd=bare).split()
    except RuntimeError:
        return []
    return [git("show", f"{c}:reports/drift.yaml", cwd=bare, check=False) for c in commits]


def test_soak(tmp_path: Path) -> None:
    t_start = time.monotonic()
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    files = inventory(NODES)
    seed(bare, tmp_path / "work", files, message="inventory")
    inv_dir = tmp_path / "inv"
    for rel, text in files.items():
        (inv_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (inv_dir / rel).write_text(text)
    daemon = GitDaemon(srv).start()
    # Real processes on the real clock: a kubelet that projects ConfigMaps within 4 s, and migplan told 5 s.
    twin = ClusterTwin.from_inventory(inv_dir, config_propagation_seconds=SOAK_PROPAGATION_SECONDS).start()
    twin.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "migplan"}})
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    rss: dict[str, list[tuple[float, int]]] = {}
    killed: dict[str, float] = {}
    leading_since = 0.0
    figures: dict[str, Any] = {}

    def start(ident: str) -> None:
        logs[ident] = tmp_path / f"{ident}.log"
        env = {
            **os.environ,
            "MIGPLAN_WEBHOOK_SECRET": SECRET,
            "MIGPLAN_RENEW_DEADLINE_SECONDS": "3",
            "MIGPLAN_RETRY_PERIOD_SECONDS": "0.5",
            "PYTHONUNBUFFERED": "1",
        }
        argv = [
            sys.executable, "-m", "reconciler", "run",
            "--repo", daemon.url("inv"), "--branch", "main",
            "--kubeconfig", str(twin.kubeconfig), "--namespace", "migplan",
            "--identity", ident, "--listen", "127.0.0.1:0",
            "--interval", "2", "--jitter", "0.3", "--lease-duration", "4",
            "--cache-dir", str(tmp_path / f"cache-{ident}"), "--log-format", "json",
        ]  # fmt: skip
        procs[ident] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=logs[ident].open("wb"), env=env)
        rss[ident] = []

    def holder() -> str:
        try:
            return str(
                twin.store.get("leases.coordination.k8s.io", "migplan-leader", "migplan")["spec"]["holderIdentity"]
            )
        except Exception:
            return ""

    def sample() -> None:
        for ident, p in procs.items():
            if p.poll() is None:
                rss[ident].append((time.monotonic(), rss_kib(p.pid)))

    def port_of(ident: str) -> int:
        for line in log_lines(logs[ident]):
            if line.get("message") == "controller started":
                return int(line["port"])
        raise AssertionError(f"{ident} has not started")

    def cycles_finished(ident: str) -> int:
        """Cycles that ran to the end (in sync or converging; not failed)."""
        return sum(
            1
            for x in log_lines(logs[ident])
            if x.get("message") == "cycle finished" and x.get("result") in ("success", "drift")
        )

    def reported_after(code: str, start: int) -> Callable[[], bool]:
        """A report committed after the first `start` ones names `code`."""
        return lambda: any(code in text for text in report_history(bare)[start:])

    def cleared_after(code: str, start: int) -> bool:
        """After the first report naming `code` (past `start`), a later report no longer names it."""
        history = report_history(bare)[start:]
        first = next((i for i, text in enumerate(history) if code in text), None)
        return first is not None and any(code not in text for text in history[first + 1 :])

    def waiting(what: str, predicate: Callable[[], bool], timeout: float = 60) -> float:
        def tick() -> bool:
            sample()
            return predicate()

        try:
            return wait_for(what, tick, timeout)
        except AssertionError as exc:
            # What the CI log needs to say why: the last report's findings and the leader's last warnings.
            history = report_history(bare)
            last = history[-1] if history else "(no report yet)"
            codes = sorted({line.strip() for line in last.splitlines() if "code:" in line})
            warnings = [
                f"{x.get('node', '')} {x.get('code', '')} {str(x.get('message', ''))[:160]}"
                for ident in logs
                for x in log_lines(logs[ident])[-400:]
                if x.get("level") in ("warning", "error")
            ][-25:]
            detail = "\n  ".join([f"{len(history)} report commits; last report's codes: {codes}", *warnings])
            raise AssertionError(f"{exc}\n  {detail}") from None

    drifts: list[dict[str, Any]] = []

    def drift(case: str, code: str, repaired: Callable[[], bool] | None, *, heal: bool = False) -> None:
        t0 = time.monotonic()
        start = len(report_history(bare))
        twin.inject(case)
        seen = waiting(f"{case} reported ({code})", reported_after(code, start), 60)
        row: dict[str, Any] = {"case": case, "code": code, "reported_s": round(seen, 1)}
        if heal:
            twin.heal(case)
        waiting(f"{case} gone from the reports", lambda: cleared_after(code, start), 90)
        if repaired is not None:
            waiting(f"{case} repaired", repaired, 90)
            row["repaired_s"] = round(time.monotonic() - t0, 1)
        else:
            row["repaired_s"] = f"n/a (removed by heal after {round(time.monotonic() - t0, 1)}s)"
        drifts.append(row)

    churning = threading.Event()
    churned = [0]

    def churn() -> None:
        """A pod a second starts on one of CHURN_NODES and, past 20 running, the oldest stops."""
        running: list[str] = []
        request = {"nvidia.com/mig-1g.18gb": "1"}
        resources = {"requests": request, "limits": request}
        while churning.is_set():
            name = f"churn-{churned[0]}"
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": "churn"}},
                "spec": {
                    "nodeName": CHURN_NODES[churned[0] % len(CHURN_NODES)],
                    "containers": [{"name": "main", "image": "registry.example/x", "resources": resources}],
                },
            }
            twin.store.create("pods", pod, "default")
            twin.store.patch("pods", name, {"status": {"phase": "Running"}}, "default", subresource="status")
            running.append(name)
            churned[0] += 1
            if len(running) > 20:
                twin.store.delete("pods", running.pop(0), "default", grace_period_seconds=0)
            time.sleep(1.0)

    churner = threading.Thread(target=churn, name="pod-churn", daemon=True)
    try:
        for ident in ("soak-a", "soak-b"):
            start(ident)
        first = waiting("a leader", lambda: holder() in procs, 30)
        leader = holder()
        waiting("the first converged cycle", lambda: cycles_finished(leader) >= 2, 120)
        figures["first_convergence_s"] = round(time.monotonic() - t_start, 1)
        churning.set()
        churner.start()
        churn_started, churn_commits0 = time.time(), len(report_history(bare))
        del first

        def policy() -> dict[str, Any]:
            spec: dict[str, Any] = twin.store.get(CP, "cluster-policy")["spec"]
            return spec

        def node_labels(node: str) -> dict[str, str]:
            labels: dict[str, str] = twin.store.get("nodes", node)["metadata"]["labels"]
            return labels

        # 1. the strategy changed by hand
        drift("wrong-strategy", "MP502", lambda: policy()["mig"]["strategy"] == "mixed")

        # 2. a GPU re-cut by hand, behind mig-manager's back
        def mark(node: str) -> str:
            ann = twin.store.get("nodes", node)["metadata"].get("annotations") or {}
            return str(ann.get("migplan.io/reconcile.state", ""))

        drift("gpu-recut:gpu-0020:2", "MP501", lambda: mark("gpu-0020") == "InSync")
        # 3. mig-manager failed on a node
        drift(
            "mig-config-failed:gpu-0007",
            "MP507",
            lambda: (
                node_labels("gpu-0007").get("nvidia.com/mig.config.state") == "success"
                and not node_labels("gpu-0007").get("nvidia.com/mig.config", "").startswith("all-")
            ),
        )
        # 4. a Git push, announced by a signed webhook to the leader
        leader = holder()
        before_cfg = node_labels("gpu-0003").get("nvidia.com/mig.config")
        changed = (
            files["nodes/gpu-0003.yaml"]
            .replace("layout: bal", "layout: ones")
            .replace("index: 0, model: H200-141GB, layout: ones", "index: 0, model: H200-141GB, layout: bal")
        )
        head = seed(bare, tmp_path / "work", {"nodes/gpu-0003.yaml": changed}, message="recut gpu-0003")
        body = json.dumps({"ref": "refs/heads/main", "after": head}).encode()
        sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        req = urllib.request.Request(
            f"http://127.0.0.1:{port_of(leader)}/webhook",
            data=body,
            headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": sig},
        )
        t_push = time.monotonic()
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 202
        waiting(
            "the pushed layout applied",
            lambda: (
                node_labels("gpu-0003").get("nvidia.com/mig.config") != before_cfg
                and node_labels("gpu-0003").get("nvidia.com/mig.config.state") == "success"
                and any(head in t for t in report_history(bare))
            ),
            90,
        )
        figures["push_to_applied_s"] = round(time.monotonic() - t_push, 1)

        # 5. kill the leader (SIGKILL, mid-whatever it is doing)
        leader = holder()
        standby = next(i for i in procs if i != leader)
        procs[leader].send_signal(signal.SIGKILL)
        killed[leader] = time.time()
        procs[leader].wait(10)
        figures["takeover_s"] = round(waiting("the standby to take over", lambda: holder() == standby, 15), 1)
        n0 = cycles_finished(standby)
        waiting("the new leader cycling", lambda: cycles_finished(standby) >= n0 + 2, 60)
        leading_since = time.monotonic()  # memory is compared from here: the survivor now holds the caches

        # 6. more drift under the new leader
        drift("stale-device-plugin-config", "MP503", lambda: "config" not in policy().get("devicePlugin", {}))
        drift("pod-wants-gpu:gpu-0011", "MP506", None, heal=True)
        drift("undocumented-node", "MP511", None, heal=True)

        # 7. let it run in sync for a while, sampling memory
        soak_until = time.monotonic() + max(45.0, 190.0 - (time.monotonic() - t_start))
        while time.monotonic() < soak_until:
            sample()
            time.sleep(1.0)
        history = report_history(bare)
        waiting("the last report in sync", lambda: "InSync" in report_history(bare)[-1], 30)
        history = report_history(bare)
        churn_s, churn_commits = time.time() - churn_started, len(history) - churn_commits0
    finally:
        churning.clear()
        if churner.is_alive():
            churner.join(5)
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        twin.stop()
        daemon.stop()

    # --- no overlapping cycles, across both processes ---------------------------------------------------
    spans: list[tuple[float, float, str]] = []
    for ident, path in logs.items():
        open_start: float | None = None
        for line in log_lines(path):
            if line.get("message") == "cycle started":
                assert open_start is None, f"{ident}: a cycle started inside another"
                open_start = ts(line)
            elif str(line.get("message", "")).startswith(("cycle finished", "cycle failed")) and open_start is not None:
                spans.append((open_start, ts(line), ident))
                open_start = None
        if open_start is not None:
            spans.append((open_start, killed.get(ident, time.time()), ident))
    spans.sort()
    overlaps = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert not overlaps, overlaps[:3]
    durations = sorted(e - s for s, e, _ in spans)

    # --- report cadence: a change of the findings is committed in the cycle that sees it -----------------
    finished = sorted(
        (ts(line), line)
        for path in logs.values()
        for line in log_lines(path)
        if line.get("message") == "cycle finished" and line.get("report")
    )  # the cycles that handed a report to Git (the leader's), whatever their result: a cycle that failed a step
    # (an API timeout on a loaded machine) still commits its report, and the next one finds the branch up to date
    status_delays: list[int] = []
    waiting_since: int | None = None
    previous: list[str] | None = None
    for i, (_, line) in enumerate(finished):
        if previous is not None and line.get("codes") != previous:
            waiting_since = i if waiting_since is None else waiting_since
        if waiting_since is not None and line.get("report") in ("committed", "queued"):
            # queued: committed locally, the push refused or unreachable; the outbox pushes it before anything newer
            status_delays.append(i - waiting_since)
            waiting_since = None
        previous = line.get("codes")
    held_cycles = sum(1 for _, line in finished if line.get("report") == "held")

    # --- memory of the survivor, from the moment it leads ---------------------------------------------
    survivor = standby
    samples = [kib for t, kib in rss[survivor] if t >= leading_since]
    third = max(1, len(samples) // 3)
    early, late = statistics.median(samples[third : 2 * third]), statistics.median(samples[-third:])
    growth = (late - early) / early

    # --- nothing lost from the reports ----------------------------------------------------------------
    outbox = tmp_path / f"cache-{survivor}" / "outbox"
    pending = [p for p in outbox.rglob("*.json")] if outbox.exists() else []

    figures.update(
        {
            "nodes": NODES,
            "gpus": NODES * 8,
            "cycles": len(spans),
            "cycle_p50_s": round(statistics.median(durations), 3),
            "cycle_p95_s": round(durations[int(0.95 * (len(durations) - 1))], 3),
            "cycle_max_s": round(durations[-1], 3),
            "report_commits": len(history),
            "pods_churned": churned[0],
            "report_commits_per_hour_churning": round(churn_commits / churn_s * 3600),
            "uncoalesced_commits_per_hour": round(len(spans) / (spans[-1][1] - spans[0][0]) * 3600),
            "min_interval_s": MIN_INTERVAL_S,
            "held_cycles": held_cycles,
            "status_changes": len(status_delays),
            "status_change_max_delay_cycles": max(status_delays, default=0),
            "rss_survivor_mib": f"{early / 1024:.1f} -> {late / 1024:.1f} ({growth:+.1%}, {len(samples)} samples)",
            "outbox_pending": len(pending),
            "wall_s": round(time.monotonic() - t_start, 1),
        }
    )
    print("\nsoak figures:")
    for k, v in figures.items():
        print(f"  {k}: {v}")
    print("  drifts:")
    for row in drifts:
        print(f"    {row}")
    assert len(drifts) == 6 and all(r["reported_s"] >= 0 for r in drifts)
    assert churned[0] > 60 and held_cycles > 0, figures
    cadence = [(line.get("result"), line.get("report"), line.get("codes")) for _, line in finished]
    assert len(status_delays) >= 6 and max(status_delays) == 0, (status_delays, cadence)
    # occupancy churn alone would commit every cycle; coalesced, the commits (status changes included) stay
    # well under one per cycle, and never two within an interval unless the findings changed in between
    assert churn_commits <= churn_s / MIN_INTERVAL_S + 2 * len(status_delays) + 2, (churn_commits, churn_s)
    assert pending == [], "reports left unpushed in the survivor's outbox"
    assert growth < 0.25 or late - early < 30 * 1024, figures["rss_survivor_mib"]
    assert figures["takeover_s"] <= 4 + 2.5  # lease duration + a retry period or two
