"""Read what `migplan import` needs from a cluster, through the official client (list calls only).

Nodes, pods in all namespaces, the ClusterPolicy, the GPU Operator's namespace (the namespace of its
device-plugin DaemonSet) and the ConfigMap of mig-parted configs the ClusterPolicy points at
(`spec.migManager.config.name`, else the operator's `default-mig-parted-config`). Every request goes
through KubeCluster's paginated, timed, retried LIST; API failures are MigplanErrors (MP55x) the
command turns into MP580. The observed-layout annotation is decoded here with the agent-mode decoder
(`kubeagentmode.decode_observed`), never parsed by hand; what it refuses becomes `observed_error`.
The ResourceSlices of NVIDIA's DRA driver (resource.k8s.io/v1, paginated, the server filtering on `spec.driver`;
404 on a server without DRA: none) are read per node by the same reader as the controller's
(`kubeobserve.dra_from_slices`); a node they name is a GPU node even without GFD labels.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import config

from reconciler.adapters.kube import agentmode as kubeagentmode
from reconciler.adapters.kube import observe as kubeobserve
from reconciler.adapters.kube.cluster import CP_GROUP, CP_PLURAL, CP_VERSION, KubeCluster, NotFound
from reconciler.logic.adoption.adopt import ClusterFacts, ConfigSource, NodeFacts, parse_configs
from reconciler.logic.codecs.migparted import CONFIG_KEY
from reconciler.model.dra import NodeDra
from reconciler.model.errors import MigplanError
from reconciler.model.observed import ObservedPod

DEFAULT_NAMESPACE = "gpu-operator"
DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"  # the GPU Operator's name for it
DEFAULT_CLUSTER_POLICY = "cluster-policy"
# gpu-operator controllers/object_controls.go MigPartedDefaultConfigMapName (stack-facts §3.2)
DEFAULT_MIG_CONFIG_MAP = "default-mig-parted-config"
MIGPLAN_CONFIG_MAP = "migplan-mig-parted-config"
STRATEGY_DEFAULT = "single"  # the ClusterPolicy CRD's default for spec.mig.strategy


@dataclass(frozen=True, slots=True)
class ClusterRead:
    cluster: ClusterFacts
    nodes: tuple[NodeFacts, ...]
    configs: ConfigSource
    not_found: tuple[str, ...] = ()  # node names asked for with --node that the cluster does not have


def context_cluster_name(kubeconfig: str | None) -> str | None:
    """The cluster name of the kubeconfig's current context (None when it cannot be told)."""
    try:
        _, current = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    except Exception:  # a kubeconfig the client already accepted; the name is only a default
        return None
    ctx = (current or {}).get("context") or {}
    name = ctx.get("cluster")
    return str(name) if name else None


def read_cluster(kube: KubeCluster, *, cluster_name: str, only: Collection[str] = ()) -> ClusterRead:
    nodes_json = list(kube.list_objects("list nodes", kube.core.list_node))
    policies = sorted(
        kube.list_objects(
            "list clusterpolicies",
            kube.custom.list_cluster_custom_object,
            group=CP_GROUP,
            version=CP_VERSION,
            plural=CP_PLURAL,
        ),
        key=lambda o: str((o.get("metadata") or {}).get("name", "")),
    )
    daemonsets = list(
        kube.list_objects(
            f"list daemonsets {DEVICE_PLUGIN_DAEMONSET}",
            kube.apps.list_daemon_set_for_all_namespaces,
            field_selector=f"metadata.name={DEVICE_PLUGIN_DAEMONSET}",
        )
    )
    notes: list[str] = []
    namespace = DEFAULT_NAMESPACE
    if daemonsets:
        namespace = str((daemonsets[0].get("metadata") or {}).get("namespace") or DEFAULT_NAMESPACE)
        notes.append(f"gpuOperator.namespace: where DaemonSet {DEVICE_PLUGIN_DAEMONSET} runs ({namespace}).")
    else:
        notes.append(f"No DaemonSet {DEVICE_PLUGIN_DAEMONSET} found: gpuOperator.namespace is the default.")
    cp = kubeobserve.cluster_policy_from_json(policies[0]) if policies else None
    if cp is None:
        notes.append("No ClusterPolicy found: migStrategy and clusterPolicy are the GPU Operator's defaults.")
        strategy, cp_name, cm_name = STRATEGY_DEFAULT, DEFAULT_CLUSTER_POLICY, None
    else:
        strategy = cp.mig_strategy or STRATEGY_DEFAULT
        cp_name, cm_name = cp.name, cp.mig_manager_config_name
        notes.append(f"migStrategy: ClusterPolicy {cp.name} spec.mig.strategy ({cp.mig_strategy or 'unset: default'}).")
        if len(policies) > 1:
            notes.append(f"{len(policies)} ClusterPolicies: {cp.name} (the first by name) was read.")
    source_cm = cm_name or DEFAULT_MIG_CONFIG_MAP
    obj = kube.find_one(
        f"list configmaps {namespace}/{source_cm}", kube.core.list_namespaced_config_map, source_cm, namespace=namespace
    )
    data: Mapping[str, Any] = (obj or {}).get("data") or {}
    text = data.get(CONFIG_KEY)
    configs = parse_configs(f"ConfigMap {namespace}/{source_cm}", text if isinstance(text, str) else None)
    # migplan's own ConfigMap when the ClusterPolicy already points at one; else its default name.
    mig_config_map = cm_name if cm_name and cm_name != DEFAULT_MIG_CONFIG_MAP else MIGPLAN_CONFIG_MAP
    notes.append(
        f"migConfigMap: {mig_config_map} (the ConfigMap migplan will write; the configs were read from {source_cm})."
    )
    cluster = ClusterFacts(
        name=cluster_name,
        strategy=strategy,
        namespace=namespace,
        cluster_policy=cp_name,
        device_plugin_daemonset=DEVICE_PLUGIN_DAEMONSET,
        mig_config_map=mig_config_map,
        notes=tuple(notes),
    )
    wanted = set(only)
    pods_by_node: dict[str, list[ObservedPod]] = {}
    for pj in kube.list_objects("list pods", kube.core.list_pod_for_all_namespaces):
        pod = kubeobserve.gpu_pod_from_json(pj)
        if pod is not None and pod.node is not None:
            pods_by_node.setdefault(pod.node, []).append(pod)
    dra = _dra_nodes(kube)
    facts: list[NodeFacts] = []
    seen: set[str] = set()
    for nj in nodes_json:
        node = kubeobserve.node_from_json(nj)
        seen.add(node.name)
        if (wanted and node.name not in wanted) or not (node.is_gpu_node or node.name in dra):
            continue
        observed, error = None, None
        text_obs = node.annotations.get(kubeagentmode.OBSERVED)
        if text_obs is not None:
            try:
                observed = kubeagentmode.decode_observed(str(text_obs))
            except MigplanError as exc:
                error = str(exc)
        facts.append(NodeFacts(node, tuple(pods_by_node.get(node.name, ())), observed, error, dra.get(node.name)))
    return ClusterRead(cluster, tuple(facts), configs, tuple(sorted(wanted - seen)))


def _dra_nodes(kube: KubeCluster) -> dict[str, NodeDra]:
    """node -> what NVIDIA's DRA driver publishes for it; {} on a server without resource.k8s.io/v1 (404)."""
    try:
        slices = list(
            kube.list_objects(
                "list resourceslices",
                kube.resource.list_resource_slice,
                field_selector=f"spec.driver={kubeobserve.DRA_DRIVER}",
            )
        )
    except NotFound:
        return {}
    return kubeobserve.dra_from_slices(slices)
