"""docs/reference/codes.md from the code registry (reconciler.model.codes): every code, once, with its family,
severity and meaning.

Pure. The registry says what a code is; this module keeps only what a reader needs beside it: a few sentences per
family (where the codes come from, what happens around them) and, for some codes, a longer explanation (`MORE`).
A code added to the registry appears in its family's table with no edit here; a family added to the registry gets
a section of its own, headed by its name, until someone writes its prose.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.model import codes

F = codes.Family

# Sections in reading order: what a user meets first (validate, drift), then the machinery. A family missing here
# still gets its section, after these (so a new family is never left out of the reference).
ORDER: tuple[codes.Family, ...] = (
    F.VALIDATION,
    F.FINDING,
    F.WORKLOAD,
    F.IMPORT,
    F.REVIEW,
    F.GIT,
    F.KUBERNETES,
    F.SETTINGS,
    F.CONTROLLER,
    F.AGENT,
    F.OBSERVER,
    F.KIND,
)

TITLES: Mapping[codes.Family, str] = {
    F.VALIDATION: "Validation (`migplan validate`)",
    F.FINDING: "Drift findings (`migplan reconcile`, `migplan run`)",
    F.WORKLOAD: "Workloads against the plan (`migplan check-workloads`)",
    F.IMPORT: "Adoption (`migplan import`)",
    F.REVIEW: "Merge-request review (`migplan plan`, `migplan post-comment`)",
    F.GIT: "Git source, commit trust and report commits",
    F.KUBERNETES: "Kubernetes API",
    F.SETTINGS: "Settings",
    F.CONTROLLER: "Controller and cycle",
    F.AGENT: "Node agent (`migplan agent`)",
    F.OBSERVER: "Node observer (`migplan agent`, every apply mode)",
    F.KIND: "Error kinds",
}

PROSE: Mapping[codes.Family, str] = {
    F.VALIDATION: (
        "`migplan validate` reports every problem of every file in one run, each with its file and line. The "
        "`single` strategy rule quotes the device plugin's own error (`more than one MIG device type present on "
        "node`) and names `migStrategy: mixed` as the fix. Names, owners and label values must match their pattern "
        "in full; what a loader cannot read is MP420 with its path, never a smaller inventory. See "
        "[inventory.md](inventory.md)."
    ),
    F.FINDING: (
        "Each finding names the node, GPU or profile, the desired and observed values, and a line a person can act "
        "on; the drift report (`drift.yaml`, the reports' `README.md`, the node pages) lists them. A node whose "
        "values migplan cannot read is left alone (MP530) while the others are reconciled. MP522 is reported, not "
        "repaired: see [a wedged mig-manager](../how-to/drain-and-disruption.md#a-wedged-mig-manager-mp522)."
    ),
    F.WORKLOAD: (
        "Each finding carries the manifest's file and line and the fix. The rules on a single container are the "
        "ones the drift report applies to running pods (MP512 and MP560 there). See "
        "[../how-to/check-workloads.md](../how-to/check-workloads.md)."
    ),
    F.IMPORT: (
        "Adopting a running cluster or a mig-parted file: what migplan doubts is written with the reason in a "
        "comment that `migplan validate` reports. See [../how-to/import.md](../how-to/import.md)."
    ),
    F.REVIEW: (
        "The plan comment, its posting to GitLab or GitHub, and the inventory roots of a repository. See "
        "[../how-to/ci-merge-requests.md](../how-to/ci-merge-requests.md)."
    ),
    F.GIT: (
        "A remote that is down or refuses the credentials (codes marked *remote*) is reported and the cycle carries "
        "on with the cached revision; a newer revision that is invalid, unsigned, drops too many nodes, edits its own "
        "trust policy or does not descend from the last verified one is not applied and the last known good one stays. "
        "See [../explanation/git-source.md](../explanation/git-source.md)."
    ),
    F.KUBERNETES: (
        "Every Kubernetes API error is translated into one of these at the adapter's edge, with the API's status "
        "quoted; 429 and 5xx are retried (honouring `Retry-After`) until the cycle's deadline."
    ),
    F.SETTINGS: "The controller's and the agent's settings: see [settings.md](settings.md).",
    F.CONTROLLER: (
        "The controller's cycle, its leader election, its deadline and its cache directory. See "
        "[../explanation/controller.md](../explanation/controller.md)."
    ),
    F.AGENT: "The NVML node agent that applies layouts under `apply.mode: agent`.",
    F.OBSERVER: (
        "A source the observer cannot read is not a crash: its reason, starting with the code, is published in the "
        "observation's `sources`, the other source is still published, and nothing is guessed (no holder without "
        "the kubelet, no GPU without NVML)."
    ),
    F.KIND: "The generic codes of the error kinds, used when no more specific code applies.",
}

# Beyond the registry's one-line meaning: the detail a user looking the code up needs (only where there is some).
MORE: Mapping[str, str] = {
    "MP116": "`010`, `0b100`, `0x10`, `+4`, `1_000`, `1:20`; `09`, `1e3` unquoted: quote them or write plain decimals",
    "MP315": "a gap, or an index past the GPUs listed: the indexes are NVML's",
    "MP412": (
        "`reports.path` is, contains or lies in the root's `cluster.yaml`, `nodes/` or `layouts/` on the followed "
        "branch (unknown to `validate ROOT`: assumed to be `reports.branch`), or is not a plain relative path "
        "(`.`, `..`, `./x`, `.git`); the report writer refuses the same, with the same code"
    ),
    "MP420": (
        "unreadable, a symbolic link, a FIFO or device, a name that is not UTF-8, a file where a folder belongs or the "
        "reverse, nesting deeper than 16 levels"
    ),
    "MP522": (
        "once the client pod has left, delete the node's mig-manager pod; migplan does not (the pod is the GPU "
        "Operator's)"
    ),
    "MP530": "the node gets no relabel, cordon, uncordon or re-apply until the value is readable",
    "MP531": "`nvidia.com/gpu.count`; not compared under `single` on a MIG node, where GFD counts MIG devices",
    "MP540": "a warning when that fragmentation blocks a later cut",
    "MP543": "older than `observe_silent_heartbeats` (3) heartbeats of `observe_heartbeat_seconds` (300 s)",
    "MP544": "its pods only add to the disruption guard, never remove any",
    "MP580": "the API code is quoted; exit 2",
    "MP581": "`--force` replaces it, `--merge` adds what it lacks; exit 2 otherwise",
    "MP582": "also a node whose name is not a node name",
    "MP585": "the reason is written in a comment `validate` reports",
    "MP586": "size, UTF-8, or mig-parted's own parsing rules; exit 2",
    "MP587": "also an entry that does not fit the model; exit 2",
    "MP589": "also a symbolic link in the way; exit 2",
    "MP600": "not UTF-8, binary, too large, a FIFO or device",
    "MP602": "`{{ .Values.x }}`: check `helm template` output instead",
    "MP603": "a custom resource, for example",
    "MP606": "the closest offered profiles are named",
    "MP611": "or only on nodes the selectors exclude",
    "MP612": "nodeName, hostname, GPU UUID, `NVIDIA_VISIBLE_DEVICES`",
    "MP613": "on the nodes the pod may run on, alone or together with the manifests before it",
    "MP614": "free per the committed report or the cluster; names where pods can still be placed",
    "MP616": "cordons too, with `--kubeconfig`",
    "MP617": "run with `--kubeconfig` to judge it",
    "MP619": "`replicas`, `parallelism` or `completions` not a non-negative integer",
    "MP706": "the report stays queued in the outbox",
    "MP722": "the head is validated afresh",
    "MP725": (
        "more than one node and more than a quarter of the applied revision's nodes; applied only when "
        "`spec.apply.confirmNodeRemoval` is exactly that number"
    ),
    "MP730": (
        "key missing, unreadable, encrypted or not a key: exit 2 at startup; later the report stays queued, never "
        "pushed unsigned"
    ),
    "MP950": "even with `verify_mode: none`; the keys are the settings' own (docs/how-to/commit-signing.md)",
    "MP951": "the last verified revision is in `trust_state_config_map`; `allow_rewind_to: <commit>` accepts one",
    "MP952": "set `verify_mode: head` and the keys in the controller's settings, or remove `spec.verify`",
    "MP953": "the record (a ConfigMap or a file on a volume) is unreachable or not one migplan wrote",
    "MP740": "`post-comment` exits 2",
    "MP741": "wrong, expired, or without the scope or role; a fork's pull request gets a read-only token",
    "MP743": "not JSON, wrong shape, too big, 404, a redirect, a next-page link to another host",
    "MP744": "project and IID, or repository and pull request number",
    "MP745": "missing, not UTF-8, over 8 MiB",
    "MP746": "not a DriftReport, aliases, too deep or too big",
    "MP830": "after `--lock-timeout` / `cache_lock_timeout_seconds` (60 s); nothing was done",
    "MP899": "one line, exit 2; `migplan --debug` or `MIGPLAN_DEBUG=1` prints the traceback",
    "MP930": "is `/var/lib/kubelet/pod-resources` mounted?",
    "MP931": "`pod_resources_timeout_seconds` (5 s)",
    "MP933": "16 MiB, the kubelet's own limit",
    "MP934": "UNIMPLEMENTED, for example",
    "MP938": "64 KiB: published without PIDs, unknown devices and holders, with `truncated: true`",
    "MP939": "names too long, control characters: left out",
}

PROLOGUE = """\
# Error codes

