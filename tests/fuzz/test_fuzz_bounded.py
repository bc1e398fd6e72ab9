"""Bounded work for hostile inputs (issue 25, items 2 and 7): the worst input of each family, at or past its cap,
costs a bounded amount of memory and time, and ends in a migplan answer (a code), never a traceback or MP899.

Each family runs in its own Python process, so its peak RSS (VmHWM less the RSS after the imports) is its own;
the bounds are generous for a loaded 2-core machine, and far below what the same inputs cost before: a 128 MiB blob
under nodes/ was inflated whole (>= 128 MiB), a few hundred bytes of YAML aliases expanded without end (the process
was OOM-killed), a signed deeply nested webhook body killed the handler. Time is bounded by the child's timeout
(a hang fails the test); the figures are printed for the closing note (pytest -s).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TIMEOUT_S = 120  # a family that hangs (the billion laughs did) fails here
PRELUDE = """
import json, sys, time
def _status_mb(field):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith(field + ":")) / 1024
def _rss_mb():
    return _status_mb("VmRSS")
"""
REPORT = """
__base = _rss_mb(); __t = time.monotonic()
__out = run()
# VmHWM, not ru_maxrss: Linux keeps ru_maxrss across execve, so a child forked from a large pytest process would
# report the parent's size; VmHWM is the peak of this process image alone.
print(json.dumps({"peak_mb": _status_mb("VmHWM") - __base,
                  "seconds": round(time.monotonic() - __t, 3), "answer": str(__out)[:300]}))
