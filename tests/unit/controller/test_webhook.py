"""Webhook verification (GitHub HMAC, GitLab token) and the HTTP endpoints around it."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from reconciler.controller.http import ControllerHttp
from reconciler.controller.metrics import ControllerMetrics
from reconciler.controller.webhook import verify

SECRET = "It's a Secret to Everybody"
PUSH_MAIN = json.dumps({"ref": "refs/heads/main", "after": "a" * 40}).encode()


def gh_sig(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_github_documented_example_signature() -> None:
    # GitHub's docs: secret "It's a Secret to Everybody", payload "Hello, World!" gives this digest.
    body = b"Hello, World!"
    assert gh_sig(body) == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_github_push_to_followed_branch_triggers() -> None:
    v = verify(
        {"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(PUSH_MAIN)}, PUSH_MAIN, secret=SECRET, branch="main"
    )
    assert (v.status, v.provider, v.trigger) == (202, "github", True)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"X-GitHub-Event": "push"}, 401),
        ({"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(PUSH_MAIN, "wrong")}, 401),
        ({"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(PUSH_MAIN + b" ")}, 401),
        ({"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha1=abc"}, 401),
        ({"X-Gitlab-Event": "Push Hook"}, 401),
        ({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "nope"}, 401),
        ({}, 400),
    ],
)
def test_forged_or_unsigned_requests_are_refused(headers: dict[str, str], status: int) -> None:
    v = verify(headers, PUSH_MAIN, secret=SECRET, branch="main")
    assert v.status == status and not v.trigger


def test_gitlab_token_push_and_other_events() -> None:
    ok = verify({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": SECRET}, PUSH_MAIN, secret=SECRET, branch="main")
    assert ok.trigger and ok.provider == "gitlab"
    mr = verify(
        {"X-Gitlab-Event": "Merge Request Hook", "X-Gitlab-Token": SECRET}, PUSH_MAIN, secret=SECRET, branch="main"
    )
    assert not mr.trigger and mr.status == 202


def test_other_branches_ping_and_missing_secret() -> None:
    body = json.dumps({"ref": "refs/heads/migplan-reports"}).encode()
    v = verify({"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(body)}, body, secret=SECRET, branch="main")
    assert not v.trigger and "ignored" in v.reason  # our own report commits never re-trigger
    ping = verify({"X-GitHub-Event": "ping", "X-Hub-Signature-256": gh_sig(b"{}")}, b"{}", secret=SECRET, branch="main")
    assert ping.status == 200 and not ping.trigger
    nosecret = verify(
        {"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(PUSH_MAIN, "")}, PUSH_MAIN, secret="", branch="main"
    )
    assert nosecret.status == 403 and not nosecret.trigger
    junk = b"not json"
    bad = verify({"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(junk)}, junk, secret=SECRET, branch="main")
    assert bad.status == 400


# --- the HTTP server ------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[tuple[ControllerHttp, list[str], ControllerMetrics, dict[str, bool]]]:
    pushes: list[str] = []
    metrics = ControllerMetrics()
    state = {"healthy": True, "ready": False}
    srv = ControllerHttp(
        host="127.0.0.1",
        port=0,
        metrics=metrics,
        healthy=lambda: (state["healthy"], "" if state["healthy"] else "lease loop stuck"),
        ready=lambda: (state["ready"], "" if state["ready"] else "starting"),
        on_push=pushes.append,
        secret=lambda: SECRET,
        branch="main",
        max_body=64 * 1024,
    )
    srv.start()
    yield srv, pushes, metrics, state
    srv.stop()


def call(port: int, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_http_webhook_health_and_metrics(
    server: tuple[ControllerHttp, list[str], ControllerMetrics, dict[str, bool]],
) -> None:
    srv, pushes, metrics, state = server
    status, _ = call(
        srv.port, "/webhook", PUSH_MAIN, {"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(PUSH_MAIN)}
    )
    assert status == 202 and pushes == ["webhook:github"]
    status, _ = call(srv.port, "/webhook", PUSH_MAIN, {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=00"})
    assert status == 401 and pushes == ["webhook:github"]
    status, _ = call(srv.port, "/webhook", b"x" * (65 * 1024), {"X-GitHub-Event": "push"})
    assert status == 413
    assert call(srv.port, "/healthz")[0] == 200
    assert call(srv.port, "/readyz") == (503, b"starting\n")
    state["ready"], state["healthy"] = True, False
    assert call(srv.port, "/readyz")[0] == 200
    assert call(srv.port, "/healthz") == (503, b"lease loop stuck\n")
    assert call(srv.port, "/nope")[0] == 404
    metrics.set_findings({"MP401": 2})
    metrics.set_partitions([("gpu-h200-01", "1g.18gb", 4, 3)])
    status, text = call(srv.port, "/metrics")
    page = text.decode()
    assert status == 200
    assert 'migplan_webhook_requests_total{outcome="triggered",provider="github"} 1.0' in page
    assert 'migplan_webhook_requests_total{outcome="rejected",provider="github"} 1.0' in page
    assert 'migplan_drift_findings{code="MP401"} 2.0' in page
    assert 'migplan_partitions{node="gpu-h200-01",profile="1g.18gb",state="free"} 1.0' in page
    assert "migplan_reconcile_duration_seconds_bucket" in page


def test_a_signed_deeply_nested_push_is_answered_400_counted_and_logged(
    server: tuple[ControllerHttp, list[str], ControllerMetrics, dict[str, bool]], caplog: pytest.LogCaptureFixture
) -> None:
    # issue 25 item 6: the parser's recursion limit used to kill the handler (no answer, no metric, no log)
    srv, pushes, _metrics, _ = server
    deep = b"[" * 30_000 + b"]" * 30_000
    with caplog.at_level("INFO", logger="migplan.http"):
        status, text = call(srv.port, "/webhook", deep, {"X-GitHub-Event": "push", "X-Hub-Signature-256": gh_sig(deep)})
    assert status == 400 and b"nested too deeply" in text and pushes == []
    page = call(srv.port, "/metrics")[1].decode()
    assert 'migplan_webhook_requests_total{outcome="rejected",provider="github"} 1.0' in page
    assert any("nested too deeply" in r.getMessage() for r in caplog.records)


def test_verify_answers_deep_json_without_raising() -> None:
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    verdict = verify({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": SECRET}, deep, secret=SECRET, branch="main")
    assert verdict.status == 400 and not verdict.trigger
