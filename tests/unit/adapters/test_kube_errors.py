"""One Kubernetes API error translator (adapters/kube/cluster.py api_error): every status becomes a typed migplan error
with a registered MP55x code, whichever adapter asked; a caller's own 409 type (the leader Lease) is kept."""

from __future__ import annotations

import orjson
import pytest
from kubernetes.client.exceptions import ApiException

from reconciler.adapters.kube import cluster as kube
from reconciler.model import codes
from reconciler.model.errors import LeaseConflict, MigplanError, Transient


def _exc(status: int, message: str = "the server's words") -> ApiException:
    exc = ApiException(status=status, reason="Reason")
    exc.body = orjson.dumps({"kind": "Status", "message": message})
    return exc


@pytest.mark.parametrize(
    ("status", "kind", "code", "transient"),
    [
        (0, kube.ApiUnreachable, "MP555", True),  # the client's ApiException(status=0) for a TLS failure
        (400, kube.ApiRequestFailed, "MP550", False),
        (403, kube.ApiRequestFailed, "MP550", False),
        (404, kube.NotFound, "MP551", False),
        (409, kube.ApiConflict, "MP553", True),
        (410, kube.ListExpired, "MP552", True),
        (422, kube.ApiRequestFailed, "MP550", False),
        (429, kube.ApiUnavailable, "MP554", True),
        (500, kube.ApiUnavailable, "MP554", True),
        (503, kube.ApiUnavailable, "MP554", True),
    ],
)
def test_every_status_is_a_typed_registered_error(
    status: int, kind: type[MigplanError], code: str, transient: bool
) -> None:
    err = kube.api_error(_exc(status), "patch node n1")
    assert type(err) is kind and err.code == code
    assert code in codes.REGISTRY and codes.REGISTRY[code].family is codes.Family.KUBERNETES
    assert isinstance(err, Transient) is transient
    assert err.message.startswith("patch node n1") and "the server's words" in err.message


def test_a_conflict_is_never_retried_and_other_transients_are() -> None:
    assert not kube._retryable(kube.api_error(_exc(409), "put"))
    assert kube._retryable(kube.api_error(_exc(503), "put"))
    assert not kube._retryable(kube.api_error(_exc(403), "put"))


def test_the_lease_keeps_its_own_conflict_type() -> None:
    err = kube.api_error(_exc(409), "update lease ns/l", conflict=LeaseConflict)
    assert isinstance(err, LeaseConflict) and err.code == "MP821"
    assert isinstance(kube.api_error(_exc(500), "update lease ns/l", conflict=LeaseConflict), kube.ApiUnavailable)


def test_a_body_that_is_not_json_still_gives_a_message() -> None:
    exc = ApiException(status=502, reason="Bad Gateway")
    exc.body = b"<html>proxy error</html>"
    err = kube.api_error(exc, "list nodes")
    assert err.code == "MP554" and "Bad Gateway" in err.message


def test_transport_failures_are_unreachable() -> None:
    with pytest.raises(kube.ApiUnreachable) as caught, kube.translate_api_errors("list pods"):
        raise ConnectionResetError("reset by peer")
    assert caught.value.code == "MP555" and "list pods" in caught.value.message


def test_retry_after_makes_a_throttled_error_for_every_adapter() -> None:
    exc = _exc(429)
    exc.headers = {"Retry-After": "3", "X-Kubernetes-PF-PriorityLevel-UID": "uid-1"}
    for err in (kube.api_error(exc, "patch node n1"), kube.api_error(exc, "update lease", conflict=LeaseConflict)):
        assert isinstance(err, kube.Throttled) and isinstance(err, kube.ApiUnavailable)
        assert err.code == "MP554" and err.retry_after == 3 and "priority level uid-1" in err.message
    assert type(kube.api_error(_exc(429), "patch node n1")) is kube.ApiUnavailable  # no header: plain backoff