"""


def _measure(setup: str, tmp_path: Path) -> dict[str, object]:
    script = PRELUDE + textwrap.dedent(setup) + REPORT
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr and "MP899" not in proc.stdout
    got: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\n{Path(__file__).name}: {got}")
    return got


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)
# ~500 bytes standing for 10^9 nodes, where a message quotes the value (mig-parted's "unknown version: ..."):
# before issue 25 this hung past 60 s under a 3 GB address-space limit; now it is refused in milliseconds.
HOSTILE = BILLION_LAUGHS + "version: *i\nnodes: *i\nroots: *i\n"


def test_a_huge_blob_under_nodes_is_never_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "nodes").mkdir(parents=True)
    (repo / "cluster.yaml").write_text("apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: x}\nspec: {}\n")
    with (repo / "nodes" / "big.yaml").open("wb") as fh:
        fh.truncate(128 * 1024 * 1024)  # 128 MiB of NULs: compresses to almost nothing in Git, inflates whole
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "big"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    (repo / "nodes" / "big.yaml").unlink()  # only the object database holds it now
    got = _measure(
        f"""
        from reconciler.adapters.git.source import GitRemote, InventoryRepo
        def run():
            repo = InventoryRepo.open(GitRemote({str(repo)!r}, __import__("pathlib").Path("cache")))
            snap = repo.read(repo.resolve("HEAD"))
            return dict(snap.files.unreadable)
        """,
        tmp_path,
    )
    assert "nodes/big.yaml" in str(got["answer"]) and "not read" in str(got["answer"])
    assert float(got["peak_mb"]) < 64  # the blob alone is 128 MiB


@pytest.mark.parametrize(
    ("family", "call"),
    [
        ("mig-parted ConfigMap / --from-mig-parted", "migparted.parse_strict(TEXT)"),
        ("device-plugin config entry", "yamlbudget.problem(TEXT)"),
        ("drift.yaml on the reports branch", "workloads_report(TEXT.encode())"),
        ("migplan-roots.yaml", "inventoryroots.parse_roots_file(TEXT.encode())"),
    ],
)
def test_yaml_alias_expansion_is_refused_before_loading(family: str, call: str, tmp_path: Path) -> None:
    got = _measure(
        f"""
        from reconciler.logic.codecs import migparted
        from reconciler.logic.inventory import inventoryroots
        from reconciler.logic.workloads import workloads
        from reconciler.model import yamlbudget
        TEXT = {HOSTILE!r}
        def workloads_report(data):
            try:
                return workloads.free_from_drift_report(data)
            except workloads.ReportUnreadable as exc:
                return exc
        def run():
            try:
                return {call}
            except migparted.MigPartedFormatError as exc:
                return exc
        """,
        tmp_path,
    )
    assert "expand to more than" in str(got["answer"]), (family, got)
    assert float(got["peak_mb"]) < 64, family


def test_a_flood_of_json_objects_from_a_forge_is_refused_before_parsing(tmp_path: Path) -> None:
    got = _measure(
        """
        from reconciler.adapters import mrcomments
        DATA = b"[" + b"{},"  * (10 * 1024 * 1024) + b"{}]"  # 30 MiB, under the 32 MiB answer cap
        def run():
            try:
                return mrcomments._json(DATA, "GET /notes")
            except mrcomments.ForgeError as exc:
                return f"{exc.code}: {exc.message}"
        """,
        tmp_path,
    )
    assert str(got["answer"]).startswith("MP743") and "JSON objects or arrays" in str(got["answer"])
    assert float(got["peak_mb"]) < 64  # parsed, the 30 MiB answer cost ~1 GB


def test_a_deeply_nested_signed_webhook_body_is_answered(tmp_path: Path) -> None:
    got = _measure(
        """
        import hashlib, hmac
        from reconciler.controller import webhook
        BODY = b"[" * (5 * 1024 * 1024)  # the 5 MiB body cap, all nesting
        SIG = "sha256=" + hmac.new(b"s", BODY, hashlib.sha256).hexdigest()
        def run():
            v = webhook.verify({"X-GitHub-Event": "push", "X-Hub-Signature-256": SIG}, BODY, secret="s", branch="main")
            return (v.status, v.reason)
        """,
        tmp_path,
    )
    assert str(got["answer"]).startswith("(400,") and "nested too deeply" in str(got["answer"])
    assert float(got["peak_mb"]) < 64


def test_settings_numbers_and_files_from_outside_are_values(tmp_path: Path) -> None:
    got = _measure(
        """
        import os
        from reconciler.model.errors import MigplanError
        from reconciler.settings import load_settings
        os.mkfifo("fifo")
        def run():
            out = []
            for flags in ({"cycle_deadline_seconds": "nan"}, {"listen": "[::1"}, {"webhook_secret_file": "fifo"},
                          {"interval_seconds": "9" * 1_000_000}):
                try:
                    load_settings(env={}, flags=flags)
                    out.append("accepted")
                except MigplanError as exc:
                    out.append(exc.code)
            return out
        """,
        tmp_path,
    )
    assert got["answer"] == str(["MP800"] * 4)


def test_import_from_a_poisoned_mig_parted_file_ends_with_a_code(tmp_path: Path) -> None:
    (tmp_path / "poisoned.yaml").write_text(HOSTILE)
    got = _measure(
        """
        from click.testing import CliRunner
        from reconciler.cli import cli
        def run():
            r = CliRunner().invoke(cli, ["import", "--from-mig-parted", "poisoned.yaml", "--out", "out"])
            return (r.exit_code, r.output[-300:])
        """,
        tmp_path,
    )
    answer = str(got["answer"])
    assert answer.startswith(("(1,", "(2,")) and "expand to more than" in answer and "MP" in answer
    assert float(got["peak_mb"]) < 64


def test_a_flood_of_yaml_nodes_in_the_reports_branch_is_not_loaded(tmp_path: Path) -> None:
    # 3 MiB of `[a,a,a,...]` on the reports branch: far below MAX_REPORT_BYTES, ~1.5 million YAML nodes. Loaded
    # whole by `migplan plan` it cost hundreds of MB; a 5-node inventory's budget refuses it on the event stream.
    got = _measure(
        """
        from reconciler.adapters.git import reportbranch
        DATA = b"kind: DriftReport\\nnodes: [" + b"a," * (1536 * 1024) + b"a]\\n"
        def run():
            return reportbranch.parse_report(DATA, max_nodes=reportbranch.report_budget(5))
        """,
        tmp_path,
    )
    assert "more than 110000 YAML nodes" in str(got["answer"])
    assert float(got["peak_mb"]) < 64
