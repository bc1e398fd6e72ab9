"""The one registry of migplan's stable codes: every code, of every family, declared once.

Pure data. A code is shown to users (diagnostics, findings, error messages, reports, CI annotations) and is never
reused for another meaning. Each `Code` names its family (its table in the codes reference), its severity and what it
means; the per-family tables other modules import (`reconciler.logic.inventory.rules.CODES`, `drift.FINDING_CODES`,
`workloads.CODES`, `adopt.IMPORT_CODES`, `observer.CODES`) are views of this one. Behaviour that depends on what a
finding means (a node reconfiguring, a failed reconfiguration, a held change) asks the registry for the codes with a
`Trait` instead of spelling code strings again, so adding a finding with the same meaning is one line here.

tests/unit/model/test_code_registry.py checks that every `MPnnn` in the package is registered here, that no code is
declared twice, and that every code is in exactly one row of docs/reference/codes.md, with the same severity. Adding a
code is one `Code(...)` line in its family's block below, then `python -m reconciler.docsgen --write` regenerates that
page (a longer explanation, if any, goes in reconciler/docsgen/codesdoc.py's MORE).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class Family(enum.StrEnum):
    """Where a code comes from, and so which table of docs/reference/codes.md documents it."""

    KIND = "error kind"  # the generic codes of reconciler.model.errors' error kinds
    VALIDATION = "validation"  # migplan validate (reconciler.logic.inventory.rules)
    FINDING = "finding"  # drift findings (reconciler.logic.drift.drift)
    KUBERNETES = "kubernetes"  # the Kubernetes API, translated in reconciler.adapters.kube.cluster
    IMPORT = "import"  # migplan import (reconciler.logic.adoption.adopt)
    WORKLOAD = "workload"  # migplan check-workloads (reconciler.logic.workloads.workloads)
    GIT = "git"  # Git source, commit trust, last known good, report commits
    REVIEW = "review"  # merge-request comments and plan reports
    SETTINGS = "settings"
    CONTROLLER = "controller"
    AGENT = "agent"  # the node agent (NVML, agent-mode annotations)
    OBSERVER = "observer"  # the node observer (pod-resources, NVML, the observed annotation)


class Level(enum.StrEnum):
    """A code's severity: error and warning for every family, info for findings only."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Trait(enum.Flag):
    """What a code means to behaviour, asked of the registry instead of a list of code strings."""

    NONE = 0
    IN_PROGRESS = enum.auto()  # the node is being reconfigured right now (reconfiguring, cordoned, draining)
    FAILED = enum.auto()  # the node's reconfiguration failed or is stuck
    HELD = enum.auto()  # a change is held back by the disruption guard
    DRAIN_BLOCKED = enum.auto()  # a drain cannot go on (names the pods / PodDisruptionBudgets)
    GPU_OPERATOR = enum.auto()  # about mig-manager's machinery: meaningless when the node agent applies layouts
    REMOTE = enum.auto()  # a Git source error that describes the remote: the cycle carries on with the cache
    MISSING_NODE = enum.auto()  # an inventory node the cluster does not have: the node's status is Missing
    UNDOCUMENTED_NODE = enum.auto()  # a GPU node the inventory does not have: the node's status is Undocumented
    DRAINING = enum.auto()  # the drain is under way: the pods it evicted this cycle are named with it
    DRAIN_GOES_ON = enum.auto()  # a drain blocked for now but retried: the node is reported draining as well
    PENDING_SAID_BY_NODE = enum.auto()  # about a pod: for a Pending pod the node's own finding says it (MP506)
    UNPARSED = enum.auto()  # the text could not be parsed at all (so another reader may be tried)
    UNKNOWN_MODEL = enum.auto()  # a GPU model the catalog does not have
    NO_ROOT = enum.auto()  # the inventory root is not there at that revision (a cluster a change adds)
    REBOOT = enum.auto()  # held for a possible reboot: the change's reason says how many pods end, GPU or not


@dataclass(frozen=True, slots=True)
class Code:
    code: str  # "MP307"
    family: Family
    severity: Level
    meaning: str  # one line; docs/reference/codes.md may say more (reconciler/docsgen/codesdoc.py MORE)
    traits: Trait = Trait.NONE


