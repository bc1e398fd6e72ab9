"""Commit signature verification with real signed commits: keys made by ssh-keygen and gpg in temp
dirs, commits signed by the git CLI (gpg.format ssh / openpgp), checked trusted, untrusted,
unsigned and tampered."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from gitserver import git

from reconciler.adapters.git.signatures import SignatureStatus, verify_signature
from reconciler.adapters.git.source import GitRemote, InventoryRepo
from reconciler.model.inventory import VerifyMode, VerifySettings


def _ssh_key(path: Path, comment: str) -> tuple[Path, str]:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return path, Path(f"{path}.pub").read_text().strip()


def _fingerprint(pub: Path) -> str:
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout.split()[1]


@pytest.fixture(scope="module")
def gpg_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Two OpenPGP keys (alice, mallory) made with gpg --batch, no passphrase, in a temp home."""
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    keys: dict[str, str] = {"GNUPGHOME": str(home)}
    for who in ("alice", "mallory"):
        uid = f"{who.title()} <{who}@example.com>"
        subprocess.run(
            ["gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        keys[who] = subprocess.run(
            ["gpg", "--batch", "--armor", "--export", f"{who}@example.com"], env=env, check=True, capture_output=True,
            text=True,
        ).stdout  # fmt: skip
    yield keys
    subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False)


@pytest.fixture()
def repo_dir(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    git("init", "-q", "-b", "main", str(work))
    return work


def _commit(work: Path, name: str, *config: str, env: dict[str, str] | None = None) -> str:
    (work / f"{name}.txt").write_text(name)
    git("add", "-A", cwd=work)
    git(*config, "commit", "-q", "-m", name, cwd=work, env=env)
    return git("rev-parse", "HEAD", cwd=work)


def _check(work: Path, sha: str, settings: VerifySettings):  # type: ignore[no-untyped-def]
    repo = InventoryRepo.open(GitRemote(str(work), work / "cache"))
    assert isinstance(repo, InventoryRepo)
    sig = repo.signature(sha)
    return verify_signature(None if sig is None else sig[0], b"" if sig is None else sig[1], settings)


def _ssh_sign(key: Path) -> tuple[str, ...]:
    return ("-c", "gpg.format=ssh", "-c", f"user.signingkey={key}", "-c", "commit.gpgsign=true")


def test_ssh_signatures(repo_dir: Path, tmp_path: Path) -> None:
    alice, alice_pub = _ssh_key(tmp_path / "alice", "alice")
    mallory, _ = _ssh_key(tmp_path / "mallory", "mallory")
    settings = VerifySettings(mode=VerifyMode.HEAD, allowed_signers=(f"alice@example.com {alice_pub}",))

    trusted = _check(repo_dir, _commit(repo_dir, "a", *_ssh_sign(alice)), settings)
    assert trusted.status is SignatureStatus.TRUSTED and trusted.signer == "alice@example.com"
    assert trusted.format == "ssh"

    untrusted = _check(repo_dir, _commit(repo_dir, "m", *_ssh_sign(mallory)), settings)
    assert untrusted.status is SignatureStatus.UNTRUSTED
    assert untrusted.signer == _fingerprint(Path(f"{mallory}.pub"))  # the report names the key
    assert untrusted.code == "MP711" and "not from a trusted key" in untrusted.describe()

    unsigned = _check(repo_dir, _commit(repo_dir, "u"), settings)
    assert unsigned.status is SignatureStatus.UNSIGNED and unsigned.signer is None and unsigned.code == "MP710"

    # nobody trusted at all: alice's good signature is merely untrusted
    assert _check(repo_dir, git("rev-parse", "HEAD~2", cwd=repo_dir), VerifySettings()).status is (
        SignatureStatus.UNTRUSTED
    )


def test_ssh_tampered_commit_is_invalid(repo_dir: Path, tmp_path: Path) -> None:
    alice, alice_pub = _ssh_key(tmp_path / "alice", "alice")
    settings = VerifySettings(mode=VerifyMode.HEAD, allowed_signers=(f"alice@example.com {alice_pub}",))
    sha = _commit(repo_dir, "a", *_ssh_sign(alice))
    forged = _tamper(repo_dir, sha)
    got = _check(repo_dir, forged, settings)
    assert got.status is SignatureStatus.INVALID and got.code == "MP712", got
    assert got.describe().startswith("bad ssh signature by alice@example.com: ") and "\n" not in got.describe()


def _tamper(work: Path, sha: str) -> str:
    """Same signature header, different content: what a forged commit looks like."""
    repo = pygit2.Repository(str(work))
    raw = repo.odb.read(sha)[1]
    assert b"gpgsig" in raw
    forged = raw.replace(b"\na\n", b"\nA changed message\n")
    assert forged != raw
    return str(repo.odb.write(pygit2.enums.ObjectType.COMMIT, forged))


def test_openpgp_signatures(repo_dir: Path, gpg_home: dict[str, str]) -> None:
    env = {"GNUPGHOME": gpg_home["GNUPGHOME"]}
    settings = VerifySettings(mode=VerifyMode.HEAD, gpg_public_keys=(gpg_home["alice"],))

    def sign_as(who: str) -> tuple[str, ...]:
        return ("-c", "gpg.format=openpgp", "-c", f"user.signingkey={who}@example.com", "-c", "commit.gpgsign=true")

    trusted = _check(repo_dir, _commit(repo_dir, "a", *sign_as("alice"), env=env), settings)
    assert trusted.status is SignatureStatus.TRUSTED, trusted
    assert trusted.signer == "Alice <alice@example.com>" and trusted.format == "openpgp"

    untrusted = _check(repo_dir, _commit(repo_dir, "m", *sign_as("mallory"), env=env), settings)
    assert untrusted.status is SignatureStatus.UNTRUSTED, untrusted
    assert untrusted.signer is not None and untrusted.signer.startswith("key ")

    forged = _check(repo_dir, _tamper(repo_dir, git("rev-parse", "HEAD~1", cwd=repo_dir)), settings)
    assert forged.status is SignatureStatus.INVALID, forged
    assert forged.signer is not None and "alice@example.com" in forged.signer

    unsigned = _check(repo_dir, _commit(repo_dir, "u"), settings)
    assert unsigned.status is SignatureStatus.UNSIGNED


def test_garbage_signature_is_not_trusted() -> None:
    settings = VerifySettings(mode=VerifyMode.HEAD, allowed_signers=("a@b ssh-ed25519 AAAA",))
    got = verify_signature(b"-----BEGIN SSH SIGNATURE-----\nnot base64\n-----END SSH SIGNATURE-----\n", b"x", settings)
    assert not got.trusted and got.status is SignatureStatus.INVALID
    assert verify_signature(b"random bytes", b"x", settings).status is SignatureStatus.UNTRUSTED
