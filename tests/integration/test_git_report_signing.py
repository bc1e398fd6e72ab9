"""Signed report commits (issue 11, item 8), pushed through a real git:// server and verified by git itself.

Keys are made by ssh-keygen and gpg in temp dirs; the controller's signer (reconciler.adapters.git.commitsigning)
signs the report commits gitreports pushes; a clone of the remote's reports branch is then checked with
`git verify-commit` / `git log --show-signature` (gpg.ssh.allowedSignersFile for SSH, a GNUPGHOME holding the
public key for OpenPGP) — and with migplan's own source verification, which must trust them too. A wrong or
missing key is MP730 (exit 2 for `migplan run`), and nothing is pushed unsigned while signing is configured.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from gitserver import GitDaemon, git, make_bare, seed

from reconciler.adapters.git.commitsigning import SIGNING_FAILED, SigningFailed, load_signer
from reconciler.adapters.git.reports import BotIdentity, commit_report, flush_outbox
from reconciler.adapters.git.signatures import SignatureStatus, verify_signature
from reconciler.adapters.git.source import GitAuth, GitRemote, InventoryRepo
from reconciler.commands.run import command as run_command
from reconciler.model.inventory import ReportSettings, VerifyMode, VerifySettings

SETTINGS = ReportSettings(branch="migplan-reports", path="reports")
BOT = BotIdentity("migplan-bot", "bot@example.com")


@pytest.fixture()
def remote(tmp_path: Path) -> Iterator[tuple[GitDaemon, Path]]:
    srv = tmp_path / "srv"
    srv.mkdir()
    bare = make_bare(srv, "inv")
    seed(bare, tmp_path / "seed", {"cluster.yaml": "kind: Cluster\n"})
    daemon = GitDaemon(srv).start()
    yield daemon, bare
    daemon.stop()


def _repo(url: str, cache: Path) -> InventoryRepo:
    repo = InventoryRepo.open(GitRemote(url, cache, GitAuth(), timeout_ms=2000))
    assert isinstance(repo, InventoryRepo)
    return repo


def _ssh_key(path: Path, *extra: str) -> tuple[Path, str]:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bot", *extra, "-f", str(path)], check=True)
    return path, Path(f"{path}.pub").read_text().strip()


def _clone(daemon: GitDaemon, work: Path) -> Path:
    git("clone", "-q", daemon.url("inv"), str(work))
    git("fetch", "-q", "origin", "migplan-reports", cwd=work)
    return work


def _verify(work: Path, rev: str, *config: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *config, "verify-commit", "-v", rev],
        cwd=work,
        env={**os.environ, "HOME": str(work), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )


def _report(n: int) -> dict[str, bytes]:
    return {"drift.yaml": f"drifted: {n}\n".encode()}


def test_ssh_signed_reports_verify_with_git(remote: tuple[GitDaemon, Path], tmp_path: Path) -> None:
    daemon, _ = remote
    key, pub = _ssh_key(tmp_path / "bot")
    signer = load_signer("ssh", str(key))
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    first = commit_report(repo, settings=SETTINGS, files=_report(1), message="r1", bot=BOT, signer=signer)
    second = commit_report(repo, settings=SETTINGS, files=_report(2), message="r2", bot=BOT, signer=signer)
    assert first.status == second.status == "committed"
    work = _clone(daemon, tmp_path / "work")
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"bot@example.com {pub}\n")
    allowed = ("-c", f"gpg.ssh.allowedSignersFile={signers}")
    for sha in (first.commit, second.commit):
        assert sha is not None
        got = _verify(work, sha, *allowed)
        assert got.returncode == 0, got.stderr
        assert 'Good "git" signature for bot@example.com with ED25519 key' in got.stderr
    shown = git(*allowed, "log", "--show-signature", "-2", "--format=%H %G?", "FETCH_HEAD", cwd=work)
    assert shown.count('Good "git" signature for bot@example.com') == 2
    assert {ln.split()[1] for ln in shown.splitlines() if ln.startswith(tuple("0123456789abcdef"))} == {"G"}
    # git's verdict depends on the key: with another key allowed, the same commits do not verify
    _, other = _ssh_key(tmp_path / "other")
    signers.write_text(f"bot@example.com {other}\n")
    assert _verify(work, str(second.commit), *allowed).returncode != 0
    # migplan's own source verification (spec.verify) trusts the bot's commits as well
    status = _migplan_verdict(work, str(second.commit), VerifySettings(VerifyMode.HEAD, (f"bot@example.com {pub}",)))
    assert status is SignatureStatus.TRUSTED


def _migplan_verdict(work: Path, sha: str, settings: VerifySettings) -> SignatureStatus:
    repo = InventoryRepo.open(GitRemote(str(work), work.parent / "verify-cache"))
    assert isinstance(repo, InventoryRepo)
    sig = repo.signature(sha)
    return verify_signature(None if sig is None else sig[0], b"" if sig is None else sig[1], settings).status


def test_unsigned_reports_do_not_verify(remote: tuple[GitDaemon, Path], tmp_path: Path) -> None:
    # the control: without a signer the same push gives a commit git refuses to verify
    daemon, _ = remote
    out = commit_report(_repo(daemon.url("inv"), tmp_path / "cache"), settings=SETTINGS, files=_report(1),
                        message="r", bot=BOT)  # fmt: skip
    work = _clone(daemon, tmp_path / "work")
    assert _verify(work, str(out.commit)).returncode != 0
    assert git("log", "-1", "--format=%G?", str(out.commit), cwd=work) == "N"  # git: no signature


@pytest.fixture()
def gpg_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    """An OpenPGP key made with gpg --batch (no passphrase) and its armoured secret key exported to a file."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(
        ["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Migplan Bot <bot@example.com>", "ed25519", "sign",
         "never"], env=env, check=True, capture_output=True,
    )  # fmt: skip
    secret = home.parent / "bot-secret.asc"
    secret.write_bytes(
        subprocess.run(["gpg", "--batch", "--armor", "--export-secret-keys", "bot@example.com"], env=env,
                       check=True, capture_output=True).stdout
    )  # fmt: skip
    yield {"GNUPGHOME": str(home)}, secret
    subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False)


