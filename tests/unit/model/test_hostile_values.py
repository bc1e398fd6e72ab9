"""Values read back from the cluster may hold anything: the strict readers refuse, never crash or guess.

Quantities follow apimachinery's resource.Quantity (kubernetes staging/src/k8s.io/apimachinery/pkg/api/
resource/quantity.go: parseQuantityString, ParseQuantity; suffix.go), device counts are whole and
non-negative, timestamps carry a UTC offset, agent-mode JSON is RFC 8259 with bounded depth and size.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from reconciler.adapters.kube import agentmode as kubeagentmode
from reconciler.adapters.kube.observe import gpu_pod_from_json, node_from_json
from reconciler.logic.planning import desiredcodec
from reconciler.model.errors import MigplanError
from reconciler.model.quantities import QuantityError, parse_count, parse_quantity
from reconciler.model.strict import StrictValueError, loads_json, parse_timestamp


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("1", 1),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1e-3", Fraction(1, 1000)),
        ("2Ki", 2048),
        ("1Mi", 2**20),
        ("1000m", 1),
        ("1500m", Fraction(3, 2)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("+4", 4),
        ("-1", -1),
        ("1k", 1000),
        ("007", 7),  # leading zeros are stripped (parseQuantityString "strip leading zeros")
        ("1n", Fraction(1, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("1E", 10**18),
        ("1.5Gi", 3 * 2**29),
        # ParseQuantity rounds a finer value up (away from zero) to the nano scale
        ("1.5n", Fraction(2, 10**9)),
        ("-1.5n", -Fraction(2, 10**9)),
        ("1e-12", Fraction(1, 10**9)),
        ("0.9999999999", 1),
    ],
)
def test_quantities_parse_as_apimachinery_does(text: str, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


NOT_QUANTITIES = [
    *("", " 1", "1 ", "1KiB", "1K", "ki", "1e", "1e+", "1e1.5", "0x10", "1_000", "Infinity", "NaN", "+", "."),
    *("1e999999999", "9" * 30, "1Ei1Ei", "\uff11"),  # the last: a full-width digit one
]


@pytest.mark.parametrize("text", NOT_QUANTITIES)
def test_what_apimachinery_refuses_is_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("raw", "count"), [("4", 4), ("1e3", 1000), ("2Ki", 2048), ("1000m", 1), ("0", 0), (3, 3), (2.0, 2)]
)
def test_device_counts(raw: object, count: int) -> None:
    assert parse_count(raw) == count


@pytest.mark.parametrize("raw", ["-1", "1.5", "500m", "", "Infinity", True, None, float("nan"), float("inf"), [1]])
def test_device_counts_refuse_negative_fractional_and_non_quantities(raw: object) -> None:
    with pytest.raises(QuantityError):
        parse_count(raw)


def test_timestamps_need_a_utc_offset() -> None:
    assert parse_timestamp("2026-01-01T00:00:00Z").utcoffset() is not None
    assert parse_timestamp("2026-01-01T01:00:00.123456789+01:00") == parse_timestamp("2026-01-01T00:00:00.123456Z")
    for bad in ("2026-01-01T00:00:00", "2026-01-01", "Infinity", "", "2026-13-45T25:61:00Z", "now", 5):
        with pytest.raises(StrictValueError):
            parse_timestamp(bad)


def test_json_is_strict_and_bounded() -> None:
    assert loads_json('{"a": [1, 2]}') == {"a": [1, 2]}
    deep = "[" * 100_000 + "]" * 100_000
    huge = '{"a": ' + "9" * 5000 + "}"
    for bad in ('{"a": NaN}', '{"a": Infinity}', deep, huge, "x" * (300 * 1024), "{", "[-Infinity]"):
        with pytest.raises(StrictValueError):
            loads_json(bad)


def _node(**meta: object) -> dict[str, object]:
    status = meta.pop("status", {"capacity": {"nvidia.com/gpu": "2"}, "allocatable": {"nvidia.com/gpu": "2"}})
    return {"metadata": {"name": "n1", **meta}, "status": status}


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (_node(status={"capacity": {"nvidia.com/mig-1g.18gb": "-1"}}), "status.capacity[nvidia.com/mig-1g.18gb]"),
        (_node(status={"allocatable": {"nvidia.com/gpu": "1.5"}}), "status.allocatable[nvidia.com/gpu]"),
        (_node(status={"capacity": {"nvidia.com/gpu": ""}}), "status.capacity[nvidia.com/gpu]"),
        (_node(labels={"nvidia.com/mig.config.state": "Infinity"}), "label nvidia.com/mig.config.state"),
        (_node(labels={"nvidia.com/gpu.count": "NaN"}), "label nvidia.com/gpu.count"),
        (
            _node(annotations={"migplan.io/mig-config-requested-at": "2026-01-01T00:00:00"}),
            "annotation migplan.io/mig-config-requested-at",
        ),
        (_node(annotations={"migplan.io/cordoned": "yes"}), "annotation migplan.io/cordoned"),
    ],
)
def test_node_values_that_cannot_be_read_are_recorded(obj: dict[str, object], field: str) -> None:
    node = node_from_json(obj)
    assert [m.field for m in node.malformed] == [field]


def test_well_formed_node_has_nothing_malformed_and_exponent_quantities_count() -> None:
    node = node_from_json(_node(status={"capacity": {"nvidia.com/gpu": "1e3", "nvidia.com/mig-1g.18gb": "2Ki"}}))
    assert node.malformed == ()
    assert node.capacity == {"nvidia.com/gpu": 1000, "nvidia.com/mig-1g.18gb": 2048}


def test_a_pod_with_an_unreadable_request_still_holds_a_device() -> None:
    pod = gpu_pod_from_json(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "x"}}}]},
            "status": {"phase": "Running"},
        }
    )
    assert pod is not None and pod.requested() == {"nvidia.com/gpu": 1}
    assert [m.field for m in pod.malformed] == ["container c resources.limits[nvidia.com/gpu]"]


_DESIRED = {"version": "v1", "revision": "r", "gpus": [{"index": 0, "migEnabled": True, "partitions": []}]}


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"version": "v1", "gpus": [{"index": Infinity, "migEnabled": true}]}',
        '{"version": "v1", "gpus": [{"index": NaN, "migEnabled": true}]}',
        json.dumps({**_DESIRED, "gpus": [{"index": 10**30, "migEnabled": True}]}),
        json.dumps({**_DESIRED, "gpus": [{"index": -1, "migEnabled": True}]}),
        json.dumps({**_DESIRED, "gpus": [{"index": 0, "migEnabled": "false"}]}),
        json.dumps({**_DESIRED, "gpus": [{"index": 0.5, "migEnabled": True}]}),
        json.dumps(
            {**_DESIRED, "gpus": [{"index": 0, "migEnabled": True, "partitions": [{"profile": "1g", "start": -3}]}]}
        ),
        json.dumps({**_DESIRED, "gpus": {"0": {}}}),
        '"just a string"',
        "",
    ],
)
def test_malformed_desired_annotation_is_mp910_never_another_exception(text: str) -> None:
    with pytest.raises(MigplanError) as err:
        kubeagentmode.decode_desired("n1", text)
    assert err.value.code == "MP910"


def test_desired_annotation_round_trips() -> None:
    text = json.dumps(_DESIRED)
    assert kubeagentmode.encode_desired(kubeagentmode.decode_desired("n1", text)) == desiredcodec.dump(_DESIRED)


@pytest.mark.parametrize(
    "text", ["[" * 100_000, '{"gpus": [{"index": Infinity}]}', '{"gpus": [{"index": 0, "mig": {"current": "no"}}]}']
)
def test_malformed_observed_annotation_is_mp911(text: str) -> None:
    with pytest.raises(MigplanError) as err:
        kubeagentmode.decode_observed(text)
    assert err.value.code == "MP911"


class _NodeState:
    """The agent's node port over one annotation text, decoded by the production decoder."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.states: list[tuple[str, str]] = []

    def read_desired(self, node: str) -> kubeagentmode.DesiredNode | None:
        return kubeagentmode.decode_desired(node, self.text)

    def publish_observed(self, node: str, observed: object) -> None:
        pass

    def publish_state(self, node: str, state: object, reason: str, *, revision: str) -> None:
        self.states.append((str(state), reason))


class _NoGpus:
    def observe(self) -> tuple[()]:
        return ()

    def set_mig_mode(self, index: int, *, enabled: bool) -> object:
        raise AssertionError("must not touch the GPUs")

    def create_instance(self, index: int, *, profile: str, placement: object) -> object:
        raise AssertionError("must not touch the GPUs")

    def destroy_instance(self, index: int, *, gpu_instance_id: int) -> None:
        raise AssertionError("must not touch the GPUs")


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"version": "v1", "gpus": [{"index": Infinity, "migEnabled": true}]}'],
    ids=["deep", "infinity"],
)
def test_the_agent_publishes_a_terminal_state_with_the_reason_instead_of_dying(text: str) -> None:
    from reconciler.agent import actuate_once

    port = _NodeState(text)
    outcome = actuate_once(gpus=_NoGpus(), node_state=port, node="n1")  # type: ignore[arg-type]
    assert str(outcome.state) == "failed" and "MP910" in outcome.reason
    assert port.states == [("failed", outcome.reason)]
