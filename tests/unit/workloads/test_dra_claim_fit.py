"""check-workloads with DRA claims: allocation modes, firstAvailable, matchAttribute, replicas and shared claims,
injected DeviceClasses, DynamicMIG nodes, and the worst inputs a manifest can carry (the example plan: two H200 nodes
cut 3g.71gb + 2g.35gb + 2 x 1g.18gb per GPU, an H100 node with 4g.40gb + 3g.40gb and a whole GPU, an A100 node)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.workloads import workloads
from reconciler.logic.workloads.manifests import read_manifests
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.inventory import DesiredState


@pytest.fixture(scope="module")
def desired() -> DesiredState:
    result = validate_inventory(read_inventory_dir(resources.inventory_dir()), catalog=load_catalog())
    assert result.desired is not None and result.valid
    return result.desired


def template(name: str, requests: str, constraints: str = "") -> str:
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: {name}, namespace: ml}}\n"
        f"spec:\n  spec:\n    devices:\n      requests:\n{requests}"
        + (f"      constraints:\n{constraints}" if constraints else "")
    )


def exactly(name: str, expression: str | None = None, *, cls: str = "mig.nvidia.com", extra: str = "") -> str:
    sel = f'\n            selectors: [{{cel: {{expression: "{expression}"}}}}]' if expression else ""
    return f"        - name: {name}\n          exactly:\n            deviceClassName: {cls}{extra}{sel}\n"


def profile(p: str) -> str:
    return f"device.attributes['gpu.nvidia.com'].profile == '{p}'"


def deployment(name: str, replicas: int, claim: str, *, shared: bool = False, kind: str = "Deployment") -> str:
    field = "resourceClaimName" if shared else "resourceClaimTemplateName"
    reps = f"  replicas: {replicas}\n" if kind != "DaemonSet" else ""
    return (
        f"apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n{reps}"
        "  template:\n    spec:\n      containers: [{name: c, resources: {claims: [{name: g}]}}]\n"
        f"      resourceClaims:\n        - {{name: g, {field}: {claim}}}\n"
    )


def run(desired: DesiredState, *docs: str, **kwargs: Any) -> tuple[list[Diagnostic], list[dict[str, Any]]]:
    manifests, read = read_manifests("---\n".join(docs).encode(), file="m.yaml")
    assert not read, read
    found, summaries = workloads.check_workloads(
        manifests, desired=desired, nodes=workloads.plan_nodes(desired, load_catalog()), **kwargs
    )
    return found, summaries


def codes(found: list[Diagnostic]) -> list[str]:
    return sorted(d.code for d in found)


def claims_summary(summaries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(s for s in summaries if s["name"] == name)["claims"]


# --- counts and replicas ---------------------------------------------------------------------------


def test_a_template_gives_each_replica_its_own_devices(desired: DesiredState) -> None:
    # One 3g.71gb per H200 GPU: four in the plan.
    found, summaries = run(desired, template("t", exactly("g", profile("3g.71gb"))), deployment("d", 4, "t"))
    assert found == []
    assert claims_summary(summaries, "d")["planFits"] == 4
    found, _ = run(desired, template("t", exactly("g", profile("3g.71gb"))), deployment("d", 5, "t"))
    assert codes(found) == ["MP613"]
    assert "hold 4 such pods" in found[0].message and "gpu-h200-01 (2)" in found[0].message


def test_a_shared_claim_is_one_allocation_for_every_replica(desired: DesiredState) -> None:
    claim = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: s, namespace: ml}\nspec:\n"
        "  devices:\n    requests:\n"
        "      - name: g\n        exactly:\n          deviceClassName: mig.nvidia.com\n"
        f'          selectors: [{{cel: {{expression: "{profile("3g.71gb")}"}}}}]\n'
    )
    found, summaries = run(desired, claim, deployment("d", 10, "s", shared=True))
    assert found == [], found
    assert claims_summary(summaries, "d")["planFits"] == 10
    # A second workload with a template for the same profile: the shared claim took one of the four.
    found, _ = run(
        desired,
        claim,
        deployment("d", 10, "s", shared=True),
        template("t", exactly("g", profile("3g.71gb"))),
        deployment("e", 4, "t"),
    )
    assert codes(found) == ["MP613"] and "3 of its 4 pods" in found[0].message, found


def test_zero_replicas_take_nothing_but_are_still_judged(desired: DesiredState) -> None:
    found, summaries = run(
        desired, template("t", exactly("g", profile("3g.71gb"))), deployment("z", 0, "t"), deployment("d", 4, "t")
    )
    assert found == [] and claims_summary(summaries, "z")["planFits"] == 1
    found, _ = run(desired, template("t", exactly("g", profile("1g.35gb"))), deployment("z", 0, "t"))
    assert codes(found) == ["MP633"]  # an H200 profile the plan never cuts: judged even with no replica


def test_count_above_what_one_node_publishes_never_fits(desired: DesiredState) -> None:
    # Two 1g.18gb per GPU, four per H200 node: fifteen in one claim is nowhere (DynamicMIG could cut 14 at most).
    found, _ = run(
        desired,
        template("t", exactly("g", profile("1g.18gb"), extra="\n            count: 15")),
        deployment("d", 1, "t"),
    )
    assert codes(found) == ["MP632"]
    assert "at most 4 matching device(s) on one node" in found[0].message
    found, _ = run(
        desired,
        template("t", exactly("g", profile("1g.18gb"), extra="\n            count: 4")),
        deployment("d", 2, "t"),
    )
    assert codes(found) == [], found


def test_allocation_mode_all_takes_every_matching_device_of_the_node(desired: DesiredState) -> None:
    all_1g = exactly("g", profile("1g.18gb"), extra="\n            allocationMode: All")
    found, summaries = run(desired, template("t", all_1g), deployment("d", 2, "t"))
    assert found == [] and claims_summary(summaries, "d")["planFits"] == 2  # one pod per H200 node
    found, _ = run(desired, template("t", all_1g), deployment("d", 3, "t"))
    assert codes(found) == ["MP613"]
    # Another workload took five 1g.18gb (four on the first H200 node, one on the second): All fits nowhere now.
    found, _ = run(
        desired,
        template("one", exactly("g", profile("1g.18gb"))),
        deployment("e", 5, "one"),
        template("t", all_1g),
        deployment("d", 1, "t"),
    )
    assert codes(found) == ["MP613"] and "0 of its 1 pods" in found[0].message, found


def test_first_available_falls_back_to_the_next_subrequest(desired: DesiredState) -> None:
    request = (
        "        - name: g\n          firstAvailable:\n"
        "            - name: big\n              deviceClassName: mig.nvidia.com\n"
        f'              selectors: [{{cel: {{expression: "{profile("7g.141gb")}"}}}}]\n'
        "            - name: small\n              deviceClassName: mig.nvidia.com\n"
        f'              selectors: [{{cel: {{expression: "{profile("2g.35gb")}"}}}}]\n'
    )
    found, summaries = run(desired, template("t", request), deployment("d", 4, "t"))
    assert found == [] and claims_summary(summaries, "d")["planFits"] == 4
    found, _ = run(desired, template("t", request), deployment("d", 5, "t"))
    assert codes(found) == ["MP613"]


def test_match_attribute_keeps_a_claims_devices_on_one_gpu(desired: DesiredState) -> None:
    two = exactly("a", profile("3g.71gb")) + exactly("b", profile("2g.35gb"))
    same_gpu = "        - {matchAttribute: gpu.nvidia.com/parentUUID}\n"
    found, summaries = run(desired, template("t", two, same_gpu), deployment("d", 4, "t"))
    assert found == [] and claims_summary(summaries, "d")["planFits"] == 4
    # 3g.71gb with 4g.40gb on one GPU: the plan cuts them on different models, so never together.
    other = exactly("a", profile("3g.71gb")) + exactly("b", profile("4g.40gb"))
    found, _ = run(desired, template("t", other), deployment("d", 1, "t"))
    assert codes(found) == ["MP632"]
    # An attribute no device carries: the constraint can never be met (NVIDIA's driver publishes no `index`).
    found, _ = run(
        desired, template("t", two, "        - {matchAttribute: gpu.nvidia.com/index}\n"), deployment("d", 1, "t")
    )
    assert codes(found) == ["MP632"] and "gpu.nvidia.com/index" in found[0].message
    # Without the constraint the two could come from two GPUs; with it on a single request, it changes nothing.
    found, _ = run(
        desired,
        template("t", two, "        - {matchAttribute: gpu.nvidia.com/parentUUID, requests: [a]}\n"),
        deployment("d", 4, "t"),
    )
    assert found == []


def test_two_constraints_on_one_attribute_each_hold_their_own_value(desired: DesiredState) -> None:
    # a+b on one GPU, c+d on one GPU: one 3g.71gb per GPU, so the two pairs sit on two different GPUs of a node.
    four = (
        exactly("a", profile("3g.71gb"))
        + exactly("b", profile("2g.35gb"))
        + exactly("c", profile("3g.71gb"))
        + exactly("d", profile("2g.35gb"))
    )
    pairs = (
        "        - {matchAttribute: gpu.nvidia.com/parentUUID, requests: [a, b]}\n"
        "        - {matchAttribute: gpu.nvidia.com/parentUUID, requests: [c, d]}\n"
    )
    found, summaries = run(desired, template("t", four, pairs), deployment("d", 2, "t"))
    assert found == [] and claims_summary(summaries, "d")["planFits"] == 2
    one_gpu = "        - {matchAttribute: gpu.nvidia.com/parentUUID}\n"
    found, _ = run(desired, template("t", four, one_gpu), deployment("d", 1, "t"))
    assert codes(found) == ["MP632"], found  # 2 x 3g.71gb + 2 x 2g.35gb is more than one H200 GPU, even re-cut


def test_a_daemonset_needs_devices_on_every_node_it_selects(desired: DesiredState) -> None:
    found, _ = run(desired, template("t", exactly("g", profile("1g.18gb"))), deployment("d", 0, "t", kind="DaemonSet"))
    assert codes(found) == ["MP613"]
    assert "gpu-a100-01" in found[0].message and "gpu-h100-01" in found[0].message


# --- classes, DynamicMIG, values only the node knows -------------------------------------------------


def test_rendered_device_classes_can_be_injected(desired: DesiredState) -> None:
    rendered = {
        "metadata": {"name": "mig-1g.18gb"},
        "spec": {
            "selectors": [
                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'mig' && " + profile("1g.18gb")}}
            ]
        },
    }
    docs = (template("t", exactly("g", cls="mig-1g.18gb")), deployment("d", 9, "t"))
    found, _ = run(desired, *docs)
    assert codes(found) == ["MP628"]
    found, _ = run(desired, *docs, device_classes=[rendered])
    assert codes(found) == ["MP613"] and "hold 8 such pods" in found[0].message


def test_a_profile_the_plan_never_cuts_is_named_dynamic_mig_only(desired: DesiredState) -> None:
    found, _ = run(desired, template("t", exactly("g", profile("1g.35gb"))), deployment("d", 1, "t"))
    assert codes(found) == ["MP633"] and "1g.35gb" in found[0].message
    # By capacity: a 1g device on memory slice 7 — no H200 placement of any 1g profile starts there.
    slice7 = "'memorySlice7' in device.capacity['gpu.nvidia.com'] && " + profile("1g.18gb")
    found, _ = run(desired, template("t", exactly("g", slice7)), deployment("d", 1, "t"))
    assert codes(found) == ["MP632"]


def test_dynamic_mig_nodes_publish_every_profile_at_every_placement(desired: DesiredState) -> None:
    node = desired.nodes["gpu-h200-01"]
    whole = dataclasses.replace(
        node,
        gpus=tuple(dataclasses.replace(g, mig_enabled=False, partitions=(), placements=()) for g in node.gpus),
        layout_writer="dra-dynamic-mig",
    )
    dyn = dataclasses.replace(desired, nodes={**desired.nodes, "gpu-h200-01": whole})
    found, summaries = run(dyn, template("t", exactly("g", profile("1g.35gb"))), deployment("d", 8, "t"))
    # 1g.35gb takes two memory slices: four per H200 GPU at most, eight on the node.
    assert found == [] and claims_summary(summaries, "d")["planFits"] == 8
    found, _ = run(dyn, template("t", exactly("g", profile("1g.35gb"))), deployment("d", 9, "t"))
    assert codes(found) == ["MP613"]


def test_memory_is_compared_as_a_quantity(desired: DesiredState) -> None:
    h200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200' && "
    big = h200 + "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0"
    found, summaries = run(desired, template("t", exactly("g", big)), deployment("d", 4, "t"))
    assert found == [] and claims_summary(summaries, "d")["planFits"] == 4  # the four 3g.71gb (69.5 GiB)
    found, _ = run(desired, template("t", exactly("g", big)), deployment("d", 5, "t"))
    assert codes(found) == ["MP613"]


def test_a_value_only_the_node_knows_is_assumed_and_said_once(desired: DesiredState) -> None:
    expr = "device.attributes['gpu.nvidia.com'].uuid.startsWith('MIG-') && " + profile("2g.35gb")
    found, _ = run(desired, template("t", exactly("g", expr)), deployment("d", 4, "t"), deployment("e", 1, "t"))
    assert [d.code for d in found] == ["MP631", "MP613"], found
    assert found[0].extra["unknown"] == ["uuid"] and found[0].line == 11


def test_a_selector_that_fails_at_run_time_is_said_at_its_line(desired: DesiredState) -> None:
    found, _ = run(
        desired, template("t", exactly("g", "device.attributes['gpu.nvidia.com'].profile")), deployment("d", 1, "t")
    )
    assert codes(found) == ["MP630"] and "not a boolean" in found[0].message and found[0].line == 11


def test_a_class_that_reads_an_attribute_whole_gpus_lack_fails_the_allocation(desired: DesiredState) -> None:
    # `profile` is a MIG device's attribute: on the H100's whole GPU the lookup fails, as the scheduler's does.
    sloppy = {"metadata": {"name": "c"}, "spec": {"selectors": [{"cel": {"expression": profile("1g.18gb")}}]}}
    found, _ = run(desired, template("t", exactly("g", cls="c")), deployment("d", 1, "t"), device_classes=[sloppy])
    assert codes(found) == ["MP630"] and found[0].line == 18  # the pod template spec: the class has no line


def test_a_claim_refused_where_it_is_written_is_not_missing_where_it_is_used(desired: DesiredState) -> None:
    found, _ = run(desired, template("t", exactly("g", "device.driver ==")), deployment("d", 1, "t"))
    assert codes(found) == ["MP629"]


# --- worst values ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_yaml",
    [
        exactly("g", extra="\n            count: -1"),
        exactly("g", extra="\n            count: true"),
        exactly("g", extra="\n            count: '2'"),
        exactly("g", extra="\n            allocationMode: Some"),
        exactly("g", extra="\n            allocationMode: All\n            count: 2"),
        "        - name: g\n          exactly: [1]\n",
        "        - name: g\n          firstAvailable: []\n",
        "        - name: g\n          firstAvailable:\n" + "            - {name: s, deviceClassName: x}\n" * 9,
        "".join(exactly(f"r{i}") for i in range(33)),
        exactly("g") + exactly("g"),
        "        - exactly: {deviceClassName: mig.nvidia.com}\n",
    ],
)
def test_a_request_the_api_server_refuses_is_mp626(desired: DesiredState, request_yaml: str) -> None:
    found, _ = run(desired, template("t", request_yaml), deployment("d", 1, "t"))
    assert codes(found) and set(codes(found)) == {"MP626"}, found


def test_a_huge_count_or_replica_number_is_judged_not_enumerated(desired: DesiredState) -> None:
    found, _ = run(
        desired, template("t", exactly("g", extra="\n            count: 1000000000000")), deployment("d", 10**9, "t")
    )
    assert codes(found) == ["MP632"]
    found, _ = run(desired, template("t", exactly("g", profile("1g.18gb"))), deployment("d", 10**12, "t"))
    assert codes(found) == ["MP613"] and "hold 8 such pods" in found[0].message


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("x" * 10241, "characters long"),
        ("'" + "a" * 10300 + "' == 'a'", "characters long"),
        ("(" * 25 + "true" + ")" * 25, "nests brackets"),
        ("!" * 400 + "true", "nested too deeply"),
        (" + ".join(["1"] * 400) + " == 400", "nested too deeply"),
        ("L.all(a, L.all(b, L.all(c, a == c)))".replace("L", "[" + ",".join(["1"] * 100) + "]"), "too costly"),
        ("device.driver ==", "does not compile"),
        ("\u202e", "does not compile"),
    ],
)
def test_hostile_selectors_are_refused_before_they_run(desired: DesiredState, expression: str, why: str) -> None:
    found, _ = run(desired, template("t", exactly("g", expression.replace('"', "'"))), deployment("d", 1, "t"))
    assert codes(found) == ["MP629"] and why in found[0].message, found
    assert len(found[0].message) < 600  # the expression is not echoed whole


def test_a_selector_valid_for_the_api_server_but_too_costly_to_interpret_is_not_judged(desired: DesiredState) -> None:
    costly = "[" + ",".join(["1"] * 100) + "].all(a, [" + ",".join(["1"] * 100) + "].all(b, a == b))"
    found, _ = run(desired, template("t", exactly("g", costly)), deployment("d", 1, "t"))
    assert codes(found) == ["MP635"] and "estimated cost" in found[0].message


def test_a_pathological_regex_runs_on_re2(desired: DesiredState) -> None:
    expr = "device.attributes['gpu.nvidia.com'].productName.matches('(a|aa)+(b|c)*$') || " + profile("1g.18gb")
    found, summaries = run(desired, template("t", exactly("g", expr)), deployment("d", 8, "t"))
    assert found == [] and claims_summary(summaries, "d")["planFits"] == 8


def test_pod_claims_entries_malformed(desired: DesiredState) -> None:
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  containers: [{name: c}]\n"
        "  resourceClaims:\n    - {name: a, source: {resourceClaimTemplateName: t}}\n    - {resourceClaimName: x}\n"
        "    - {name: b, resourceClaimName: [1]}\n"
    )
    found, _ = run(desired, pod)
    assert codes(found) == ["MP626", "MP626", "MP626"]
    assert "pre-1.31" in found[0].message and found[0].line == 7
    many = "".join(f"    - {{name: c{i}, resourceClaimName: x}}\n" for i in range(129))
    found, _ = run(
        desired,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  resourceClaims:\n" + many,
    )
    assert codes(found) == ["MP626"]


def test_the_selectors_compiled_in_a_run_are_bounded(desired: DesiredState, monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.logic.workloads import draclaims

    monkeypatch.setattr(draclaims.Compiled, "MAX_SELECTORS", 4)  # NVIDIA's chart's three classes, and one more
    docs = [template(f"t{i}", exactly("g", profile(f"{i}g.18gb"))) for i in (1, 2)]
    found, _ = run(desired, *docs, deployment("a", 1, "t1"), deployment("b", 1, "t2"))
    assert codes(found) == ["MP635"] and found[0].line == 23, found  # the second template's selector; t1 is judged
