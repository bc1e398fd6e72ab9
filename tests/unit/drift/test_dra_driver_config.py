"""The kubelet-plugin DaemonSet of NVIDIA's DRA driver's own chart as a regime signal (MP570, MP579)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters.kube.observe import (
    dra_driver_from_json,
    dra_driver_pod_selector,
    is_dra_kubelet_plugin,
)
from reconciler.logic.drift import draregime
from reconciler.model.dra import DraDriverConfig
from reconciler.twin.dra import kubelet_plugin_daemonset


def _gpus(ds: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "gpus"]
    return c  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("gates", "expected"), [("DynamicMIG=true,", True), ("DynamicMIG=false,", False), (None, False)]
)
def test_the_env_gate_is_read(gates: str | None, expected: bool) -> None:
    d = dra_driver_from_json(kubelet_plugin_daemonset(gates), ["a", "b"])
    assert (d.dynamic_mig, d.problem, d.nodes) == (expected, None, frozenset({"a", "b"}))
    assert d.key == "nvidia-dra-driver-gpu/dra-driver-nvidia-gpu-kubelet-plugin"


def test_a_command_line_gate_overrides_the_env() -> None:
    ds = kubelet_plugin_daemonset("DynamicMIG=false,")
    _gpus(ds)["args"] = ["gpu-kubelet-plugin -v 4 --feature-gates=DynamicMIG=true"]
    assert dra_driver_from_json(ds, ["a"]).dynamic_mig is True


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c["env"].append({"name": "FEATURE_GATES", "value": "DynamicMIG=on"}),
        lambda c: c["env"].append({"name": "FEATURE_GATES", "valueFrom": {"configMapKeyRef": {"name": "x"}}}),
        lambda c: c["env"].append({"name": "FEATURE_GATES", "value": 1}),
        lambda c: c.update(args=["gpu-kubelet-plugin --feature-gates DynamicMIG=true"]),
        lambda c: c.update(args=[7]),
        lambda c: c.update(args="--feature-gates=DynamicMIG=true"),
        lambda c: c.update(env="FEATURE_GATES=DynamicMIG=true"),
        lambda c: c.update(name="other"),
    ],
)
def test_gates_that_cannot_be_read_are_unknown_with_a_reason(mutate: Any) -> None:
    ds = kubelet_plugin_daemonset(None)
    mutate(_gpus(ds))
    d = dra_driver_from_json(ds, ["a"])
    assert d.dynamic_mig is None and d.problem
    assert draregime.driver_dynamic_mig([d], "a") == d.key  # unknown counts as on


@pytest.mark.parametrize("hostile", [None, [], "x", {"spec": []}, {"metadata": {"name": 3}, "spec": {"template": 1}}])
def test_a_malformed_daemonset_never_raises(hostile: Any) -> None:
    d = dra_driver_from_json(hostile, [])
    assert d.dynamic_mig is None and d.problem


def test_only_the_kubelet_plugin_and_its_selector() -> None:
    ds = kubelet_plugin_daemonset(None)
    assert is_dra_kubelet_plugin(ds)
    assert dra_driver_pod_selector(ds) == "dra-driver-nvidia-gpu-component=kubelet-plugin"
    ds["metadata"]["name"] = "dra-driver-nvidia-gpu-controller"
    assert not is_dra_kubelet_plugin(ds)
    ds["spec"]["selector"] = {"matchLabels": {"a": 1}}
    assert dra_driver_pod_selector(ds) is None


def test_a_driver_marks_only_the_nodes_it_runs_on() -> None:
    on = DraDriverConfig("ns", "on", True, frozenset({"a"}))
    off = DraDriverConfig("ns", "off", False, frozenset({"b"}))
    assert draregime.driver_dynamic_mig([on, off], "a") == "ns/on"
    assert draregime.driver_dynamic_mig([on, off], "b") is None
    assert draregime.driver_dynamic_mig([on, off], "c") is None
    assert draregime.other_writer(None, None, "ns/on") == "NVIDIA's DRA driver (DynamicMIG, DaemonSet ns/on)"
    assert draregime.other_writer(None, None, None) is None
