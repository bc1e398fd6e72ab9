"""Signing the controller's report commits with an SSH or OpenPGP key, the way git itself does.

Teams that require signed commits on an infrastructure repository (branch protection "require signed
commits") need the bot's report commits signed too. `load_signer()` takes the key once, at startup, and
proves it can sign; `CommitSigner.sign(payload)` returns the armoured signature that goes into the commit's
`gpgsig` header (gitreports builds the commit with pygit2's `create_commit_string` and
`create_commit_with_signature`).

What git does, and so what this does (git `gpg-interface.c`):
- `gpg.format=ssh`: `ssh-keygen -Y sign -n git -f <key>` over the commit buffer (`sign_buffer_ssh`); the
  namespace is `git`, so `git verify-commit` with `gpg.ssh.allowedSignersFile` accepts it.
- `gpg.format=openpgp`: `gpg --status-fd=2 -bsau <key>` (`sign_buffer_gpg`), success only when the status
  output carries `[GNUPG:] SIG_CREATED`.

The key comes from a file (a mounted Kubernetes Secret): for ssh an unencrypted OpenSSH private key, for
openpgp an ASCII-armoured secret key without passphrase. It is copied into a private 0700 directory of
this process (ssh-keygen refuses a key file others can read, and Secret volumes are often 0644; gpg needs
a home of its own to import into), so the mounted file's mode does not matter.

A key that is missing, unreadable, encrypted or not a key is a `SigningFailed` (MP730) at startup; a
signing failure later (the key removed under a running controller) is the same code on the report, which
then stays queued: nothing is ever pushed unsigned while signing is configured.

Not pure: runs ssh-keygen / gpg and writes a temporary directory.
"""

from __future__ import annotations

import atexit
import enum
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reconciler.model.errors import MigplanError

SIGNING_FAILED = "MP730"  # a report commit cannot be signed (key missing, unreadable or wrong)
_TIMEOUT_S = 30.0
_PROBE = b"migplan: can this key sign?\n"


class SigningFormat(enum.StrEnum):
    """git's `gpg.format` values migplan supports."""

    SSH = "ssh"
    OPENPGP = "openpgp"


class SigningFailed(MigplanError):
    """The report commit could not be signed; nothing is committed or pushed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=SIGNING_FAILED)


@dataclass(frozen=True, slots=True)
class CommitSigner:
    """A key that has been shown to sign. `key` is this process's private copy (ssh) or a key id (openpgp)."""

    format: SigningFormat
    key: str
    source: str  # the file it was loaded from, for messages
    gnupg_home: Path | None = None

    def sign(self, payload: bytes) -> str:
        """The armoured detached signature of `payload` (a commit buffer), as git would make it."""
        if self.format is SigningFormat.SSH:
            return self._ssh(payload)
        return self._gpg(payload)

    def _ssh(self, payload: bytes) -> str:
        # Data on stdin, signature on stdout ("Signing data on standard input" goes to stderr).
        out = _run(["ssh-keygen", "-Y", "sign", "-n", "git", "-f", self.key], payload, what=f"ssh key {self.source}")
        text = out.decode("ascii", "replace")
        if "-----BEGIN SSH SIGNATURE-----" not in text:
            raise SigningFailed(f"ssh-keygen made no signature with {self.source}")
        return text

    def _gpg(self, payload: bytes) -> str:
        assert self.gnupg_home is not None
        argv = ["gpg", "--homedir", str(self.gnupg_home), "--batch", "--no-tty", "--status-fd=2", "-bsau", self.key]
        proc = _proc(argv, payload, what=f"OpenPGP key {self.source}")
        if b"\n[GNUPG:] SIG_CREATED " not in b"\n" + proc.stderr:  # what git checks (sign_buffer_gpg)
            raise SigningFailed(f"gpg made no signature with {self.source}: {_last_line(proc.stderr)}")
        return proc.stdout.decode("ascii", "replace")


def load_signer(fmt: str, key_file: str) -> CommitSigner:
    """The signer for settings `report_signing_format` / `report_signing_key`, checked by signing a probe."""
    try:
        form = SigningFormat(fmt)
    except ValueError:
        raise SigningFailed(f"unknown signing format {fmt!r}: expected ssh or openpgp") from None
    if not key_file:
        raise SigningFailed(f"signing format {form} needs a key file (report_signing_key)")
    try:
        data = Path(key_file).read_bytes()
    except OSError as exc:
        raise SigningFailed(f"cannot read the signing key {key_file}: {exc.strerror or exc}") from exc
    home = Path(tempfile.mkdtemp(prefix="migplan-sign-"))  # 0700; short, so gpg-agent's socket path fits
    atexit.register(_cleanup, home)
    signer = _load_ssh(data, key_file, home) if form is SigningFormat.SSH else _load_gpg(data, key_file, home)
    signer.sign(_PROBE)  # a key that cannot sign is refused now, not at the first report
    return signer


def _load_ssh(data: bytes, source: str, home: Path) -> CommitSigner:
    copy = home / "key"
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data if data.endswith(b"\n") else data + b"\n")
    # `-y -P ''`: derive the public key without a passphrase — fails for an encrypted key or a non-key,
    # with ssh-keygen's own reason, instead of a passphrase prompt later.
    _run(["ssh-keygen", "-y", "-P", "", "-f", str(copy)], b"", what=f"ssh key {source}")
    return CommitSigner(SigningFormat.SSH, str(copy), source)


def _load_gpg(data: bytes, source: str, home: Path) -> CommitSigner:
    gnupg = home / "gnupg"
    gnupg.mkdir(mode=0o700)
    base = ["gpg", "--homedir", str(gnupg), "--batch", "--no-tty"]
    _run([*base, "--import"], data, what=f"OpenPGP key {source}")
    listing = _run([*base, "--with-colons", "--list-secret-keys"], b"", what=f"OpenPGP key {source}").decode()
    fingerprints = [ln.split(":")[9] for ln in listing.splitlines() if ln.startswith("fpr:")]
    if not any(ln.startswith("sec:") for ln in listing.splitlines()) or not fingerprints:
        raise SigningFailed(f"{source} holds no OpenPGP secret key (export it with gpg --export-secret-keys --armor)")
    return CommitSigner(SigningFormat.OPENPGP, fingerprints[0], source, gnupg_home=gnupg)


def _proc(argv: list[str], stdin: bytes, *, what: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise SigningFailed(f"{argv[0]} is not installed: cannot sign with {what}") from None
    except subprocess.TimeoutExpired:
        raise SigningFailed(f"{argv[0]} did not finish in {_TIMEOUT_S:.0f}s signing with {what}") from None


def _run(argv: list[str], stdin: bytes, *, what: str) -> bytes:
    proc = _proc(argv, stdin, what=what)
    if proc.returncode != 0:
        raise SigningFailed(
            f"cannot sign with {what}: {_last_line(proc.stderr) or f'{argv[0]} exit {proc.returncode}'}"
        )
    return proc.stdout


def _last_line(stderr: bytes) -> str:
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    # gpg's status lines and ssh-keygen's banner are noise; the reason is the last plain line
    plain = [ln for ln in lines if not ln.startswith("[GNUPG:]") and not ln.startswith("@")]
    return plain[-1] if plain else (lines[-1] if lines else "")


def _cleanup(home: Path) -> None:
    gnupg = home / "gnupg"
    if gnupg.is_dir():
        subprocess.run(["gpgconf", "--homedir", str(gnupg), "--kill", "all"], capture_output=True, check=False)
    shutil.rmtree(home, ignore_errors=True)
