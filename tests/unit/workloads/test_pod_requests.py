"""check-workloads counts one pod's devices as kube-scheduler does (k8s.io/component-helpers/resource helpers.go,
PodRequests -> AggregateContainerRequests, called by the NodeResourcesFit plugin): app containers add up, a sidecar
(init container with restartPolicy: Always) adds to them and to every init container after it, the larger of the
two wins, spec.overhead comes on top, and pod-level resources never touch an extended resource.

Three checks: the worked examples of KEP-753 ("Resources calculation for scheduling and pod admission") with their
numbers written out; a corpus of 600 generated pod shapes against `_scheduler_pod_requests`, the scheduler's loop
transcribed statement by statement (its own variable names) so it shares nothing with workloads.per_pod; and the
end-to-end verdict: a Deployment whose pods carry a GPU sidecar reaches the plan's capacity at half the replicas."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.workloads import workloads
from reconciler.logic.workloads.manifests import read_manifests
from reconciler.model.inventory import DesiredState

MIG_1G = "nvidia.com/mig-1g.18gb"
MIG_3G = "nvidia.com/mig-3g.71gb"
GPU = "nvidia.com/gpu"


def _container(name: str, ask: dict[str, int], *, sidecar: bool = False, limits_only: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "x"}
    if ask:
        c["resources"] = {"limits": dict(ask)} if limits_only else {"limits": dict(ask), "requests": dict(ask)}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def _pod(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] = (),  # type: ignore[assignment]
    overhead: dict[str, int] | None = None,
    pod_level: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = list(init)
    if overhead:
        spec["overhead"] = overhead
    if pod_level:
        spec["resources"] = pod_level
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": spec}


def _per_pod(pod: dict[str, Any]) -> dict[str, int]:
    manifests, diags = read_manifests(yaml.safe_dump(pod).encode(), file="pod.yaml")
    assert not diags and len(manifests) == 1
    workload, more = workloads.extract_workload(manifests[0])
    assert workload is not None and not more, more
    return workload.per_pod()


def _scheduler_pod_requests(pod: dict[str, Any]) -> dict[str, int]:
    """kubernetes staging/src/k8s.io/component-helpers/resource/helpers.go, for extended resources, as written there:
    aggregateContainerResourcesByFn (result, restartableInitContainerResources, initContainerResources), then
    PodRequests' applyPodLevelResources (supported: cpu, memory, hugepages-*) and `addResourceList(reqs, Overhead)`."""

    def requests(c: dict[str, Any]) -> dict[str, int]:
        res = c.get("resources", {})
        out = dict(res.get("limits", {}))  # API defaulting: requests default to limits (extended resources)
        out.update(res.get("requests", {}))
        return out

    def add(into: dict[str, int], other: dict[str, int]) -> None:
        for k, v in other.items():
            into[k] = into.get(k, 0) + v

    def max_into(into: dict[str, int], other: dict[str, int]) -> None:
        for k, v in other.items():
            if v > into.get(k, 0):
                into[k] = v

    spec = pod["spec"]
    result: dict[str, int] = {}
    for container in spec["containers"]:
        add(result, requests(container))
    restartable_init_container_resources: dict[str, int] = {}
    init_container_resources: dict[str, int] = {}
    for container in spec.get("initContainers", []):
        container_resources = requests(container)
        if container.get("restartPolicy") == "Always":
            add(result, container_resources)
            add(restartable_init_container_resources, container_resources)
            container_resources = restartable_init_container_resources
        else:
            combined: dict[str, int] = {}
            add(combined, container_resources)
            add(combined, restartable_init_container_resources)
            container_resources = combined
        max_into(init_container_resources, container_resources)
    max_into(result, init_container_resources)
    for name, quantity in spec.get("resources", {}).get("requests", {}).items():
        if name in ("cpu", "memory") or name.startswith("hugepages-"):
            result[name] = quantity
    add(result, spec.get("overhead") or {})
    return {k: v for k, v in result.items() if k.startswith("nvidia.com/") and v > 0}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        # KEP-753 example shapes, written out: app 1 + sidecar 1 = 2 (a sidecar runs beside the app)
        (_pod([_container("app", {MIG_1G: 1})], [_container("side", {MIG_1G: 1}, sidecar=True)]), {MIG_1G: 2}),
        # a plain init container of 1 runs before the app of 1: max(1, 1) = 1, not 2
        (_pod([_container("app", {MIG_1G: 1})], [_container("init", {MIG_1G: 1})]), {MIG_1G: 1}),
        # sidecar 1 then init 2: InitContainerUse = 1 + 2 = 3 > app 1 + sidecar 1 = 2
        (
            _pod(
                [_container("app", {MIG_1G: 1})],
                [_container("side", {MIG_1G: 1}, sidecar=True), _container("init", {MIG_1G: 2})],
            ),
            {MIG_1G: 3},
        ),
        # init 2 BEFORE the sidecar: it ran alone, 2; the app and sidecar then need 2
        (
            _pod(
                [_container("app", {MIG_1G: 1})],
                [_container("init", {MIG_1G: 2}), _container("side", {MIG_1G: 1}, sidecar=True)],
            ),
            {MIG_1G: 2},
        ),
        # limits without requests: requests default to limits for an extended resource
        (_pod([_container("app", {GPU: 2}, limits_only=True)]), {GPU: 2}),
        # overhead (RuntimeClass) is added on top
        (_pod([_container("app", {GPU: 1})], overhead={GPU: 1}), {GPU: 2}),
        # pod-level resources are cpu/memory only: a MIG device stays a container matter
        (_pod([_container("app", {MIG_3G: 1})], pod_level={"requests": {"cpu": "2", MIG_3G: 5}}), {MIG_3G: 1}),
        # restartPolicy: Always on an app container is not a sidecar (only init containers are)
        (_pod([_container("a", {MIG_1G: 1}, sidecar=True), _container("b", {MIG_1G: 1})]), {MIG_1G: 2}),
    ],
    ids=[
        "sidecar-adds",
        "init-max",
        "sidecar-then-init",
        "init-then-sidecar",
        "limits-default-requests",
        "overhead",
        "pod-level-ignored",
        "app-restart-policy",
    ],
)
def test_kep_753_examples(pod: dict[str, Any], expected: dict[str, int]) -> None:
    assert _per_pod(pod) == expected
    assert _scheduler_pod_requests(pod) == expected  # the transcription agrees with the worked numbers too


