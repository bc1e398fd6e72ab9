"""Commit signature verification: SSH signatures (ssh-keygen -Y) and OpenPGP signatures (gpg).

Contract: `verify_signature(signature, payload, settings)` takes the signature and the signed payload
of a commit (pygit2's `Commit.gpg_signature`, obtained in adapters/git/source.py) and the trusted keys
of `VerifySettings`, and returns a `SignatureCheck` value; it never raises for a bad signature.
- SSH: checked against an allowed-signers file built from `settings.allowed_signers` (namespace
  "git", as `git -c gpg.format=ssh` signs); an untrusted key is still checked for integrity so the
  report can name it by fingerprint.
- OpenPGP: checked with `gpg --verify` in a throwaway GNUPGHOME holding only
  `settings.gpg_public_keys`; a key given there is trusted by definition (no web of trust, no key
  servers, no agent).
Subprocesses are run without a shell, with a timeout. Not pure: runs ssh-keygen and gpg.
"""

from __future__ import annotations

import enum
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reconciler.model.inventory import VerifySettings

_TIMEOUT_S = 30
UNSIGNED_CODE = "MP710"
UNTRUSTED_CODE = "MP711"
INVALID_CODE = "MP712"


class SignatureStatus(enum.StrEnum):
    TRUSTED = "trusted"  # a good signature by a trusted key
    UNSIGNED = "unsigned"
    UNTRUSTED = "untrusted"  # intact, but by a key that is not trusted (or of a kind we do not check)
    INVALID = "invalid"  # the signature does not match the commit (tampered) or cannot be read


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    status: SignatureStatus
    format: str | None = None  # "ssh" | "openpgp" | "x509" | None
    signer: str | None = None  # principal or user id when trusted; key fingerprint/id otherwise
    detail: str = ""  # the verifier's own words, for the report

    @property
    def trusted(self) -> bool:
        return self.status is SignatureStatus.TRUSTED

    @property
    def code(self) -> str | None:
        return {
            SignatureStatus.UNSIGNED: UNSIGNED_CODE,
            SignatureStatus.UNTRUSTED: UNTRUSTED_CODE,
            SignatureStatus.INVALID: INVALID_CODE,
        }.get(self.status)

    def describe(self) -> str:
        who = f" by {self.signer}" if self.signer else ""
        if self.status is SignatureStatus.UNSIGNED:
            return "the commit is not signed"
        if self.status is SignatureStatus.TRUSTED:
            return f"good {self.format} signature{who}"
        if self.status is SignatureStatus.UNTRUSTED:
            return f"{self.format} signature{who} is not from a trusted key"
        first = self.detail.strip().splitlines()[0] if self.detail.strip() else "does not match the commit"
        return f"bad {self.format or ''} signature{who}: {first}".replace("  ", " ")


def verify_signature(signature: bytes | None, payload: bytes, settings: VerifySettings) -> SignatureCheck:
    if not signature:
        return SignatureCheck(SignatureStatus.UNSIGNED)
    head = signature.lstrip()[:40]
    with tempfile.TemporaryDirectory(prefix="migplan-verify-") as tmp:
        work = Path(tmp)
        if head.startswith(b"-----BEGIN SSH SIGNATURE-----"):
            return _verify_ssh(signature, payload, settings, work)
        if head.startswith(b"-----BEGIN PGP SIGNATURE-----"):
            return _verify_openpgp(signature, payload, settings, work)
    kind = "x509" if head.startswith(b"-----BEGIN SIGNED MESSAGE-----") else None
    return SignatureCheck(SignatureStatus.UNTRUSTED, kind, None, "unsupported signature format")


def _run(
    argv: list[str], *, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=_TIMEOUT_S, env=env, check=False)


def _text(proc: subprocess.CompletedProcess[bytes]) -> str:
    return (proc.stdout + proc.stderr).decode(errors="replace").strip()


