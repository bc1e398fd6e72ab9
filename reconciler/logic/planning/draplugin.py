"""DRA-static nodes, after the agent's re-cut: restart NVIDIA's DRA kubelet plugin once, then wait for the slices. Pure.

The layout of a DRA-static node goes through migplan's node agent (reconciler.logic.drift.drastatic says which
nodes, reconciler/logic/planning/agentchanges.py publishes and guards it). The plugin enumerates the MIG devices
only when it starts, so once the agent reports `success` for the published layout and the node's ResourceSlices do
not publish the plan, the plugin is restarted: two writes in the node's group, in this order,

1. the record `migplan.io/dra-plugin-restart` on the Node: the layout it is for, the pod and its uid, the time;
2. the delete of that pod (uid precondition; its DaemonSet creates a new one, whose plugin publishes again).

Next cycles read the record: the same pod still there means the delete was never made (the controller died
between 1 and 2), so it is made now, same pod, same record; another pod means the restart is done, and nothing is
written again for that layout. Slices that still differ STALE_AFTER after the record are MP591, with the way out.
A node without a plugin pod is MP592, an unreadable record MP593: nothing is written there on a guess.
"""

from __future__ import annotations

from datetime import datetime

from reconciler.catalog import Catalog, load_catalog
from reconciler.logic.drift import drastatic
from reconciler.logic.observe import observation
from reconciler.logic.planning import agentdrain, desiredcodec
from reconciler.logic.planning.agentplan import desired_from_node_spec
from reconciler.model.dra import DraPluginPod
from reconciler.model.inventory import DesiredState
from reconciler.model.observed import ObservedNode, ObservedState
from reconciler.model.plans import Action, Change, Kind

STALE, NO_POD, BAD_RECORD = "MP591", "MP592", "MP593"


def plugin_changes(
    desired: DesiredState, observed: ObservedState, now: datetime, nodes: frozenset[str], unreadable: frozenset[str]
) -> list[Change]:
    """The plugin restarts (and the findings held as SKIP changes with a code) of the DRA-static `nodes`, by name."""
    catalog = load_catalog()
    out: list[Change] = []
    for name in sorted(nodes):
        node = observed.nodes.get(name)
        if node is None or name in unreadable or name not in desired.nodes:
            continue
        out.extend(_node_changes(desired, observed, node, now, catalog))
    return out


def _node_changes(
    desired: DesiredState, observed: ObservedState, node: ObservedNode, now: datetime, catalog: Catalog
) -> list[Change]:
    name = node.name
    layout = agentdrain.published_layout(node)
    if layout is None or not agentdrain.agent_reported_success(node, layout):
        return []  # not built yet: the agent's pass comes first
    obs, _error = observation.read_observation(node.annotations)
    minors = {g.index: g.minor for g in obs.gpus if g.minor is not None} if obs is not None else {}
    if drastatic.slices_match(desired.nodes[name], observed.dra.get(name), minors):
        return []  # the slices publish the plan: converged, nothing to restart (the common case: checked first)
    want, _problems = desired_from_node_spec(desired.nodes[name], revision=str(desired.revision), catalog=catalog)
    if desiredcodec.needs_publishing(node.annotations.get(desiredcodec.ANNOTATION), want):
        return []  # a newer layout is owed: the restart waits for that one to be built
    record, problem = drastatic.decode(node.annotations.get(drastatic.RESTART_ANNOTATION))
    if problem is not None:
        return [
            _held(
                name,
                f"{problem}: the DRA kubelet plugin is not restarted on a guess; remove it "
                f"(kubectl annotate node {name} {drastatic.RESTART_ANNOTATION}-) and migplan restarts the plugin once",
                BAD_RECORD,
            )
        ]
    key = agentdrain.layout_key(layout)
    pods = drastatic.plugin_pods(observed, name)
    if record is not None and record.layout == key:
        same = next((p for p in pods if p.uid == record.uid and not p.deleting), None)
        if same is not None:
            # Recorded, never deleted (the controller stopped between the two writes): the delete is made now.
            return [_delete(name, same, "recorded before, not made yet")]
        age = drastatic.stale_for(record, now)
        if age is None:
            return []  # restarted: the new plugin publishes shortly (MP572/MP573 say what differs meanwhile)
        where = f"{record.pod.split('/', 1)[0]}" if "/" in record.pod else "<driver namespace>"
        return [
            _held(
                name,
                f"its ResourceSlices still do not publish the planned MIG devices {int(age.total_seconds())}s after "
                f"migplan restarted NVIDIA's DRA kubelet plugin (pod {record.pod}, for revision {record.revision}); "
                f"check the new plugin pod (kubectl -n {where} get pods --field-selector spec.nodeName={name}; "
                f"kubectl -n {where} logs <pod> -c gpus) and what NVML shows on the node (nvidia-smi mig -lgi), then "
                f"restart it by hand (kubectl -n {where} delete pod <pod>); migplan does not restart it again for "
                "this layout",
                STALE,
            )
        ]
    live = sorted((p for p in pods if not p.deleting), key=lambda p: p.name)
    if not live:
        if any(p.deleting for p in pods):
            return []  # a restart someone else started is under way: its new pod publishes
        return [
            _held(
                name,
                "its agent built the layout, but no pod of NVIDIA's DRA kubelet-plugin DaemonSet (label "
                "app.kubernetes.io/name=dra-driver-nvidia-gpu) runs on the node, so its ResourceSlices cannot be "
                "refreshed; restart the node's DRA kubelet plugin by hand (delete its pod)",
                NO_POD,
            )
        ]
    pod = live[0]
    record = drastatic.PluginRestart(key, layout.revision, f"{pod.namespace}/{pod.name}", pod.uid, now)
    return [
        Change(
            f"node/{name}",
            Action.CONFIGURE,
            Kind.DRA_PLUGIN_RECORD,
            None,
            {drastatic.RESTART_ANNOTATION: record.encode()},
            f"record the restart of the DRA kubelet plugin for revision {layout.revision}",
            patch={"metadata": {"annotations": {drastatic.RESTART_ANNOTATION: record.encode()}}},
        ),
        _delete(name, pod, f"the agent built revision {layout.revision}; the plugin reads devices only at start"),
    ]


def _delete(node: str, pod: DraPluginPod, why: str) -> Change:
    return Change(
        f"node/{node}",
        Action.DELETE,
        Kind.RESTART_DRA_PLUGIN,
        {"pod": f"{pod.namespace}/{pod.name}", "uid": pod.uid},
        None,
        f"restart NVIDIA's DRA kubelet plugin: delete pod {pod.namespace}/{pod.name} ({why})",
        patch={"metadata": {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid}},
    )


def _held(node: str, reason: str, code: str) -> Change:
    return Change(f"node/{node}", Action.SKIP, Kind.RESTART_DRA_PLUGIN, reason=reason, code=code)