KIND, VALIDATION, FINDING, KUBERNETES = Family.KIND, Family.VALIDATION, Family.FINDING, Family.KUBERNETES
IMPORT, WORKLOAD, GIT, REVIEW = Family.IMPORT, Family.WORKLOAD, Family.GIT, Family.REVIEW
SETTINGS, CONTROLLER, AGENT, OBSERVER = Family.SETTINGS, Family.CONTROLLER, Family.AGENT, Family.OBSERVER
E, W, INFO = Level.ERROR, Level.WARNING, Level.INFO
IN_PROGRESS, FAILED, HELD = Trait.IN_PROGRESS, Trait.FAILED, Trait.HELD
DRAIN_BLOCKED, GPU_OPERATOR, REMOTE = Trait.DRAIN_BLOCKED, Trait.GPU_OPERATOR, Trait.REMOTE

# Every code, in code order within each family. Never reuse a code; a retired code stays here.
DECLARED: tuple[Code, ...] = (
    Code("MP000", KIND, E, "an error migplan raised without a more specific code"),
    Code("MP001", KIND, E, "the inventory is invalid (its diagnostics are listed)"),
    Code("MP002", KIND, E, "waiting for something outside migplan (pods to leave, a rollout to finish)"),
    Code("MP003", KIND, E, "a failure worth retrying (API 5xx, Git fetch, NVML unknown)"),
    Code("MP101", VALIDATION, E, "file larger than the size limit"),
    Code("MP102", VALIDATION, E, "empty file"),
    Code("MP103", VALIDATION, E, "binary file"),
    Code("MP104", VALIDATION, E, "not UTF-8"),
    Code("MP105", VALIDATION, E, "UTF-8 byte-order mark"),
    Code("MP106", VALIDATION, E, "tab in indentation"),
    Code("MP107", VALIDATION, E, "YAML syntax error"),
    Code("MP108", VALIDATION, E, "more than one YAML document"),
    Code("MP109", VALIDATION, E, "YAML alias or merge key"),
    Code("MP110", VALIDATION, E, "unsupported YAML tag"),
    Code("MP111", VALIDATION, E, "duplicate key"),
    Code("MP112", VALIDATION, E, "non-string mapping key"),
    Code("MP113", VALIDATION, E, "document is not a mapping"),
    Code("MP114", VALIDATION, E, "nesting too deep"),
    Code("MP115", VALIDATION, E, "number too large"),
    Code("MP116", VALIDATION, E, "YAML 1.1 / 1.2 ambiguous number form"),
    Code("MP200", VALIDATION, E, "schema violation"),
    Code("MP201", VALIDATION, E, "required field missing"),
    Code("MP202", VALIDATION, E, "unknown field"),
    Code("MP203", VALIDATION, E, "wrong type"),
    Code("MP204", VALIDATION, E, "value not allowed"),
    Code("MP205", VALIDATION, E, "malformed value"),
    Code("MP206", VALIDATION, E, "number out of range"),
    Code("MP207", VALIDATION, E, "wrong number of items"),
    Code("MP301", VALIDATION, E, "unknown GPU model"),
    Code("MP302", VALIDATION, E, "profile not offered by the model"),
    Code("MP303", VALIDATION, E, "too many instances of a profile"),
    Code("MP304", VALIDATION, E, "compute slices exceeded"),
    Code("MP305", VALIDATION, E, "memory slices exceeded"),
    Code("MP306", VALIDATION, E, "placement not allowed for the profile"),
    Code("MP307", VALIDATION, E, "overlapping placements"),
    Code("MP308", VALIDATION, E, "no feasible placement"),
    Code("MP309", VALIDATION, E, "MIG enabled without partitions"),
    Code("MP310", VALIDATION, E, "partitions with MIG disabled"),
    Code("MP311", VALIDATION, E, "compute-instance profile not advertised by the device plugin"),
    Code("MP312", VALIDATION, W, "placements unknown for the model"),
    Code("MP313", VALIDATION, E, "GPU needs exactly one of mig or layout"),
    Code("MP314", VALIDATION, E, "layout restricted to another model"),
    Code("MP315", VALIDATION, E, "GPU indexes not 0..n-1"),
    Code(
        "MP320", VALIDATION, E, "MIG partitions planned on a node whose layout another component writes (layoutWriter)"
    ),
    Code("MP401", VALIDATION, E, "single strategy with several MIG device types"),
    Code("MP402", VALIDATION, E, "single strategy with mixed MIG modes"),
    Code("MP403", VALIDATION, W, "MIG partitions under strategy none"),
    Code("MP404", VALIDATION, E, "node name differs from file name"),
    Code("MP405", VALIDATION, E, "duplicate node name"),
    Code("MP406", VALIDATION, E, "duplicate GPU index"),
    Code("MP407", VALIDATION, E, "unresolved layout reference"),
    Code("MP408", VALIDATION, E, "layout name differs from file name"),
    Code("MP409", VALIDATION, E, "cluster.yaml missing"),
    Code("MP410", VALIDATION, W, "unexpected YAML file"),
    Code("MP411", VALIDATION, E, "invalid inventory path"),
    Code("MP412", VALIDATION, E, "report commits would touch the inventory"),
    Code("MP413", VALIDATION, E, "no inventory named, and none where the command stands: exit 2, never the example"),
    Code("MP414", VALIDATION, W, "placement-only change under apply.mode gpu-operator: mig-parted will not apply it"),
    # Issue 30 item 2: DeviceClasses rendered from the plan (reconciler.logic.inventory.deviceclasses)
    Code("MP415", VALIDATION, E, "two DeviceClasses for one extended resource name"),
    Code("MP416", VALIDATION, E, "a DeviceClass would map nvidia.com/gpu to MIG devices"),
    Code("MP417", VALIDATION, E, "a DeviceClass Kubernetes would refuse (extendedResourceName, CEL selector)"),
    Code("MP418", VALIDATION, W, "a per-owner DeviceClass for an owner no partition has"),
    Code("MP419", VALIDATION, E, "two DeviceClasses with one name"),
    Code("MP420", VALIDATION, E, "part of the inventory cannot be read"),
    Code("MP501", FINDING, W, "a node advertises a different number of partitions of a profile than its plan gives it"),
    Code("MP502", FINDING, W, "ClusterPolicy spec.mig.strategy differs from the inventory's migStrategy"),
    Code(
        "MP503",
        FINDING,
        W,
        "ClusterPolicy spec.devicePlugin.config would contradict the strategy; it must be removed",
    ),
    Code(
        "MP504",
        FINDING,
        E,
        "the device plugin refuses the node's MIG layout (its log line is quoted)",
        traits=FAILED,
    ),
    Code("MP505", FINDING, W, "a device-plugin pod is not ready for another reason (last log line quoted)"),
    Code("MP506", FINDING, E, "pods ask for nvidia.com/gpu on a node that advertises none: they stay Pending forever"),
    Code(
        "MP507",
        FINDING,
        E,
        "mig-manager failed to apply the node's config (nvidia.com/mig.config.state=failed)",
        traits=FAILED | GPU_OPERATOR,
    ),
    Code(
        "MP508",
        FINDING,
        E,
        "the node has been reconfiguring (state pending) for longer than expected",
        traits=FAILED | GPU_OPERATOR,
    ),
    Code(
        "MP509",
        FINDING,
        INFO,
        "mig-manager is reconfiguring the node (state pending or rebooting)",
        traits=IN_PROGRESS | GPU_OPERATOR,
    ),
    Code("MP510", FINDING, E, "a node of the inventory is not in the cluster", traits=Trait.MISSING_NODE),
    Code("MP511", FINDING, W, "a GPU node of the cluster is not in the inventory", traits=Trait.UNDOCUMENTED_NODE),
    Code(
        "MP512",
        FINDING,
        E,
        "a pod's MIG request is invalid (requests differ from limits, or two MIG profiles in one container)",
    ),
    Code("MP513", FINDING, INFO, "no free partition of a profile is left in the cluster (saturation)"),
    Code(
        "MP514",
        FINDING,
        W,
        "the node's nvidia.com/mig.config label is not the config its plan renders to",
        traits=GPU_OPERATOR,
    ),
    Code(
        "MP515",
        FINDING,
        W,
        "ClusterPolicy spec.migManager.config.name does not point at migplan's ConfigMap",
        traits=GPU_OPERATOR,
    ),
    Code(
        "MP516",
        FINDING,
        W,
        "the mig-parted ConfigMap is missing or differs from the rendered inventory",
        traits=GPU_OPERATOR,
    ),
    Code("MP517", FINDING, E, "the ClusterPolicy named in cluster.yaml is not in the cluster"),
    Code("MP518", FINDING, E, "the device-plugin DaemonSet named in cluster.yaml is not in the cluster"),
    Code("MP519", FINDING, W, "a change is held back: it would destroy partitions that running pods hold", traits=HELD),
    Code("MP520", FINDING, W, "pods hold more partitions of a profile on the node than its plan gives it"),
    Code("MP521", FINDING, INFO, "the node is cordoned by migplan while it is reconfigured", traits=IN_PROGRESS),
    Code(
        "MP522",
        FINDING,
        E,
        "mig-manager gave up waiting for GPU client pods to leave the node: state pending, clients paused, "
        "until its pod is restarted",
        traits=GPU_OPERATOR,
    ),
    Code(
        "MP530",
        FINDING,
        E,
        "a value migplan reads on the node (label, annotation, quantity) is malformed: the node is left alone",
    ),
    Code("MP531", FINDING, W, "the inventory lists fewer GPUs for a node than the node has (nvidia.com/gpu.count)"),
    Code(
        "MP536",
        FINDING,
        INFO,
        "allowDisruption: the node is drained before its change (pods evicted through the Eviction API, waited for)",
        traits=IN_PROGRESS | Trait.DRAINING,
    ),
    Code(
        "MP537",
        FINDING,
        W,
        "a PodDisruptionBudget refuses the eviction of a pod the drain needs gone: retried each cycle",
        traits=DRAIN_BLOCKED | Trait.DRAIN_GOES_ON,
    ),
    Code(
        "MP538",
        FINDING,
        E,
        "the drain timed out (drainTimeoutSeconds): the change is held, no pod is deleted by force",
        traits=DRAIN_BLOCKED,
    ),
    Code(
        "MP539",
        FINDING,
        W,
        "the node cannot be drained: DaemonSet, mirror or controller-less pods hold what its change destroys",
        traits=DRAIN_BLOCKED,
    ),
    # The node observer (issue 12): measured placements and holders, and the observer's own health.
    Code(
        "MP540",
        FINDING,
        INFO,
        "a GPU's real placements differ from the plan's (a warning when that fragmentation blocks a later cut)",
    ),
    Code("MP541", FINDING, W, "a partition is held by a pod of another owner than the plan names"),
    Code("MP542", FINDING, W, "a pod holds a partition (or GPU) the plan does not have"),
    Code("MP543", FINDING, W, "the node's observer has not reported for a while (silent): its facts are not used"),
    Code("MP544", FINDING, W, "the node's observer runs another migplan version (or format) than the controller"),
    Code("MP545", FINDING, W, "the node's observation is incomplete: truncated, or NVML/the kubelet could not be read"),
    Code("MP546", FINDING, W, "the kubelet allocated devices NVML does not list on the node"),
    Code("MP547", FINDING, E, "the node's migplan.io/mig-observed annotation is malformed: the node is left alone"),
    Code(
        "MP548", FINDING, W, "a pod pins a node or GPU (hostname or GPU-UUID selector) instead of asking for a profile"
    ),
    Code(
        "MP549",
        FINDING,
        W,
        "a pod asks for whole GPUs (nvidia.com/gpu) on a node whose plan uses MIG partitions",
        traits=Trait.PENDING_SAID_BY_NODE,
    ),
    Code(
        "MP560",
        FINDING,
        W,
        "a pod's container holds more than one device of a MIG profile (CUDA uses one; the others sit idle)",
    ),
    # Device-plugin sharing of MIG devices (issue 26): the counts a node is expected to advertise.
    Code(
        "MP561", FINDING, INFO, "the node's device-plugin config shares its partitions (time-slicing or MPS replicas)"
    ),
    Code(
        "MP562",
        FINDING,
        W,
        "the node's device-plugin config cannot be read: its counts are not compared, its layout never re-applied",
    ),
    Code(
        "MP563", FINDING, E, "the node's device-plugin config shares with MPS, which the plugin refuses on MIG devices"
    ),
    Code(
        "MP564",
        FINDING,
        E,
        "the node's plan names MIG profiles its GPUs do not offer (GFD): not labelled, mig-parted would empty them",
        traits=HELD,
    ),
    Code("MP565", FINDING, E, "ClusterPolicy spec.devicePlugin.env sets MIG_STRATEGY, overriding spec.mig.strategy"),
    Code("MP566", FINDING, E, "a container asks more than one shared device where the plugin fails such requests"),
    Code(
        "MP567",
        FINDING,
        INFO,
        "the node's mig-manager pod still reads another ConfigMap than migplan's: its label waits for the rollout",
        traits=GPU_OPERATOR,
    ),
    Code(
        "MP568",
        FINDING,
        W,
        "a change is held back: mig-manager may reboot the node for it (WITH_REBOOT) and end the pods running there",
        traits=HELD | Trait.REBOOT | GPU_OPERATOR,
    ),
    # DRA (issue 27): who writes a GPU's layout, and what NVIDIA's DRA driver publishes
    Code(
        "MP570",
        FINDING,
        E,
        "another component writes this node's MIG layout (DRA DynamicMIG): migplan writes nothing there",
    ),
    Code(
        "MP571",
        FINDING,
        W,
        "a ResourceSlice or ResourceClaim of NVIDIA's DRA driver on this node cannot be read: ignored, named",
    ),
    Code("MP572", FINDING, W, "a planned partition is not among the devices the node's ResourceSlices publish"),
    Code("MP573", FINDING, W, "the node's ResourceSlices publish a MIG device the plan does not have"),
    Code(
        "MP574",
        FINDING,
        E,
        "MIG enabled with no partition on a DRA node: NVIDIA's DRA driver publishes nothing for that GPU",
    ),
    Code(
        "MP575",
        FINDING,
        E,
        "HAMi's device plugin runs this node's GPUs in MIG mode (hami.io/node-nvidia-register): migplan writes nothing",
    ),
    Code(
        "MP576",
        FINDING,
        W,
        "the node's hami.io/node-nvidia-register cannot be read: taken as HAMi's MIG mode, nothing written there",
    ),
    Code(
        "MP577",
        FINDING,
        W,
        "a layout migplan published before another writer took the node is withdrawn (migplan.io/mig-desired)",
    ),
    Code(
        "MP578",
        FINDING,
        E,
        "the node agent refused the published layout: another component writes this node's MIG layout",
    ),
    Code(
        "MP579",
        FINDING,
        W,
        "the feature gates of NVIDIA's DRA driver DaemonSet cannot be read: DynamicMIG taken as on, nothing written",
    ),
    # Issue 28 item 7: another field manager (Helm, Argo CD) keeps a ClusterPolicy field migplan owns
    Code(
        "MP590",
        FINDING,
        W,
        "another field manager reverted a ClusterPolicy field migplan set: migplan stops patching it (a fight)",
    ),
    # Issue 30 item 1: DRA-static nodes laid out by migplan's agent, then NVIDIA's DRA kubelet plugin restarted
    Code(
        "MP591",
        FINDING,
        E,
        "the node's ResourceSlices still differ from the plan after its DRA kubelet plugin was restarted: check it",
    ),
    Code(
        "MP592",
        FINDING,
        W,
        "no pod of NVIDIA's DRA kubelet-plugin DaemonSet runs on the DRA node: its slices cannot be refreshed",
    ),
    Code(
        "MP593",
        FINDING,
        W,
        "the node's migplan.io/dra-plugin-restart record is malformed: the DRA kubelet plugin is not restarted",
    ),
    # Issue 30 item 2: the DeviceClasses migplan keeps (reconciler.logic.planning.deviceclasses)
    Code(
        "MP596",
        FINDING,
        W,
        "a DeviceClass migplan would write exists and is not migplan's: left as it is, the plan's class not kept",
    ),
    Code(
        "MP597",
        FINDING,
        W,
        "a DeviceClass migplan does not keep maps an extended resource name one of migplan's classes maps",
    ),
    Code("MP550", KUBERNETES, E, "the API server refused the request (403, 422, other 4xx): retrying will not help"),
    Code("MP551", KUBERNETES, E, "the object is not there (404)"),
    Code("MP552", KUBERNETES, E, "a list's continue token expired (410): the list restarts"),
    Code("MP553", KUBERNETES, E, "conflict (409): the object changed since it was read; the next cycle re-reads"),
    Code("MP554", KUBERNETES, E, "the API server is busy or failing (429, 5xx)"),
    Code("MP555", KUBERNETES, E, "transport failure (connection refused or reset, timeout, TLS)"),
    Code("MP556", KUBERNETES, E, "kubeconfig or in-cluster configuration unusable"),
    Code("MP580", IMPORT, E, "the cluster cannot be read (unreachable, refused, broken kubeconfig): nothing written"),
    Code(
        "MP581",
        IMPORT,
        E,
        "the output directory already holds an inventory: pass --force to replace it or --merge to add nodes",
    ),
    Code(
        "MP582",
        IMPORT,
        W,
        "a GPU node has no GFD labels and no observed layout: its GPUs cannot be told, node not imported",
    ),
    Code(
        "MP583",
        IMPORT,
        W,
        "a GPU's model is not in the catalog: written as GFD names it, validate reports MP301",
        traits=Trait.UNKNOWN_MODEL,
    ),
    Code(
        "MP584",
        IMPORT,
        W,
        "the node's mig-parted config cannot be used (ConfigMap or config missing, not parseable, no "
        "entry for a GPU): the next source is used",
    ),
    Code(
        "MP585",
        IMPORT,
        W,
        "a GPU's cut from its source does not fit the model: written as found, validate reports it",
    ),
    Code("MP586", IMPORT, E, "a mig-parted file given to --from-mig-parted cannot be read or does not parse"),
    Code(
        "MP587",
        IMPORT,
        E,
        "--from-mig-parted: no layout can be made (config name not in the file, model not given and not "
        "told by a device filter)",
    ),
    Code("MP588", IMPORT, W, "the observed-layout annotation is malformed: the next source is used"),
    Code("MP589", IMPORT, E, "the output cannot be written (not a directory, permission, a file in the way)"),
    Code(
        "MP958",
        IMPORT,
        E,
        "a ResourceSlice device of NVIDIA's DRA driver cannot be read (a name that does not parse, an unreadable "
        "attribute): the node is not imported",
    ),
    Code(
        "MP959",
        IMPORT,
        E,
        "a DRA MIG device's attributes contradict its name or the catalog (profile, GI profile id, parent GPU, "
        "model): the node is not imported",
    ),
    Code(
        "MP960",
        IMPORT,
        E,
        "a DRA device published twice (the same name, or two devices at one placement of one GPU): the node is "
        "not imported",
    ),
    Code("MP961", IMPORT, E, "a DRA device on a GPU the node does not list: the node is not imported"),
    Code("MP962", IMPORT, W, "a GPU the node lists has no device in its ResourceSlices: the next source is used"),
    Code("MP600", WORKLOAD, E, "manifest file cannot be read (not UTF-8, binary, too large, not a regular file)"),
    Code("MP601", WORKLOAD, E, "YAML or JSON syntax error in a manifest", traits=Trait.UNPARSED),
    Code("MP602", WORKLOAD, E, "template placeholder in a manifest: render it first"),
    Code("MP603", WORKLOAD, W, "an object of a kind migplan does not count asks for GPU resources: not checked"),
    Code("MP605", WORKLOAD, E, "GPU quantity the API server refuses (fractional, negative, not a quantity)"),
    Code("MP606", WORKLOAD, E, "MIG profile no node of the plan offers: the pod stays Pending forever"),
    Code("MP607", WORKLOAD, E, "more than one device of a MIG profile in one container"),
    Code("MP608", WORKLOAD, E, "several kinds of GPU device in one container"),
    Code("MP609", WORKLOAD, E, "requests differ from limits for a GPU resource"),
    Code("MP610", WORKLOAD, E, "GPU resource requested without a limit"),
    Code("MP611", WORKLOAD, E, "nvidia.com/gpu where the plan offers no whole GPU"),
    Code("MP612", WORKLOAD, W, "pins a node or a card instead of naming a profile"),
    Code("MP613", WORKLOAD, E, "demand above the plan's capacity: some pods can never run"),
    Code("MP614", WORKLOAD, W, "demand above what is free now: some pods stay Pending until partitions free up"),
    Code("MP615", WORKLOAD, W, "demand takes partitions the plan reserves for another owner"),
    Code("MP616", WORKLOAD, E, "selectors, affinity or taints leave no node of the plan able to run the pod"),
    Code("MP617", WORKLOAD, W, "a selector on a node label the plan does not know: not judged without --kubeconfig"),
    Code("MP618", WORKLOAD, W, "not a Kubernetes object: ignored"),
    Code("MP619", WORKLOAD, E, "a workload field migplan counts with is malformed (replicas, parallelism)"),
    Code("MP620", WORKLOAD, E, "a manifest path cannot be read (missing, permission, too many files): exit 2"),
    Code("MP621", WORKLOAD, E, "the plan cannot be read or is invalid: exit 2"),
    Code("MP622", WORKLOAD, E, "the last report cannot be read from the reports branch: exit 2"),
    Code("MP623", WORKLOAD, E, "the cluster cannot be read (--kubeconfig): exit 2"),
    Code("MP626", WORKLOAD, E, "a DRA claim, claim template, DeviceClass or pod claim entry the API server refuses"),
    Code("MP627", WORKLOAD, W, "a pod names a ResourceClaim or claim template not among the manifests: not judged"),
    Code("MP628", WORKLOAD, W, "a claim names a DeviceClass neither the manifests nor migplan define: not judged"),
    Code("MP629", WORKLOAD, E, "a CEL selector the API server refuses (does not compile, too long, too costly)"),
    Code("MP630", WORKLOAD, E, "a CEL selector fails to evaluate on a device the plan publishes: the allocation fails"),
    Code("MP631", WORKLOAD, W, "a CEL selector reads a value only the node knows: assumed to match"),
    Code("MP632", WORKLOAD, E, "no node the pod may run on can allocate its claims: the pods stay Pending forever"),
    Code("MP633", WORKLOAD, E, "a claim only DynamicMIG could satisfy: it selects devices the plan never cuts"),
    Code("MP634", WORKLOAD, E, "a ResourceClaim shared by more pods than it can be reserved for (256)"),
    Code("MP635", WORKLOAD, W, "claims whose allocation search or selector cost exceeds migplan's bounds: not judged"),
    Code("MP701", GIT, E, "the remote cannot be reached (down, refused connection, DNS, timeout)", traits=REMOTE),
    Code("MP702", GIT, E, "the remote refused the credentials, or none were configured", traits=REMOTE),
    Code("MP703", GIT, E, "SSH host key not in known_hosts, or TLS certificate invalid", traits=REMOTE),
    Code("MP704", GIT, E, "no branch, tag or commit of that name", traits=REMOTE),
    Code("MP705", GIT, E, "the inventory root is not a directory at that revision", traits=Trait.NO_ROOT),
    Code("MP706", GIT, E, "the remote kept rejecting the report push (after retries)"),
    Code("MP707", GIT, E, "a report path escapes reports.path"),
    Code("MP708", GIT, E, "any other Git failure"),
    Code("MP710", GIT, E, "the head commit is unsigned: not applied"),
    Code("MP711", GIT, E, "the head commit is signed by an untrusted key: not applied"),
    Code("MP712", GIT, E, "the head commit's signature is invalid: not applied"),
    Code("MP720", GIT, E, "the newer revision does not validate: not applied"),
    Code("MP721", GIT, E, "the last known good could not be persisted"),
    Code("MP722", GIT, W, "the last known good state file is damaged: ignored"),
    Code("MP725", GIT, E, "the newer revision removes many nodes, unconfirmed: not applied"),
    Code("MP730", GIT, E, "a report commit cannot be signed"),
    Code("MP740", REVIEW, E, "no token in the environment variable the forge needs"),
    Code("MP741", REVIEW, E, "the forge refused the token (HTTP 401/403)"),
    Code("MP742", REVIEW, E, "the forge API cannot be reached (refused, timeout, 429 or 5xx after the retries)"),
    Code("MP743", REVIEW, E, "an answer of the forge migplan cannot use"),
    Code("MP744", REVIEW, E, "which merge request is unknown"),
    Code("MP745", REVIEW, E, "the comment body cannot be read"),
    Code("MP746", REVIEW, W, "the committed drift report is unusable: the plan names no pods"),
    Code("MP747", REVIEW, E, "migplan-roots.yaml is not a list of inventory roots, or the roots cannot be listed"),
    Code(
        "MP748",
        REVIEW,
        W,
        "a DRA device name cannot be told (GI profile id not in the catalog, no placement): shown by profile and "
        "placement",
    ),
    Code(
        "MP749",
        REVIEW,
        W,
        "a DRA node's GPU minor numbers are not observed: the GPU index is taken for the minor in device names",
    ),
    Code(
        "MP754",
        REVIEW,
        W,
        "a DRA record of the committed drift report cannot be read (whole, or a device, claim or minor of it): "
        "what it said is not shown",
    ),
    Code(
        "MP755",
        REVIEW,
        W,
        "the committed drift report lists only part of a DRA node's devices or claims (capped): the claims shown may "
        "be partial",
    ),
    Code("MP800", SETTINGS, E, "settings invalid (environment, file or flags)"),
    Code("MP810", CONTROLLER, E, "the cycle failed"),
    Code("MP811", CONTROLLER, E, "the cycle ran past its deadline"),
    Code("MP820", CONTROLLER, E, "not the leader: the write was fenced"),
    Code("MP821", CONTROLLER, E, "leader Lease conflict: another replica wrote it first"),
    Code("MP825", CONTROLLER, W, "an eviction refused by the API server (a PodDisruptionBudget): retried next cycle"),
    Code("MP830", CONTROLLER, E, "the cache directory is in use by another migplan process"),
    Code("MP831", CONTROLLER, E, "the cache directory cannot be used"),
    Code("MP899", CONTROLLER, E, "internal error (a bug)"),
    Code("MP980", CONTROLLER, E, "waiting: the controller's namespace does not exist (no leader Lease can be made)"),
    Code("MP981", CONTROLLER, E, "waiting: the API server refuses a request the controller needs (RBAC, HTTP 403)"),
    Code("MP982", CONTROLLER, E, "waiting: the inventory repository cannot be read and no revision was ever read"),
    Code("MP983", CONTROLLER, W, "this replica lost the leadership it held"),
    Code("MP984", CONTROLLER, E, "waiting: the API server cannot be reached"),
    Code("MP900", AGENT, E, "NVML used outside its session"),
    Code("MP901", AGENT, E, "a profile NVML does not know for this GPU"),
    Code("MP910", AGENT, E, "the desired agent-mode annotation is malformed"),
    Code("MP911", AGENT, E, "the observed agent-mode annotation is malformed"),
    Code("MP912", AGENT, E, "GPU client pods did not leave the node before a re-cut"),
    Code("MP913", AGENT, E, "the GPU-clients pause record (migplan.io/gpu-clients-paused) is malformed"),
    Code("MP914", AGENT, E, "GPU clients not restarted"),
    Code("MP920", AGENT, E, "the agent could not apply the node's layout"),
    Code("MP985", AGENT, E, "the NVML module PYNVML_MODULE names cannot be imported"),
    Code("MP986", AGENT, E, "the NVML module PYNVML_MODULE names does not have pynvml's surface"),
    Code("MP930", OBSERVER, E, "the pod-resources socket is missing or not a socket"),
    Code("MP931", OBSERVER, E, "the pod-resources socket is unreachable or did not answer within the timeout"),
    Code("MP932", OBSERVER, E, "the kubelet's answer is not a PodResources v1 message"),
    Code("MP933", OBSERVER, E, "the kubelet's answer is larger than the client's limit (gRPC max message size)"),
    Code("MP934", OBSERVER, E, "any other gRPC error from the kubelet"),
    Code("MP935", OBSERVER, E, "NVML cannot be read at all: no GPU published"),
    Code("MP936", OBSERVER, E, "NVML failed on some GPUs: those GPUs are left out"),
    Code("MP937", OBSERVER, E, "the observation could not be published"),
    Code("MP938", OBSERVER, W, "the observation was over the annotation's size cap: published without its detail"),
    Code("MP939", OBSERVER, W, "allocations the kubelet listed carried values the annotation cannot hold"),
    Code("MP950", GIT, E, "spec.verify changed without a signature by a key the controller's settings trust"),
    Code("MP951", GIT, E, "the head does not descend from the last verified revision (force-push back): not applied"),
    Code("MP952", GIT, E, "spec.verify asks for signatures the controller's settings do not require: not applied"),
    Code("MP953", GIT, E, "the last verified revision cannot be read or recorded: no new revision applied"),
)


def _index(codes: Iterable[Code]) -> dict[str, Code]:
    out: dict[str, Code] = {}
    for c in codes:
        if c.code in out:
            raise ValueError(f"code {c.code} is declared twice")
        out[c.code] = c
    return out


REGISTRY: Mapping[str, Code] = _index(DECLARED)


def family(which: Family) -> tuple[Code, ...]:
    """The codes of one family, in declaration order."""
    return tuple(c for c in DECLARED if c.family is which)


def with_trait(trait: Trait) -> frozenset[str]:
    """The codes that carry `trait`."""
    return frozenset(c.code for c in DECLARED if trait in c.traits)


def severity(code: str) -> Level:
    """The registered severity of `code` (KeyError for a code that is not registered: a bug)."""
    return REGISTRY[code].severity


IN_PROGRESS_CODES = with_trait(Trait.IN_PROGRESS)  # a node being reconfigured right now