Generated from the registry, `reconciler/model/codes.py` (`reconciler/docsgen/codesdoc.py` adds the prose): do not
edit by hand; after adding a code run `python -m reconciler.docsgen --write` (a test fails while this file is stale).
A code is stable: it is never reused for another meaning. Severity `info` exists for drift findings only.
"""


def _cell(value: str) -> str:
    """A table cell: a `|` would end the cell, a `<` start HTML, a newline the row."""
    return " ".join(value.replace("|", "\\|").replace("<", "&lt;").split())


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to dashes."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def _families() -> list[codes.Family]:
    present = {c.family for c in codes.DECLARED}
    ordered = [f for f in ORDER if f in present]
    return ordered + sorted(present - set(ordered), key=lambda f: f.value)


def codes_reference() -> str:
    """The whole page: an index of the families, then one section and one table per family."""
    families = _families()
    lines = [PROLOGUE, "| family | codes |", "|---|---|"]
    for fam in families:
        title = TITLES.get(fam, fam.value)
        members = codes.family(fam)
        span = members[0].code if len(members) == 1 else f"{members[0].code} … {members[-1].code}"
        lines.append(f"| [{_cell(title)}](#{_anchor(title)}) | {len(members)}: {span} |")
    for fam in families:
        title = TITLES.get(fam, fam.value)
        lines += ["", f"## {title}", ""]
        if fam in PROSE:
            lines += [PROSE[fam], ""]
        lines += ["| code | severity | meaning | more |", "|---|---|---|---|"]
        for c in codes.family(fam):
            more = MORE.get(c.code, "")
            if codes.Trait.REMOTE in c.traits:
                more = "; ".join(filter(None, ("*remote*: the cycle carries on with the cached revision", more)))
            lines.append(f"| {c.code} | {c.severity.value} | {_cell(c.meaning)} | {_cell(more)} |")
    return "\n".join(lines) + "\n"
