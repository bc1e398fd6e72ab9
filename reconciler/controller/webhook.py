"""Push webhooks from GitHub and GitLab: is this request genuine, and should it start a cycle?

Pure: headers and body in, a `WebhookVerdict` out. The checks are the ones each forge documents:
- GitHub signs the raw body with the shared secret: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256>`;
  the event name is in `X-GitHub-Event` (`push`, `ping`).
- GitLab sends the secret itself in `X-Gitlab-Token`; the event in `X-Gitlab-Event` (`Push Hook`).
Comparisons are constant-time (hmac.compare_digest). Without a configured secret every webhook is
refused: an unauthenticated trigger endpoint would let anyone make the controller hammer the API.
A genuine push starts a cycle only when its `ref` is the branch the controller follows; pushes to other
branches (including migplan's own report branch — its own commits must never trigger a re-apply) are
acknowledged and ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WebhookVerdict:
    status: int  # HTTP status to answer
    provider: str  # "github" | "gitlab" | "unknown"
    trigger: bool  # start a cycle
    reason: str

    @property
    def outcome(self) -> str:
        if self.trigger:
            return "triggered"
        return "ignored" if self.status < 400 else "rejected"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    for k, v in headers.items():
        if k.lower() == lowered:
            return v
    return None


class _TooDeep(ValueError):
    pass


def _ref_of(body: bytes) -> str | None:
    """The push's `ref`, None when there is none; _TooDeep for a body nested past what the parser's stack
    allows (a signed body can still be hostile: a compromised forge account, a replayed test payload)."""
    try:
        doc = json.loads(body)
    except RecursionError:
        raise _TooDeep from None
    except (ValueError, UnicodeDecodeError):
        return None
    ref = doc.get("ref") if isinstance(doc, dict) else None
    return ref if isinstance(ref, str) else None


def _push(provider: str, body: bytes, branch: str) -> WebhookVerdict:
    try:
        ref = _ref_of(body)
    except _TooDeep:
        return WebhookVerdict(400, provider, False, "push payload nested too deeply to parse")
    if ref is None:
        return WebhookVerdict(400, provider, False, "push payload without a ref")
    want = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
    if ref != want:
        return WebhookVerdict(202, provider, False, f"push to {ref} ignored (following {want})")
    return WebhookVerdict(202, provider, True, f"push to {ref}")


def verify(headers: Mapping[str, str], body: bytes, *, secret: str, branch: str) -> WebhookVerdict:
    github_event = _header(headers, "X-GitHub-Event")
    gitlab_event = _header(headers, "X-Gitlab-Event")
    provider = "github" if github_event else "gitlab" if gitlab_event else "unknown"
    if provider == "unknown":
        return WebhookVerdict(400, provider, False, "not a GitHub or GitLab webhook (no event header)")
    if not secret:
        return WebhookVerdict(403, provider, False, "webhook secret not configured: refusing all webhooks")
    if provider == "github":
        signature = _header(headers, "X-Hub-Signature-256") or ""
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not signature:
            return WebhookVerdict(401, provider, False, "missing X-Hub-Signature-256")
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            return WebhookVerdict(401, provider, False, "bad X-Hub-Signature-256")
        if github_event == "ping":
            return WebhookVerdict(200, provider, False, "ping")
        if github_event != "push":
            return WebhookVerdict(202, provider, False, f"event {github_event} ignored")
        return _push(provider, body, branch)
    token = _header(headers, "X-Gitlab-Token") or ""
    if not token:
        return WebhookVerdict(401, provider, False, "missing X-Gitlab-Token")
    if not hmac.compare_digest(token.encode(), secret.encode()):
        return WebhookVerdict(401, provider, False, "bad X-Gitlab-Token")
    if gitlab_event != "Push Hook":
        return WebhookVerdict(202, provider, False, f"event {gitlab_event} ignored")
    return _push(provider, body, branch)