def _random_pod(rng: random.Random) -> dict[str, Any]:
    names = iter(f"c{i}" for i in range(100))

    def ask() -> dict[str, int]:
        return {r: rng.randint(0, 3) for r in rng.sample([MIG_1G, MIG_3G, GPU], rng.randint(0, 2))}

    containers = [_container(next(names), ask(), limits_only=rng.random() < 0.2) for _ in range(rng.randint(1, 3))]
    init = [
        _container(next(names), ask(), sidecar=rng.random() < 0.5, limits_only=rng.random() < 0.2)
        for _ in range(rng.randint(0, 4))
    ]
    overhead = {GPU: rng.randint(0, 1)} if rng.random() < 0.15 else None
    return _pod(containers, init, overhead)


def test_a_corpus_of_pod_shapes_matches_the_schedulers_loop() -> None:
    rng = random.Random(753)
    shapes = [_random_pod(rng) for _ in range(600)]
    sidecar_shapes = sum(
        1 for p in shapes if any(c.get("restartPolicy") == "Always" for c in p["spec"].get("initContainers", []))
    )
    assert sidecar_shapes > 200  # the corpus does exercise sidecars
    wrong = [(p, _per_pod(p), _scheduler_pod_requests(p)) for p in shapes if _per_pod(p) != _scheduler_pod_requests(p)]
    assert not wrong, wrong[:3]


@pytest.fixture(scope="module")
def desired() -> DesiredState:
    result = validate_inventory(read_inventory_dir(resources.inventory_dir()), catalog=load_catalog())
    assert result.desired is not None
    return result.desired


def _deployment(replicas: int) -> bytes:
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "rag", "namespace": "ml"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "rag"}},
            "template": {
                "metadata": {"labels": {"app": "rag"}},
                "spec": {
                    "initContainers": [_container("embedder", {MIG_1G: 1}, sidecar=True)],
                    "containers": [_container("app", {MIG_1G: 1})],
                },
            },
        },
    }
    return yaml.safe_dump(doc).encode()


def test_a_gpu_sidecar_halves_the_pods_the_plan_can_run(desired: DesiredState) -> None:
    capacity = sum(
        1
        for n in desired.nodes.values()
        for g in n.gpus
        if g.mig_enabled
        for p in g.partitions
        if p.profile == "1g.18gb"
    )
    nodes = workloads.plan_nodes(desired, load_catalog())

    def codes(replicas: int) -> set[str]:
        manifests, _ = read_manifests(_deployment(replicas), file="d.yaml")
        found, _ = workloads.check_workloads(manifests, desired=desired, nodes=nodes)
        return {d.code for d in found}

    assert capacity >= 2
    assert "MP613" not in codes(capacity // 2)  # 2 devices a pod: exactly what the plan holds
    assert "MP613" in codes(capacity // 2 + 1)  # one pod more than that can never run
