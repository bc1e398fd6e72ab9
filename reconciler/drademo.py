"""`migplan demo --dra`: a re-cut on a DRA-static node, from the merge to converged slices, no cluster needed.

    migplan demo --dra [--workdir DIR] [-o text|json]

The cluster twin runs one GPU node under the GPU Operator's GPUCluster (DRA, DynamicMIG off): NVIDIA's DRA driver
(its chart's kubelet plugin) publishes the node's static MIG devices, and no device plugin runs there. Every actor is
production code talking to the twin through its real interface: the controller's cycle (reconcile_once through
the official Kubernetes client), the node agent (NVML) and the node observer (NVML and the kubelet's PodResources).

1. before the merge: the controller renders one DeviceClass per planned profile (`nvidia.com/mig-<profile>`);
2. the merge re-cuts GPU 1 from 3g/2g/1g/1g into 4g.71gb + 3g.71gb; the controller publishes the layout for the
   node agent and renders the class of the new profile; a pod written for the device plugin
   (`nvidia.com/mig-4g.71gb: 1`) waits: no such device exists yet;
3. the node agent re-cuts through NVML; the DRA driver has not rescanned (its slices still show the old cut);
4. the controller restarts the node's DRA kubelet plugin (records it, deletes its pod; the DaemonSet recreates it)
   and the slices publish exactly the plan, name for name;
5. the scheduler places the pod through the rendered DeviceClass, on the new 4g.71gb partition; the next cycle
   finds the node in sync and writes nothing.
Exit code: 0 when all of that happened, 1 when a step did not (the step is named), 2 when the work directory
cannot be written.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import yaml

if TYPE_CHECKING:
    from reconciler.engine import CycleResult
    from reconciler.model.inventory import DesiredState
    from reconciler.twin.cluster import ClusterTwin

NODE = "gpu-h200-dra-01"
RESOURCE = "nvidia.com/mig-4g.71gb"
GPU0 = {"index": 0, "model": "H200-141GB", "mig": {"enabled": True, "partitions": [{"profile": "7g.141gb"}]}}
BEFORE = [*("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb")]
AFTER = ["4g.71gb", "3g.71gb"]
POD_WAIT_SECONDS = 20.0
# A pod written for the device plugin, as it runs today on a device-plugin node.
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "llm-0"},
    "spec": {
        "containers": [{"name": "main", "image": "registry.example/llm:1", "resources": {"limits": {RESOURCE: "1"}}}]
    },
}


class DemoStepFailed(Exception):
    """A step of the DRA demo did not happen as it should; the message names it."""


def write_inventory(root: Path, gpu1: list[str]) -> Path:
    """The demo's inventory root: one DRA node, GPU 0 whole, GPU 1 cut as `gpu1`; the node agent applies layouts."""
    (root / "nodes").mkdir(parents=True, exist_ok=True)
    cluster = {
        "apiVersion": "migplan/v1",
        "kind": "Cluster",
        "metadata": {"name": "dra-demo"},
        "spec": {"migStrategy": "mixed", "apply": {"mode": "agent", "configPropagationSeconds": 0}},
    }
    (root / "cluster.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    gpu1_spec = {
        "index": 1,
        "model": "H200-141GB",
        "mig": {"enabled": True, "partitions": [{"profile": p} for p in gpu1]},
    }
    node = {"apiVersion": "migplan/v1", "kind": "Node", "metadata": {"name": NODE}, "spec": {"gpus": [GPU0, gpu1_spec]}}
    (root / "nodes" / f"{NODE}.yaml").write_text(yaml.safe_dump(node, sort_keys=False))
    return root


class _Scenario:
    """The twin and the production actors the demo drives (each a real adapter over the twin's interfaces)."""

    def __init__(self, twin: ClusterTwin) -> None:
        self.twin = twin

    def desired(self, root: Path) -> DesiredState:
        from reconciler.commands.reconcile import load_desired

        desired, diagnostics = load_desired(root)
        if desired is None:
            raise DemoStepFailed("the demo inventory does not validate: " + "; ".join(map(str, diagnostics)))
        return desired

    def cycle(self, desired: DesiredState) -> CycleResult:
        from reconciler.adapters.kube.cluster import KubeCluster
        from reconciler.engine import reconcile_once

        cluster = KubeCluster.from_kubeconfig(str(self.twin.kubeconfig))
        try:
            result = reconcile_once(desired=desired, cluster=cluster, now=datetime.now(UTC))
        finally:
            cluster.close()
        if result.errors:
            raise DemoStepFailed("a cycle failed: " + "; ".join(map(str, result.errors)))
        self.twin.settle()
        return result

    def _core(self) -> Any:
        from kubernetes import client

        from reconciler.controller.loop import kube_configuration

        return client.CoreV1Api(client.ApiClient(kube_configuration(str(self.twin.kubeconfig))))

    def observe(self) -> None:
        from reconciler.adapters.kube.agentmode import KubeNodeState
        from reconciler.adapters.nvml import NvmlGpu
        from reconciler.adapters.podresources import KubeletPodResources
        from reconciler.observer import publish_pass

        publish_pass(
            open_gpus=lambda: NvmlGpu(nvml=self.twin.nvml(NODE)),
            holders=KubeletPodResources(str(self.twin.pod_resources_socket(NODE)), timeout_seconds=5),
            node_state=KubeNodeState(self._core(), heartbeat_seconds=300),
            node=NODE,
            clock=lambda: datetime.now(UTC),
        )

    def agent(self) -> str:
        from reconciler.adapters.kube.agentmode import KubeNodeState
        from reconciler.adapters.nvml import NvmlGpu
        from reconciler.adapters.podresources import KubeletPodResources
        from reconciler.agent import actuate_once

        with NvmlGpu(nvml=self.twin.nvml(NODE)) as gpus:
            result = actuate_once(
                gpus=gpus,
                node_state=KubeNodeState(self._core()),
                node=NODE,
                holders=KubeletPodResources(str(self.twin.pod_resources_socket(NODE)), timeout_seconds=5),
            )
        self.twin.settle()
        return str(result.state.value if result.state is not None else "none")

    def published(self) -> list[str]:
        slices = self.twin.store.list("resourceslices.resource.k8s.io", field_selector=f"spec.nodeName={NODE}")
        return sorted(d["name"] for s in slices for d in s["spec"].get("devices") or ())

    def pod(self) -> dict[str, Any]:
        pod: dict[str, Any] = self.twin.store.get("pods", "llm-0", "default")
        return pod