def test_openpgp_signed_reports_verify_with_git(
    remote: tuple[GitDaemon, Path], tmp_path: Path, gpg_bot: tuple[dict[str, str], Path]
) -> None:
    daemon, _ = remote
    env, secret = gpg_bot
    signer = load_signer("openpgp", str(secret))
    assert signer.gnupg_home is not None and str(signer.gnupg_home) != env["GNUPGHOME"]  # its own keyring
    out = commit_report(_repo(daemon.url("inv"), tmp_path / "cache"), settings=SETTINGS, files=_report(1),
                        message="r", bot=BOT, signer=signer)  # fmt: skip
    assert out.status == "committed" and out.commit is not None
    work = _clone(daemon, tmp_path / "work")
    got = _verify(work, out.commit, env=env)
    assert got.returncode == 0, got.stderr
    assert 'Good signature from "Migplan Bot <bot@example.com>"' in got.stderr
    assert git("log", "-1", "--format=%G?", out.commit, cwd=work, env=env) == "G"
    public = subprocess.run(["gpg", "--batch", "--armor", "--export", "bot@example.com"], env={**os.environ, **env},
                            check=True, capture_output=True, text=True).stdout  # fmt: skip
    assert _migplan_verdict(work, out.commit, VerifySettings(VerifyMode.HEAD, gpg_public_keys=(public,))) is (
        SignatureStatus.TRUSTED
    )


def test_a_wrong_or_missing_key_is_mp730(tmp_path: Path, gpg_bot: tuple[dict[str, str], Path]) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_text("REPLACE WITH THE BOT SIGNING KEY\n")
    encrypted, _ = _ssh_key(tmp_path / "encrypted", "-N", "a passphrase")
    env, _ = gpg_bot
    public_only = tmp_path / "public.asc"
    public_only.write_bytes(
        subprocess.run(["gpg", "--batch", "--armor", "--export", "bot@example.com"], env={**os.environ, **env},
                       check=True, capture_output=True).stdout
    )  # fmt: skip
    cases = {
        ("ssh", str(tmp_path / "absent")): "cannot read the signing key",
        ("ssh", str(garbage)): "cannot sign with ssh key",
        ("ssh", str(encrypted)): "cannot sign with ssh key",
        ("openpgp", str(garbage)): "cannot sign with OpenPGP key",
        ("openpgp", str(public_only)): "holds no OpenPGP secret key",
        ("x509", str(garbage)): "unknown signing format 'x509'",
    }
    for (fmt, key), text in cases.items():
        with pytest.raises(SigningFailed) as err:
            load_signer(fmt, key)
        assert err.value.code == SIGNING_FAILED == "MP730"
        assert text in err.value.message, (fmt, key, err.value.message)
        if fmt != "x509":
            assert key in err.value.message  # names the file


def test_migplan_run_exits_2_on_a_bad_signing_key(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    args = ["--once", "--repo", str(tmp_path / "repo"), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path)]
    env = {"MIGPLAN_REPORT_SIGNING_FORMAT": "ssh", "MIGPLAN_REPORT_SIGNING_KEY": str(tmp_path / "absent")}
    got = CliRunner().invoke(run_command, args, env=env)
    assert got.exit_code == 2
    assert f"error MP730: cannot read the signing key {tmp_path / 'absent'}" in got.output
    # a format without a key, or an unknown format, is a settings error (MP800), also exit 2
    for bad in ({"MIGPLAN_REPORT_SIGNING_FORMAT": "ssh"}, {**env, "MIGPLAN_REPORT_SIGNING_FORMAT": "x509"}):
        got = CliRunner().invoke(run_command, args, env=bad)
        assert got.exit_code == 2 and "error MP800: report_signing_" in got.output, got.output


def test_nothing_is_pushed_unsigned_when_signing_fails(remote: tuple[GitDaemon, Path], tmp_path: Path) -> None:
    daemon, bare = remote
    key, pub = _ssh_key(tmp_path / "bot")
    signer = load_signer("ssh", str(key))
    Path(signer.key).unlink()  # the key disappears under a running controller
    repo = _repo(daemon.url("inv"), tmp_path / "cache")
    out = commit_report(repo, settings=SETTINGS, files=_report(1), message="r", bot=BOT, signer=signer)
    assert out.status == "queued" and out.failure is not None and out.failure.code == "MP730"
    assert out.pending == 1
    assert "migplan-reports" not in git("branch", "--list", cwd=bare)  # nothing reached the remote
    # with the key back, the queued report goes out, signed
    later = flush_outbox(repo, signer=load_signer("ssh", str(key)))
    assert later.status == "committed" and later.pending == 0 and later.commit is not None
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"bot@example.com {pub}\n")
    got = _verify(_clone(daemon, tmp_path / "work"), later.commit, "-c", f"gpg.ssh.allowedSignersFile={signers}")
    assert got.returncode == 0, got.stderr