def _verify_ssh(signature: bytes, payload: bytes, settings: VerifySettings, work: Path) -> SignatureCheck:
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        return SignatureCheck(SignatureStatus.INVALID, "ssh", None, "ssh-keygen is not installed")
    sig = work / "commit.sig"
    sig.write_bytes(signature)
    allowed = work / "allowed_signers"
    allowed.write_text("".join(f"{line.strip()}\n" for line in settings.allowed_signers if line.strip()))
    found = _run([keygen, "-Y", "find-principals", "-s", str(sig), "-f", str(allowed)])
    principal = found.stdout.decode(errors="replace").split("\n")[0].strip() if found.returncode == 0 else ""
    if principal:
        ok = _run(
            [keygen, "-Y", "verify", "-f", str(allowed), "-I", principal, "-n", "git", "-s", str(sig)], stdin=payload
        )
        if ok.returncode == 0:
            return SignatureCheck(SignatureStatus.TRUSTED, "ssh", principal, _text(ok))
        return SignatureCheck(SignatureStatus.INVALID, "ssh", principal, _text(ok))
    # Not a trusted key: still check the signature itself, so the report can say which key signed.
    check = _run([keygen, "-Y", "check-novalidate", "-n", "git", "-s", str(sig)], stdin=payload)
    fingerprint = re.search(r"(SHA256:[A-Za-z0-9+/=]+)", _text(check))
    signer = fingerprint.group(1) if fingerprint else None
    if check.returncode == 0:
        return SignatureCheck(SignatureStatus.UNTRUSTED, "ssh", signer, _text(check))
    return SignatureCheck(SignatureStatus.INVALID, "ssh", signer, _text(check))


def _verify_openpgp(signature: bytes, payload: bytes, settings: VerifySettings, work: Path) -> SignatureCheck:
    gpg = shutil.which("gpg")
    if gpg is None:
        return SignatureCheck(SignatureStatus.INVALID, "openpgp", None, "gpg is not installed")
    home = work / "gnupg"
    home.mkdir(mode=0o700)
    env = {"GNUPGHOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C"}
    base = [gpg, "--batch", "--no-tty", "--no-autostart", "--no-auto-key-retrieve"]
    try:
        for key in settings.gpg_public_keys:
            _run([*base, "--import"], stdin=key.encode(), env=env)
        sig, data = work / "commit.sig", work / "commit.payload"
        sig.write_bytes(signature)
        data.write_bytes(payload)
        proc = _run([*base, "--status-fd", "1", "--verify", str(sig), str(data)], env=env)
    finally:
        # gpg may have started helpers for this home; stop them so nothing outlives the check
        gpgconf = shutil.which("gpgconf")
        if gpgconf is not None:
            _run([gpgconf, "--kill", "all"], env=env)
    status = proc.stdout.decode(errors="replace")
    detail = proc.stderr.decode(errors="replace").strip()
    good = re.search(r"^\[GNUPG:\] GOODSIG (\S+) (.*)$", status, re.M)
    if good and proc.returncode == 0:
        return SignatureCheck(SignatureStatus.TRUSTED, "openpgp", good.group(2).strip(), detail)
    bad = re.search(r"^\[GNUPG:\] BADSIG (\S+) (.*)$", status, re.M)
    if bad:
        return SignatureCheck(
            SignatureStatus.INVALID, "openpgp", f"{bad.group(2).strip()} (key {bad.group(1)})", detail
        )
    expired = re.search(r"^\[GNUPG:\] (EXPSIG|EXPKEYSIG|REVKEYSIG) (\S+) (.*)$", status, re.M)
    if expired:
        why = {"EXPSIG": "expired signature", "EXPKEYSIG": "expired key", "REVKEYSIG": "revoked key"}[expired.group(1)]
        return SignatureCheck(SignatureStatus.UNTRUSTED, "openpgp", f"{expired.group(3).strip()} ({why})", detail)
    missing = re.search(r"^\[GNUPG:\] (?:NO_PUBKEY|ERRSIG) (\S+)", status, re.M)
    if missing and "NO_PUBKEY" in status:
        return SignatureCheck(SignatureStatus.UNTRUSTED, "openpgp", f"key {missing.group(1)}", detail)
    return SignatureCheck(SignatureStatus.INVALID, "openpgp", missing.group(1) if missing else None, detail)
