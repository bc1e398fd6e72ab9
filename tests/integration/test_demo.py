"""`migplan demo` runs the whole main job on the embedded default and leaves a report in Git."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _codes(cycle: dict) -> set[str]:
    report = cycle["cycle"]["report"]
    codes = {f["code"] for f in report["clusterFindings"]}
    for node in report["nodes"]:
        codes |= {f["code"] for f in node["findings"]}
    return codes


def test_demo_repairs_what_it_may_and_commits_the_report(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo", "--workdir", str(work), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    cycles = doc["cycles"]
    assert len(cycles) >= 2

    first, last = cycles[0], cycles[-1]
    # The injected drift is seen: wrong strategy, stale device-plugin config, an undocumented node.
    assert {"MP502", "MP503"} <= _codes(first)
    assert first["cycle"]["applied"], "the first cycle must repair what migplan owns"
    # ...and repaired: the strategy findings are gone, the re-cut H100 is back in sync, only what a
    # person must fix remains (the undocumented node, the pod asking for nvidia.com/gpu).
    assert not {"MP502", "MP503"} & _codes(last)
    statuses = {n["name"]: n["status"] for n in last["cycle"]["report"]["nodes"]}
    assert statuses["gpu-h100-01"] == "InSync"
    assert statuses["gpu-h200-02"] == "InSync"
    assert statuses["gpu-undocumented-01"] == "Undocumented"
    assert last["cycle"]["applied"] == []
    # Cycles are one propagation delay apart, so the second cycle's relabels are due: the ConfigMap written by
    # the first has reached mig-manager (its configs-added-at stamp is rounded up to the second; a simulated
    # clock between seconds held every relabel one cycle more).
    assert len(cycles) == 3, [len(c["cycle"]["applied"]) for c in cycles]
    assert cycles[1]["cycle"]["applied"], "the relabels go out one propagation delay after the ConfigMap"

    # The node observers ran before every cycle (the agent's code path on the twin's NVML and kubelet): every
    # node's occupancy and slice map is observed, none inferred from pod requests.
    for cycle in cycles:
        for node in cycle["cycle"]["report"]["nodes"]:
            assert node["observer"] == "reporting", (node["name"], node["observer"])
            assert {o["source"] for o in node["occupancy"]} == {"observed"}, node["name"]
    page = _git(Path(doc["repository"]), "show", "migplan-reports:reports/nodes/gpu-h200-01.md")
    assert "[observed cut, holders observed]" in page and "inferred" not in page

    # The report is in Git, on its own branch, once per distinct content, naming the revision.
    repo = Path(doc["repository"])
    head = _git(repo, "rev-parse", "main").strip()
    readme = _git(repo, "show", "migplan-reports:reports/README.md")
    assert "MIG drift report" in readme and head in readme
    drift = _git(repo, "show", "migplan-reports:reports/drift.yaml")
    assert "gpu-undocumented-01" in drift
    log = _git(repo, "log", "--format=%s", "migplan-reports").splitlines()
    committed = [c for c in cycles if c["report"]["status"] == "committed"]
    assert len(log) == len(committed) >= 1
    assert all(head in line for line in log)
    # The inventory branch is untouched by the controller's commits.
    assert _git(repo, "rev-list", "--count", "main").strip() == "1"


# --- as a newcomer runs it: a fresh clone, the README's first command, then every command it prints ----

REPO = Path(__file__).resolve().parents[2]
WIDTH = 100


@dataclass
class Newcomer:
    clone: Path
    output: str
    env: dict[str, str]


def _newcomer_env() -> dict[str, str]:
    """The environment of someone who just cloned: no developer virtualenv on PATH, none active."""
    dev_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != dev_bin)
    return env


def _readme_first_command() -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"## Quickstart.*?```sh\n(.*?)```", text, re.S)
    assert block, "README.md has no Quickstart sh block"
    return block.group(1).strip().splitlines()[0]


@pytest.fixture(scope="session")
def newcomer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Newcomer]:
    clone = tmp_path_factory.mktemp("newcomer") / "migplan"
    files = (
        subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"], check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    command = _readme_first_command()
    assert command.startswith("python3 -m venv .venv") and command.endswith("migplan demo"), command
    env = _newcomer_env()
    proc = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = re.search(r"^1\. inventory repository: (\S+)", proc.stdout, re.M)
    assert found
    yield Newcomer(clone, proc.stdout, env)
    shutil.rmtree(Path(found.group(1)).parent, ignore_errors=True)


def printed_commands(output: str) -> list[list[str]]:
    """The commands under the closing hints, continuations joined, as a shell would split them."""
    tail = output[output.index("\nLook at the report") :]
    commands, current = [], ""
    for line in tail.splitlines():
        if not line.startswith("    "):
            continue
        current += line.strip()
        if current.endswith("\\"):
            current = current[:-1]
            continue
        commands.append(shlex.split(current))
        current = ""
    return commands


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen[str], timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text, re.M):
            return text
        assert proc.poll() is None, f"exited {proc.returncode}: {text[-2000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} within {timeout}s: {path.read_text()[-2000:]}")


def _interrupt(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=60)


def test_newcomer_demo_explains_itself(newcomer: Newcomer) -> None:
    out = newcomer.output
    too_wide = [line for line in out.splitlines() if len(line) > WIDTH]
    assert not too_wide, too_wide
    # One way of printing revisions: ref@12 hex, never a full sha1 (the files keep theirs).
    assert not re.search(r"[0-9a-f]{40}", out) and "@sha1:" not in out
    revisions = set(re.findall(r"\bmain@([0-9a-f]+)\b", out))
    assert len(revisions) == 1 and len(next(iter(revisions))) == 12, revisions
    # The verdict: injected and why, repaired with its writes, left for a person, expected.
    verdict = out[out.index("Verdict: ") :]
    assert verdict.startswith("Verdict: the expected outcome.")
    for case in ("wrong-strategy:single", "stale-device-plugin-config", "undocumented-node"):
        assert f"- {case}: " in verdict
    writes = re.search(r"Repaired by migplan with (\d+) write\(s\)", verdict)
    assert writes and int(writes.group(1)) >= 3 and "configure clusterpolicy/cluster-policy" in verdict
    assert "MP502" in verdict and "MP503" in verdict  # cleared
    left = verdict[verdict.index("Left for a person") : verdict.index("This is the expected outcome")]
    assert "MP511 on gpu-undocumented-01" in left and "MP506 on gpu-h200-01" in left
    assert "MP502" not in left


def test_newcomer_report_excerpt_keeps_its_tables_whole(newcomer: Newcomer) -> None:
    out = newcomer.output
    repo = Path(re.findall(r"^1\. inventory repository: (\S+)", out, re.M)[0])
    readme = _git(repo, "show", "migplan-reports:reports/README.md").splitlines()
    start = out.index("its summary")
    excerpt = [line[4:] for line in out[start:].splitlines()[1:] if line.startswith("    ") or not line]
    excerpt = excerpt[: next(i for i, line in enumerate(excerpt) if line.startswith("(the finding codes"))]
    tables = [i for i, line in enumerate(excerpt) if line.startswith("|")]
    assert len(tables) >= 8  # the status table (header, rule, 5 rows) and the finding counts
    last = excerpt[tables[-1]]
    # the excerpt's last table row is the README's last row of that table: nothing was cut
    matches = [i for i, line in enumerate(readme) if line == last]
    assert matches and not readme[matches[0] + 1].startswith("|")
    statuses = {line.split("|")[1].strip() for line in excerpt if line.startswith("| ") and "nodes" not in line}
    assert {"Error", "Missing", "Drifted", "Undocumented", "InSync"} <= statuses


def test_every_printed_command_runs_as_printed(newcomer: Newcomer, tmp_path: Path) -> None:
    commands = printed_commands(newcomer.output)
    assert any(c[0] == "git" for c in commands) and any("twin" in c for c in commands)
    venv_migplan = str(newcomer.clone / ".venv" / "bin" / "migplan")
    # migplan is not on the newcomer's PATH: the hints name the venv's by its real path
    assert [c for c in commands if c[0].endswith("migplan")] and all(
        c[0] == venv_migplan for c in commands if c[0].endswith("migplan")
    )
    env, ran = newcomer.env, []
    twin: subprocess.Popen[str] | None = None
    twin_log = tmp_path / "twin.log"
    sink = twin_log.open("w")
    try:
        for argv in commands:
            if argv[0] == venv_migplan and argv[1] == "twin":
                twin = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env)
                _wait_for(twin_log, r"^kubeconfig: ", twin)
            elif argv[0] == venv_migplan and argv[1:] == ["demo", "--keep"]:
                check_keep(argv, env, tmp_path)
            else:
                proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
                assert proc.returncode == 0, (argv, proc.stdout[-1000:], proc.stderr[-1000:])
                if "get" in argv and "nodes" in argv:
                    assert "gpu-undocumented-01" in proc.stdout  # the twin with the drift the demo injected
            ran.append(argv[:2])
    finally:
        if twin is not None and twin.poll() is None:
            assert _interrupt(twin) == 0, twin_log.read_text()[-2000:]
        sink.close()
    assert len(ran) == len(commands)
    print(f"\nran {len(ran)} printed commands: {[' '.join(a) for a in ran]}")


def check_keep(argv: list[str], env: dict[str, str], tmp_path: Path) -> None:
    """`migplan demo --keep` leaves its twin running: the kubectl line it prints works at once."""
    log = tmp_path / "keep.log"
    sink = log.open("w")
    proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        text = _wait_for(log, r"^The twin keeps running", proc)
        text = _wait_for(log, r"get nodes$", proc)
        tail = text[text.index("The twin keeps running") :]
        (kubectl,) = printed_commands("\nLook at the report\n" + tail)
        got = subprocess.run(kubectl, capture_output=True, text=True, env=env, timeout=60)
        assert got.returncode == 0 and "gpu-h200-01" in got.stdout, got.stderr
    finally:
        rc = _interrupt(proc) if proc.poll() is None else proc.returncode
        sink.close()
        found = re.search(r"^1\. inventory repository: (\S+)", log.read_text(), re.M)
        if found:
            shutil.rmtree(Path(found.group(1)).parent, ignore_errors=True)
    assert rc == 0, log.read_text()[-2000:]
    assert "cluster twin stopped" in log.read_text()
