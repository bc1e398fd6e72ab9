"""The last verified revision: the record that lets a restart, a failover or a force-push never roll the
source back unnoticed. Pure: values, and their one JSON form.

A `TrustRecord` names the revision migplan last accepted for one (remote, ref, root), and a digest of the
`spec.verify` that revision's cluster.yaml carried (so a later revision that edits that block can be told
apart without the old commit at hand). It lives outside the repository it describes (a ConfigMap written
through the official client, or a file on a volume the operator chose): the revision being judged can
neither write nor erase it. `decode` refuses anything that is not exactly the shape `encode` writes, with
a bounded message (the object is editable by anyone allowed to edit ConfigMaps in migplan's namespace).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from reconciler.model.inventory import VerifySettings

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
MAX_RECORD_BYTES = 4096  # a record is ~300 bytes; anything larger was not written by migplan


class DamagedRecord(ValueError):
    """The stored record is not one migplan wrote; the message says why, in a few words."""


@dataclass(frozen=True, slots=True)
class TrustRecord:
    sha: str  # the last verified (applied) commit
    ref: str  # the branch it was read from
    key: str  # which source: a digest of (remote URL, ref, root); records of other sources are not ours
    policy: str  # policy_digest() of that revision's in-repository spec.verify


def policy_digest(verify: VerifySettings) -> str:
    """A stable digest of an in-repository `spec.verify` block (absent and default are the same)."""
    doc = {"mode": verify.mode.value, "ssh": list(verify.allowed_signers), "gpg": list(verify.gpg_public_keys)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def source_key(url: str, ref: str, root: str) -> str:
    return hashlib.sha256(f"{url}\0{ref}\0{root}".encode()).hexdigest()[:16]


def encode(record: TrustRecord) -> str:
    return json.dumps(
        {"sha": record.sha, "ref": record.ref, "key": record.key, "policy": record.policy}, sort_keys=True
    )


def decode(text: str | bytes) -> TrustRecord:
    """The record `encode` wrote, or DamagedRecord. Never echoes the content back (it may be huge or hostile)."""
    if len(text) > MAX_RECORD_BYTES:
        raise DamagedRecord(f"larger than {MAX_RECORD_BYTES} bytes")
    try:
        doc: Any = json.loads(text)
    except (ValueError, RecursionError):
        raise DamagedRecord("not JSON") from None
    if not isinstance(doc, dict):
        raise DamagedRecord("not a JSON object")
    fields = {k: doc.get(k) for k in ("sha", "ref", "key", "policy")}
    if not all(isinstance(v, str) for v in fields.values()):
        raise DamagedRecord("sha, ref, key and policy must be strings")
    sha, ref, key, policy = (str(fields[k]) for k in ("sha", "ref", "key", "policy"))
    if not _SHA.fullmatch(sha):
        raise DamagedRecord("sha is not a full commit id")
    if not re.fullmatch(r"[0-9a-f]{64}", policy) or not re.fullmatch(r"[0-9a-f]{16}", key):
        raise DamagedRecord("key or policy is not a digest")
    if not ref or len(ref) > 255:
        raise DamagedRecord("ref is empty or too long")
    return TrustRecord(sha=sha, ref=ref, key=key, policy=policy)
