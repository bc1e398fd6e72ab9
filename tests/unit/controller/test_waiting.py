"""Why the controller waits (reconciler/controller/waiting.py): each reason classified from the API's or the source's
own answer, logged once at WARNING with its fix, then only at the slow cadence, its end once at INFO."""

from __future__ import annotations

import logging

import pytest

from reconciler.controller import waiting
from reconciler.controller.waiting import CYCLE, LEASE, Wait, WaitBoard, classify_api_failure, classify_source
from reconciler.model.codes import REGISTRY

NS_404 = 'create lease migplan/migplan-leader: not found: namespaces "migplan" not found'
RBAC_403 = (
    'read lease migplan/migplan-leader: HTTP 403: leases.coordination.k8s.io "migplan-leader" is forbidden: '
    'User "system:serviceaccount:migplan:migplan" cannot get resource "leases"'
)


def test_every_wait_code_is_registered_with_its_meaning() -> None:
    for code in waiting.ALL:
        assert code in REGISTRY and REGISTRY[code].family.value == "controller", code


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("MP551", NS_404, waiting.NAMESPACE_MISSING),
        ("MP550", RBAC_403, waiting.FORBIDDEN),
        ("MP555", "read lease migplan/migplan-leader: ConnectionRefusedError: [Errno 111]", waiting.API_UNREACHABLE),
        ("MP554", "read lease migplan/migplan-leader: HTTP 503: unavailable", waiting.API_UNREACHABLE),
        ("MP551", 'not found: namespaces "other" not found', None),  # another namespace: not ours to name
        ("MP551", 'leases.coordination.k8s.io "migplan-leader" not found', None),  # the Lease itself: created next
        ("MP550", "HTTP 422: Lease is invalid", None),
        ("MP821", "update lease: HTTP 409: conflict", None),  # a race another replica won: a plain retry
    ],
)
def test_api_failures_are_classified_from_the_servers_own_answer(code: str, message: str, expected: str | None) -> None:
    wait = classify_api_failure(code, message, namespace="migplan")
    assert (wait.code if wait else None) == expected
    if wait is not None:
        assert message in wait.what and wait.fix  # the server's words, and what to do


def test_the_missing_namespace_names_the_command_that_fixes_it() -> None:
    wait = classify_api_failure("MP551", NS_404, namespace="migplan")
    assert wait is not None and "kubectl create namespace migplan" in wait.fix


def test_a_repository_is_a_wait_only_when_nothing_was_ever_read() -> None:
    down = classify_source(has_revision=False, error_code="MP702", error_message="auth refused", repo="https://g/x")
    assert down is not None and down.code == waiting.REPOSITORY_UNREACHABLE and "credentials" in down.fix
    assert "https://g/x" in down.what and "auth refused" in down.what
    assert classify_source(has_revision=True, error_code="MP701", error_message="down", repo="r") is None  # cached
    assert classify_source(has_revision=False, error_code=None, error_message="", repo="r") is None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _warnings(caplog: pytest.LogCaptureFixture, code: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and code in r.getMessage()]


def test_logged_once_then_at_the_slow_cadence_then_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    changes: list[tuple[str, bool]] = []
    board = WaitBoard(
        log=logging.getLogger("t.wait"), cadence=300.0, mono=clock, on_change=lambda c, on: changes.append((c, on))
    )
    wait = classify_api_failure("MP551", NS_404, namespace="migplan")
    assert wait is not None
    with caplog.at_level(logging.INFO, logger="t.wait"):
        assert board.hold(wait, scope=LEASE) is True
        for _ in range(149):  # five minutes of 2 s lease rounds
            clock.now += 2.0
            assert board.hold(wait, scope=LEASE) is False
        assert len(_warnings(caplog, "MP980")) == 1
        clock.now += 2.0  # 300 s after the first line
        board.hold(wait, scope=LEASE)
        logged = _warnings(caplog, "MP980")
        assert len(logged) == 2 and "still waiting" in logged[1].getMessage()
        assert "kubectl create namespace migplan" in logged[0].getMessage()
        assert board.blocking() == wait
        board.clear(waiting.NAMESPACE_MISSING, scope=LEASE)
        board.clear(waiting.NAMESPACE_MISSING, scope=LEASE)  # twice: said once
    ends = [r for r in caplog.records if "no longer waiting" in r.getMessage()]
    assert len(ends) == 1 and ends[0].levelno == logging.INFO
    assert changes == [("MP980", True), ("MP980", False)] and board.blocking() is None


def test_one_scope_clearing_does_not_hide_what_the_other_saw() -> None:
    """A Lease round that goes through must not clear an RBAC refusal the cycle met (and log it anew each time)."""
    changes: list[tuple[str, bool]] = []
    board = WaitBoard(log=logging.getLogger("t.scope"), on_change=lambda c, on: changes.append((c, on)))
    refused = Wait(waiting.FORBIDDEN, "patch clusterpolicies: HTTP 403", "apply the RBAC")
    assert board.hold(refused, scope=CYCLE)
    board.clear(waiting.FORBIDDEN, scope=LEASE)
    assert board.blocking() == refused and changes == [("MP981", True)]
    assert not board.hold(refused, scope=CYCLE)  # not new: no second Event
    board.clear(waiting.FORBIDDEN, scope=CYCLE)
    assert board.blocking() is None and changes[-1] == ("MP981", False)


def test_a_standby_is_not_kept_from_being_ready() -> None:
    board = WaitBoard(log=logging.getLogger("t.standby"))
    board.hold(Wait(waiting.LEADERSHIP_LOST, "lost the Lease (holder now: b)", "nothing"), scope=LEASE)
    assert board.blocking() is None and [w.code for w in board.active()] == ["MP983"]
