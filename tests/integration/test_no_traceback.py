"""No traceback reaches a user: every subcommand, fed broken inputs — kubeconfigs that are not YAML,
binary, wrongly typed or name a missing context; a bad --path; a damaged cache directory (a file where
it belongs, garbage in the bare cache, a damaged last-known-good state file, the outbox or lock not
usable); settings files that cannot be read — ends with a one-line error naming the problem (a code)
and exit 2, never 1 (which means invalid or drift) and never a traceback. Anything migplan did not
foresee goes through the last-resort handler: `error MP899`, exit 2, the traceback only with --debug.

The matrix runs in-process (click's runner, fast); a sample goes through real `migplan` processes.
Git goes over git:// to a real `git daemon` on loopback; the cluster is the twin.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitserver import GitDaemon, make_bare, seed

from reconciler.adapters.git.source import GitRemote, cache_path
from reconciler.cli import cli
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
WORKLOADS = Path(__file__).resolve().parents[1] / "corpus-workloads" / "good-article-pod.yaml"

KUBECONFIGS: dict[str, bytes] = {
    "kc-not-yaml": b": : :\n{[\n",
    "kc-binary": bytes(range(256)) * 4,
    "kc-a-list": b"- a\n- b\n",
    "kc-wrong-types": b"apiVersion: v1\nkind: Config\nclusters: 5\ncontexts: x\nusers: 7\ncurrent-context: 3\n",
    "kc-empty": b"",
    "kc-missing-current-context": (
        b"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        b"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
        b"current-context: missing\n"
    ),
    "kc-bad-certificate-data": (
        b"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', "
        b"certificate-authority-data: 'bm90IGEgY2VydA=='}}]\nusers: [{name: u, user: {client-certificate-data: "
        b"'!!!', client-key-data: 'zz'}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    ),
}
_UNREACHABLE = (
    b"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
    b"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
)
MIG_PARTED_FILES: dict[str, bytes] = {
    "mig-parted-binary": b"\x00\x01\xff" * 64,
    "mig-parted-not-yaml": b"version: [\n",
    "mig-parted-no-model": b"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
    b"      mig-devices: {'1g.10gb': 7}\n",
    "mig-parted-does-not-fit": b"version: v1\nmig-configs:\n  a:\n    - device-filter: '0x233010DE'\n"
    b"      devices: all\n      mig-enabled: true\n      mig-devices: {'3g.40gb': 3}\n",
}
SETTINGS_FILES: dict[str, bytes] = {
    "settings-binary": b"\x00\x01\x02\xff" * 64,
    "settings-a-list": b"- interval: 5\n",
    "settings-not-yaml": b"interval: [\n",
    "settings-unknown-key": b"intervall: 5\n",
}


def _corrupt_head(repo: Path) -> None:
    (repo / "HEAD").write_bytes(b"\x00garbage")


def _corrupt_refs(repo: Path) -> None:
    for ref in (repo / "refs").rglob("*"):
        if ref.is_file():
            ref.write_text("zzzz\n")


def _corrupt_objects(repo: Path) -> None:
    shutil.rmtree(repo / "objects")


def _cache_repo_is_a_file(repo: Path) -> None:
    shutil.rmtree(repo)
    repo.write_text("not a repository")


# name -> how to damage a cache directory that a successful run left behind
CACHE_DAMAGE: dict[str, Callable[[Path, Path], None]] = {
    "cache-head-garbage": lambda cache, repo: _corrupt_head(repo),
    "cache-refs-garbage": lambda cache, repo: _corrupt_refs(repo),
    "cache-objects-gone": lambda cache, repo: _corrupt_objects(repo),
    "cache-repo-is-a-file": lambda cache, repo: _cache_repo_is_a_file(repo),
    "cache-state-not-a-mapping": lambda cache, repo: [p.write_text("[1, 2]") for p in (cache / "state").glob("*.json")],
    "cache-state-dir-is-a-file": lambda cache, repo: (shutil.rmtree(cache / "state"), (cache / "state").write_text("")),
    "cache-outbox-is-a-file": lambda cache, repo: (
        shutil.rmtree(cache / "outbox", ignore_errors=True),
        (cache / "outbox").write_text(""),
    ),
    "cache-lock-is-a-directory": lambda cache, repo: (
        (cache / "migplan.lock").unlink(),
        (cache / "migplan.lock").mkdir(),
    ),
}


@dataclass
class World:
    tmp: Path
    url: str  # git:// URL of the inventory repository
    kubeconfig: Path  # the twin's (works)
    template_cache: Path  # a cache directory a successful `reconcile --once --repo` left behind

    def broken(self, name: str, data: bytes) -> str:
        path = self.tmp / "broken" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return str(path)

    def damaged_cache(self, name: str) -> str:
        """A fresh copy of the template cache, damaged one way (a run may repair what it finds)."""
        n = len(list((self.tmp / "caches").glob(f"{name}-*"))) if (self.tmp / "caches").exists() else 0
        cache = self.tmp / "caches" / f"{name}-{n}"
        shutil.copytree(self.template_cache, cache)
        CACHE_DAMAGE[name](cache, cache_path(GitRemote(self.url, cache)))
        return str(cache)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("no-traceback")
    files = {str(p.relative_to(INVENTORY)): p.read_text() for p in INVENTORY.rglob("*.yaml")}
    bare = make_bare(tmp / "srv", "inventory")
    seed(bare, tmp / "work", files)
    daemon = GitDaemon(tmp / "srv").start()
    try:
        with ClusterTwin.from_inventory(INVENTORY) as twin:
            twin.settle()
            w = World(tmp, daemon.url("inventory"), Path(twin.kubeconfig), tmp / "template-cache")
            first = CliRunner().invoke(
                cli, ["reconcile", "--once", "--kubeconfig", str(w.kubeconfig), "--repo", w.url,
                      "--cache-dir", str(w.template_cache)],
            )  # fmt: skip
            assert first.exit_code in (0, 1), first.output
            yield w
    finally:
        daemon.stop()


Case = Callable[[World], list[str]]


def _init_over_an_inventory(w: World) -> list[str]:
    """`migplan init` where an inventory already is: MP581, nothing written."""
    root = w.tmp / "init-twice"
    root.mkdir(exist_ok=True)
    (root / "cluster.yaml").write_text("# someone's inventory\n")
    return ["init", str(root), "--node", "gpu-01:H100-80GB:1"]


def _cases() -> dict[str, tuple[str, Case]]:
    """id -> (subcommand, argv builder)."""
    cases: dict[str, tuple[str, Case]] = {}
    for name, data in KUBECONFIGS.items():

        def kc(w: World, name: str = name, data: bytes = data) -> str:
            return w.broken(name, data)

        cases[f"reconcile-inventory-{name}"] = (
            "reconcile",
            lambda w, kc=kc: ["reconcile", "--once", "--kubeconfig", kc(w), "--inventory", str(INVENTORY)],
        )
        cases[f"import-{name}"] = (
            "import",
            lambda w, kc=kc, n=name: ["import", "--kubeconfig", kc(w), "--out", str(w.tmp / f"import-{n}")],
        )
        cases[f"reconcile-repo-{name}"] = (
            "reconcile",
            lambda w, kc=kc: ["reconcile", "--once", "--kubeconfig", kc(w), "--repo", w.url,
                              "--cache-dir", str(w.tmp / "c-kc")],
        )  # fmt: skip
        cases[f"plan-{name}"] = (
            "plan",
            lambda w, kc=kc: ["plan", "--repo", w.url, "--from", "main", "--to", "main", "--kubeconfig", kc(w),
                              "--cache-dir", str(w.tmp / "c-plan")],
        )  # fmt: skip
        cases[f"run-once-{name}"] = (
            "run",
            lambda w, kc=kc: [
                "run",
                "--once",
                "--repo",
                w.url,
                "--kubeconfig",
                kc(w),
                "--cache-dir",
                str(w.tmp / "c-run"),
            ],
        )
        cases[f"run-{name}"] = ("run", lambda w, kc=kc: ["run", "--repo", w.url, "--kubeconfig", kc(w)])
        cases[f"agent-{name}"] = ("agent", lambda w, kc=kc: ["agent", "--once", "--node", "n1", "--kubeconfig", kc(w)])
        cases[f"check-workloads-{name}"] = (
            "check-workloads",
            lambda w, kc=kc: ["check-workloads", str(WORKLOADS), "--example", "--kubeconfig", kc(w)],
        )
    cases["reconcile-missing-context"] = (
        "reconcile",
        lambda w: ["reconcile", "--once", "--kubeconfig", str(w.kubeconfig), "--context", "nope",
                   "--inventory", str(INVENTORY)],
    )  # fmt: skip
    cases["plan-missing-context"] = (
        "plan",
        lambda w: ["plan", "--repo", w.url, "--from", "main", "--to", "main", "--kubeconfig", str(w.kubeconfig),
                   "--context", "nope", "--cache-dir", str(w.tmp / "c-plan")],
    )  # fmt: skip
    for damage in CACHE_DAMAGE:
        cases[f"reconcile-{damage}"] = (
            "reconcile",
            lambda w, d=damage: ["reconcile", "--once", "--kubeconfig", str(w.kubeconfig), "--repo", w.url,
                                 "--cache-dir", w.damaged_cache(d)],
        )  # fmt: skip
        cases[f"run-once-{damage}"] = (
            "run",
            lambda w, d=damage: ["run", "--once", "--repo", w.url, "--kubeconfig", str(w.kubeconfig),
                                 "--cache-dir", w.damaged_cache(d)],
        )  # fmt: skip
    for damage in ("cache-head-garbage", "cache-objects-gone", "cache-repo-is-a-file"):
        cases[f"validate-{damage}"] = (
            "validate",
            lambda w, d=damage: ["validate", "--repo", w.url, "--rev", "main", "--cache-dir", w.damaged_cache(d)],
        )
        cases[f"plan-{damage}"] = (
            "plan",
            lambda w, d=damage: ["plan", "--repo", w.url, "--from", "main", "--to", "main",
                                 "--cache-dir", w.damaged_cache(d)],
        )  # fmt: skip
    cases["validate-cache-dir-is-a-file"] = (
        "validate",
        lambda w: ["validate", "--repo", w.url, "--rev", "main", "--cache-dir", w.broken("a-file", b"x")],
    )
    for bad_path in ("../..", "nodes/gpu-h200-01.yaml", "no/such/root"):
        cases[f"validate-path-{bad_path}"] = (
            "validate",
            lambda w, p=bad_path: ["validate", "--repo", w.url, "--rev", "main", "--path", p,
                                   "--cache-dir", str(w.tmp / "c-validate")],
        )  # fmt: skip
        cases[f"plan-path-{bad_path}"] = (
            "plan",
            lambda w, p=bad_path: ["plan", "--repo", w.url, "--from", "main", "--to", "main", "--path", p,
                                   "--cache-dir", str(w.tmp / "c-plan")],
        )  # fmt: skip
        cases[f"reconcile-path-{bad_path}"] = (
            "reconcile",
            lambda w, p=bad_path: ["reconcile", "--once", "--kubeconfig", str(w.kubeconfig), "--repo", w.url,
                                   "--path", p, "--cache-dir", str(w.tmp / f"c-path-{p.replace('/', '_')}")],
        )  # fmt: skip
    cases["validate-root-missing"] = ("validate", lambda w: ["validate", str(w.tmp / "no-such-inventory")])
    cases["init-output-is-a-file"] = (
        "init", lambda w: ["init", w.broken("init-file", b"x"), "--node", "gpu-01:H100-80GB:1"],
    )  # fmt: skip
    cases["init-inventory-already-there"] = ("init", _init_over_an_inventory)
    cases["profiles-unknown-model"] = ("profiles", lambda w: ["profiles", "Z100-1GB"])
    cases["validate-root-is-a-file"] = ("validate", lambda w: ["validate", w.broken("root-file", b"x")])
    cases["validate-repo-not-a-repository"] = ("validate", lambda w: ["validate", "--repo", str(w.tmp / "broken")])
    cases["check-workloads-path-missing"] = (
        "check-workloads",
        lambda w: ["check-workloads", "--example", str(w.tmp / "nope.yaml")],
    )
    cases["check-workloads-plan-empty"] = (
        "check-workloads",
        lambda w: ["check-workloads", str(WORKLOADS), "--inventory", str((w.tmp / "empty-dir").resolve())],
    )
    cases["check-workloads-repo-not-a-repository"] = (
        "check-workloads",
        lambda w: ["check-workloads", str(WORKLOADS), "--repo", str(w.tmp / "broken")],
    )
    cases["check-workloads-no-reports-branch"] = (
        "check-workloads",
        lambda w: ["check-workloads", str(WORKLOADS), "--repo", w.url, "--reports-from-git",
                   "--cache-dir", str(w.tmp / "c-cw")],
    )  # fmt: skip
    for name, data in SETTINGS_FILES.items():
        cases[f"run-{name}"] = (
            "run",
            lambda w, n=name, d=data: ["run", "--once", "--config", w.broken(n, d), "--repo", w.url],
        )
        cases[f"agent-{name}"] = ("agent", lambda w, n=name, d=data: ["agent", "--once", "--config", w.broken(n, d)])
    cases["twin-inventory-empty"] = (
        "twin",
        lambda w: ["twin", "--inventory", str((w.tmp / "empty-dir").resolve()), "--kubeconfig-out", str(w.tmp / "kc")],
    )
    cases["twin-kubeconfig-out-under-a-file"] = (
        "twin",
        lambda w: ["twin", "--inventory", str(INVENTORY), "--kubeconfig-out", w.broken("kc-parent", b"x") + "/kc"],
    )
    cases["import-out-is-a-file"] = (
        "import",
        lambda w: ["import", "--kubeconfig", str(w.kubeconfig), "--out", w.broken("import-out-file", b"x")],
    )
    cases["import-out-holds-an-inventory"] = (
        "import",
        lambda w: ["import", "--kubeconfig", str(w.kubeconfig), "--out", str(INVENTORY)],
    )
    cases["import-unreachable-cluster"] = (
        "import",
        lambda w: ["import", "--kubeconfig", w.broken("kc-unreachable", _UNREACHABLE), "--out", str(w.tmp / "imp-u")],
    )
    for name, data in MIG_PARTED_FILES.items():
        cases[f"import-{name}"] = (
            "import",
            lambda w, n=name, d=data: ["import", "--from-mig-parted", w.broken(n, d), "--out", str(w.tmp / f"i-{n}")],
        )
    cases["post-comment-no-forge"] = ("post-comment", lambda w: ["post-comment", "--body-file", str(INVENTORY)])
    cases["post-comment-no-merge-request"] = (
        "post-comment",
        lambda w: ["post-comment", "--gitlab", "--body-file", w.broken("body.md", b"plan")],
    )
    cases["post-comment-body-not-utf8"] = (
        "post-comment",
        lambda w: ["post-comment", "--github", "--repository", "a/b", "--pull-request", "1", "--api-url",
                   "http://127.0.0.1:1", "--body-file", w.broken("body-bin", b"\xff\xfe\x00")],
    )  # fmt: skip
    cases["post-comment-body-is-a-directory"] = (
        "post-comment",
        lambda w: ["post-comment", "--github", "--repository", "a/b", "--pull-request", "1", "--body-file",
                   str(w.tmp)],
    )  # fmt: skip
    cases["demo-workdir-is-a-file"] = ("demo", lambda w: ["demo", "--workdir", w.broken("workdir-file", b"x")])
    cases["demo-unknown-drift"] = ("demo", lambda w: ["demo", "--drift", "no-such-case", "--workdir", str(w.tmp / "d")])
    return cases


CASES = _cases()
# An error line names the problem: with a code, or as click words usage errors, or as "error: ..."
ERROR_LINE = re.compile(r"\bMP\d{3}\b|^Error: |\berror\b|\bcannot\b", re.M | re.I)


def _assert_clean_error(exit_code: int, stdout: str, stderr: str) -> None:
    out = stdout + stderr
    assert "Traceback" not in out, out
    assert exit_code == 2, out
    assert ERROR_LINE.search(out), f"no error line with a code: {out}"


def test_every_subcommand_has_broken_input_cases() -> None:
    listed = CliRunner().invoke(cli, ["--help"]).output.split("Commands:", 1)[1]
    commands = {line.split()[0] for line in listed.splitlines() if line.strip()}
    assert commands == {command for command, _ in CASES.values()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_broken_input_is_one_error_and_exit_2(case: str, world: World) -> None:
    (world.tmp / "empty-dir").mkdir(exist_ok=True)
    argv = CASES[case][1](world)
    result = CliRunner().invoke(cli, argv, catch_exceptions=True, env={"MIGPLAN_DEBUG": "", "KUBECONFIG": ""})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    _assert_clean_error(result.exit_code, result.stdout, result.stderr)


def _migplan(
    *args: str, env: dict[str, str] | None = None, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", "reconciler", *args]
    return subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120, check=False
    )


@pytest.mark.parametrize("case", ["reconcile-inventory-kc-binary", "reconcile-cache-state-not-a-mapping",
                                  "validate-root-missing", "run-settings-binary"])  # fmt: skip
def test_a_sample_through_real_processes(case: str, world: World) -> None:
    (world.tmp / "empty-dir").mkdir(exist_ok=True)
    proc = _migplan(*CASES[case][1](world))
    _assert_clean_error(proc.returncode, proc.stdout, proc.stderr)


# A bug planted in a command: the last resort must turn it into one line with MP899 and exit 2.
_PLANTED = """
import sys
import reconciler.commands.validate as v
def boom(*a, **k):
    raise KeyError("https://user:hunter2@git.example/x planted")
v.read_inventory_dir = boom
from reconciler.cli import main
main(sys.argv[1:])
"""


def test_an_unforeseen_error_is_one_line_with_mp899_and_exit_2(tmp_path: Path) -> None:
    code = _PLANTED.replace("main(sys.argv[1:])", f"main(['validate', {str(INVENTORY)!r}])")
    proc = _migplan(code=code, env={"MIGPLAN_DEBUG": ""})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error MP899: internal error: KeyError"), proc.stderr
    assert "hunter2" not in proc.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    code = _PLANTED.replace("main(sys.argv[1:])", f"main(['validate', {str(INVENTORY)!r}])")
    proc = _migplan(code=code, env={"MIGPLAN_DEBUG": "1"})
    assert proc.returncode == 2 and "Traceback" in proc.stderr and "MP899" in proc.stderr


def test_migplan_debug_is_a_known_setting_for_the_controller() -> None:
    from reconciler.settings import load_settings

    assert load_settings(env={"MIGPLAN_DEBUG": "1"}).debug is True