def _writes(result: CycleResult) -> list[str]:
    return [c.headline for c in result.applied]


def run_dra_demo(
    workdir: Path | None, *, output: str, say: Callable[[str], None], emit: Callable[[str], None] | None = None
) -> int:
    """Run the scenario of the module docstring; print each step (text, through `say`) or a summary (json, through
    `emit`, stdout). Returns the exit code."""
    from reconciler.twin.cluster import ClusterTwin

    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="migplan-dra-demo-"))
    try:
        before_root = write_inventory(base / "inventory-before", BEFORE)
        after_root = write_inventory(base / "inventory-after", AFTER)
    except OSError as exc:
        say(f"error: cannot write the demo inventory under {base}: {exc.strerror or exc}")
        return 2
    steps: list[dict[str, Any]] = []

    def step(title: str, **facts: Any) -> None:
        steps.append({"step": title, **facts})
        if output == "text":
            say(f"* {title}")
            for k, v in facts.items():
                say(f"    {k}: {', '.join(map(str, v)) if isinstance(v, list) else v}")

    ok = True
    try:
        with ClusterTwin.from_inventory(before_root, tls=False, kubeconfig=base / "kubeconfig") as twin:
            twin.settle()
            twin.store.patch("nodes", NODE, {"metadata": {"labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}})
            twin.install_gpu_cluster(dynamic_mig=False)
            twin.install_dra_driver_chart([NODE], None)
            twin.dra_driver(NODE).start_plugin()
            twin.settle()
            s = _Scenario(twin)
            before = s.published()
            step("a DRA-static node: NVIDIA's DRA driver publishes its MIG devices", node=NODE, published=before)
            s.observe()
            first = s.cycle(s.desired(before_root))
            step("controller cycle on the inventory before the merge", writes=_writes(first) or ["none"])

            desired = s.desired(after_root)
            step(f"merge: GPU 1 of {NODE} re-cut", before=" + ".join(BEFORE), after=" + ".join(AFTER))
            merged = s.cycle(desired)
            step(
                "controller cycle on the merge: layout for the node agent, classes of the plan", writes=_writes(merged)
            )
            twin.store.create(
                "pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "llm-0"},
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.example/llm:1",
                                "resources": {"limits": {RESOURCE: "1"}},
                            }
                        ]
                    },
                },
                "default",
            )
            twin.settle()
            step(
                f"pod default/llm-0 asks {RESOURCE}: 1 (a device-plugin pod spec)",
                node=s.pod()["spec"].get("nodeName") or "none yet (no such device published)",
            )
            state = s.agent()
            step("node agent re-cuts GPU 1 through NVML", state=state, published_still=s.published())
            restart = s.cycle(desired)
            step("controller cycle: NVIDIA's DRA kubelet plugin restarted", writes=_writes(restart))
            after = s.published()
            step("the slices republish the plan, name for name", published=after)
            deadline = time.monotonic() + POD_WAIT_SECONDS
            while not s.pod()["spec"].get("nodeName") and time.monotonic() < deadline:
                time.sleep(0.05)
                twin.settle()
            pod = s.pod()
            ext = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
            claim_name = ext.get("resourceClaimName")
            device = "none"
            cls = "none"
            if claim_name:
                claim = twin.store.get("resourceclaims.resource.k8s.io", claim_name, "default")
                results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
                device = ", ".join(r["device"] for r in results) or "none"
                cls = claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"]
            step(
                "the scheduler places the pod through the rendered DeviceClass",
                node=pod["spec"].get("nodeName") or "none",
                phase=(pod.get("status") or {}).get("phase", "?"),
                claim=claim_name or "none",
                deviceClass=cls,
                device=device,
            )
            s.observe()
            done = s.cycle(desired)
            report = done.report
            status = next((n.status.value for n in report.nodes if n.name == NODE), "?") if report is not None else "?"
            step("next controller cycle", writes=_writes(done) or ["none"], status=status)
            new_devices = sorted(set(after) - set(before))
            checks = {
                "the slices equal what NVML shows": after != before,
                "the pod runs on a partition the re-cut created": device in new_devices,
                "the node is in sync and nothing more is written": status == "InSync" and not done.applied,
            }
            for what, held in checks.items():
                if not held:
                    ok = False
                    step(f"NOT AS EXPECTED: {what}")
    except DemoStepFailed as exc:
        ok = False
        step(f"NOT AS EXPECTED: {exc}")
    if output == "json":
        (emit or say)(orjson.dumps({"converged": ok, "node": NODE, "steps": steps}).decode())
    else:
        say("outcome: " + ("converged: the pod runs on the new partition" if ok else "not converged (see above)"))
    return 0 if ok else 1
