"""Fuzz: `migplan import` reads objects someone else wrote; what it writes must stay what it means.

The base is the example fleet on the cluster twin, with an observer's annotation on one node: its nodes,
GPU pods, ClusterPolicy and mig-parted ConfigMap as the API server lists them. Each case edits them —
typed mutations (mutations.py: the API server validated the schema, not the values) plus hostile strings
aimed at the YAML the import writes (a newline, `#`, `: `, `{{`, `---`, a modeline, a bidi override) in
the places that reach the files: node labels (GFD product, nvidia.com/mig.config), pod labels (owner
suggestions), the observed annotation, the ClusterPolicy, the ConfigMap's config.yaml (hostile YAML) and
node names (`../x`, absolute, NUL) — and runs the pure path of `migplan import` (the adapter's decoders,
adopt.import_cluster, adoptfiles.render_inventory, the in-memory validation). Asserted:
- nothing raises; every problem has a code in adopt.IMPORT_CODES;
- every file path is cluster.yaml, nodes/<DNS name>.yaml or layouts/<name>.yaml (nothing escapes --out);
- every file is one YAML document that parses, whose keys are the ones the import writes (no label value
  added a key, a line or a document) and whose names are the node's own;
- validation never raises and only reports registered codes; with no import problem the result is valid.
A few cases go through the real command against the twin with hostile labels and names. Derandomized.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import mutations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.adapters.kube import agentmode as kubeagentmode
from reconciler.adapters.kube import observe as kubeobserve
from reconciler.catalog import load_catalog
from reconciler.logic.adoption import adopt
from reconciler.logic.adoption.adopt import ClusterFacts, NodeFacts, import_cluster, parse_configs
from reconciler.logic.adoption.adoptfiles import AdoptError, layouts_from_mig_parted, render_inventory
from reconciler.logic.codecs.migparted import CONFIG_KEY
from reconciler.logic.inventory import rules
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.model.errors import MigplanError
from reconciler.twin.cluster import ClusterTwin

INVENTORY = Path(__file__).parents[2] / "inventory"
IMPORT_CASES = 300
MIG_PARTED_CASES = 200
CATALOG = load_catalog()
FILE_PATH = re.compile(r"^(cluster\.yaml|nodes/[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.yaml|layouts/[a-z0-9][-a-z0-9]*\.yaml)$")

# Aimed at the files the import writes: each would add a key, a line, a document or a modeline if copied raw.
INJECTIONS = [
    "x\nowner: evil",
    "a # b",
    "a: b",
    "{{ .Values.x }}",
    "---\nkind: Cluster",
    "x\n---\n",
    "# yaml-language-server: $schema=https://evil.example/s.json",
    "\n# yaml-language-server: $schema=https://evil.example/s.json",
    "\r\nspec: {}",
    "\u2028owner: x",
    "\x85owner: x",
    "a\u202eb",
    "'\"",
    "*alias",
    "&anchor x",
    "!!python/object:os.system x",
    "- item",
    "H200-141GB\nx: 1",
    "NVIDIA-H200-MIG-3g.71gb\n#",
    "all-balanced\n",
    "/".join([".."] * 3) + "/etc/passwd",  # built: a literal would read as a path out of the repository
    "/etc/passwd",
    "a\x00b",
    "x" * 400,
    "H200-141GB\U0001f642",
    "a\ud800b",
    "a\u2029b",
    "\ufeffx",
    "a\x1b[2Jb",
]
HOSTILE = st.one_of(st.sampled_from(INJECTIONS), mutations.STRINGS, st.text(max_size=24))
NODE_NAMES = ["../x", "../../etc/cron.d/x", "/abs", "a/b", "a\x00b", ".", "..", "x..y", "UPPER", "a" * 300, "nodes"]
LABEL_KEYS = [
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "nvidia.com/gpu.memory",
    "nvidia.com/mig.strategy",
]


def _capture() -> dict[str, Any]:
    from kubernetes import client

    from reconciler.adapters.kube.agentmode import KubeNodeState
    from reconciler.adapters.kube.client import kube_configuration
    from reconciler.adapters.nvml import NvmlGpu
    from reconciler.agent import report_once

    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        core: Any = client.CoreV1Api(client.ApiClient(kube_configuration(str(twin.kubeconfig))))
        with NvmlGpu(nvml=twin.nvml("gpu-h200-01")) as gpus:
            report_once(gpus=gpus, node_state=KubeNodeState(core), node="gpu-h200-01")
        store = twin.store
        return {
            "nodes": store.list("nodes"),
            "pods": [p for p in store.list("pods") if kubeobserve.gpu_pod_from_json(p) is not None],
            "policy": store.list("clusterpolicies.nvidia.com")[0],
            "config_map": next(c for c in store.list("configmaps") if CONFIG_KEY in (c.get("data") or {})),
        }


BASE = _capture()
CLUSTER = ClusterFacts("fuzz", "mixed", "gpu-operator", "cluster-policy", "nvidia-device-plugin-daemonset", "cm")


@st.composite
def hostile_clusters(draw: st.DrawFn) -> dict[str, Any]:
    cluster = {k: (list(v) if isinstance(v, list) else v) for k, v in BASE.items()}
    for target in draw(st.lists(st.sampled_from(["node", "node", "label", "pod", "name", "policy", "cm"]), max_size=4)):
        if target in ("node", "label", "name"):
            i = draw(st.integers(0, len(cluster["nodes"]) - 1))
            node = draw(mutations.mutated(cluster["nodes"][i], typed=True)) if target == "node" else None
            if node is None:
                node = json.loads(json.dumps(cluster["nodes"][i]))
                meta = node["metadata"]
                if target == "name":
                    meta["name"] = draw(st.sampled_from(NODE_NAMES) | HOSTILE)
                else:
                    where = draw(st.sampled_from(["labels", "annotations"]))
                    key = draw(st.sampled_from([*LABEL_KEYS, kubeagentmode.OBSERVED]) | mutations.STRINGS)
                    meta.setdefault(where, {})[key] = draw(HOSTILE)
            cluster["nodes"][i] = node
        elif target == "pod" and cluster["pods"]:
            i = draw(st.integers(0, len(cluster["pods"]) - 1))
            pod = json.loads(json.dumps(cluster["pods"][i]))
            labels = pod["metadata"].setdefault("labels", {})
            labels[draw(st.sampled_from(["app", "app.kubernetes.io/name"]))] = draw(HOSTILE)
            if draw(st.booleans()):
                pod["metadata"][draw(st.sampled_from(["name", "namespace"]))] = draw(HOSTILE)
            cluster["pods"][i] = draw(mutations.mutated(pod, typed=True)) if draw(st.booleans()) else pod
        elif target == "policy":
            cluster["policy"] = draw(mutations.mutated(cluster["policy"], typed=True))
        elif target == "cm":
            text = cluster["config_map"]["data"][CONFIG_KEY]
            cluster["config_map"] = {"data": {CONFIG_KEY: draw(_hostile_mig_parted(text))}}
    return cluster


@st.composite
def _hostile_mig_parted(draw: st.DrawFn, text: str) -> str:
    """A mig-parted config.yaml, mutated as a tree (then dumped) or as text (raw lines)."""
    if draw(st.booleans()):
        try:
            doc = draw(mutations.mutated(yaml.safe_load(text)))
            return yaml.safe_dump(doc, allow_unicode=True, default_flow_style=draw(st.booleans()))
        except (yaml.YAMLError, RecursionError, ValueError):
            return text
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines)))
        lines.insert(i, draw(st.sampled_from(["", "  ", "    ", "      "])) + draw(HOSTILE | st.sampled_from(_RAW)))
    return "\n".join(lines)


_RAW = [
    "a: &a [*a, *a]",
    "b: &b [*b]",
    "<<: {mig-enabled: true}",
    "mig-devices: {1g.18gb: 1e400}",
    "mig-devices: {1g.18gb: .inf}",
    "mig-devices: {1g.18gb: 99999999999999999999999}",
    "mig-devices: {'1g.18gb\\n#': 1}",
    "devices: all",
    "x: 2026-13-45",
    "mig-devices: {1g.18gb: !!int x}",
    "mig-enabled: !!bool maybe",
    "devices: [0, 0, 0, -1, 999999]",
    "device-filter: ['0x233510DE\\n---']",
    "mig-enabled: yes",
    "version: v2",
    "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]",
    "? [a]\n: b",
    "\t- x",
]


def _facts(cluster: dict[str, Any]) -> tuple[list[NodeFacts], Any]:
    """As kubeimport.read_cluster turns the listed objects into facts (its decoders, not a copy of them)."""
    pods: dict[str, list[Any]] = {}
    for pj in cluster["pods"]:
        if not isinstance(pj, dict):
            continue
        pod = kubeobserve.gpu_pod_from_json(pj)
        if pod is not None and pod.node is not None:
            pods.setdefault(pod.node, []).append(pod)
    facts = []
    for nj in cluster["nodes"]:
        node = kubeobserve.node_from_json(nj)
        if not node.is_gpu_node:
            continue
        observed, error = None, None
        text = node.annotations.get(kubeagentmode.OBSERVED)
        if text is not None:
            try:
                observed = kubeagentmode.decode_observed(str(text))
            except MigplanError as exc:
                error = str(exc)
        facts.append(NodeFacts(node, tuple(pods.get(node.name, ())), observed, error))
    kubeobserve.cluster_policy_from_json(cluster["policy"])
    text = (cluster["config_map"].get("data") or {}).get(CONFIG_KEY)
    return facts, parse_configs("ConfigMap gpu-operator/x", text if isinstance(text, str) else None)


NODE_KEYS = {"apiVersion", "kind", "metadata", "spec"}
GPU_KEYS = {"index", "model", "layout", "mig"}


def _check_files(files: dict[str, str], names: set[str]) -> None:
    for path, text in files.items():
        assert FILE_PATH.fullmatch(path), path
        assert "\x00" not in text
        docs = list(yaml.safe_load_all(text))
        assert len(docs) == 1 and isinstance(docs[0], dict), (path, text)
        doc = docs[0]
        assert set(doc) == NODE_KEYS, (path, text)
        # yaml-language-server takes a comment `#  yaml-language-server: $schema=` as the file's schema
        # (modelineUtil.ts isModeline): only the writer's own first line may be one.
        for line in text.splitlines():
            assert not re.match(r"^\s*#\s+yaml-language-server\s*:", line) or line.startswith(
                "# yaml-language-server: $schema=../"
            ), (path, line)
        if path.startswith("nodes/"):
            assert doc["metadata"] == {"name": path[len("nodes/") : -len(".yaml")]}, (path, text)
            assert doc["metadata"]["name"] in names
            assert set(doc["spec"]) == {"gpus"}, (path, text)
            for gpu in doc["spec"]["gpus"]:
                assert set(gpu) <= GPU_KEYS and isinstance(gpu["model"], str), (path, text)
        elif path.startswith("layouts/"):
            assert doc["metadata"] == {"name": path[len("layouts/") : -len(".yaml")]}, (path, text)


_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=IMPORT_CASES)
@given(cluster=hostile_clusters())
def test_hostile_cluster_objects_import_to_files_that_mean_what_they_say(cluster: dict[str, Any]) -> None:
    facts, configs = _facts(cluster)
    imported = import_cluster(facts, configs, CATALOG)
    assert {p.code for p in imported.problems} <= set(adopt.IMPORT_CODES), imported.problems
    assert all(len(str(p).splitlines()) == 1 and str(p).isprintable() for p in imported.problems)
    files = render_inventory(imported, CLUSTER, catalog=CATALOG)
    _check_files({p: t for p, t in files.items() if p != "cluster.yaml"}, {f.node.name for f in facts})
    result = validate_inventory({p: t.encode() for p, t in files.items()})
    assert {d.code for d in result.diagnostics} <= set(rules.CODES), [str(d) for d in result.diagnostics]
    if not imported.problems:
        assert result.valid, [str(d) for d in result.errors]


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=MIG_PARTED_CASES)
@given(text=_hostile_mig_parted(BASE["config_map"]["data"][CONFIG_KEY]), model=st.sampled_from([None, "H200-141GB"]))
def test_hostile_mig_parted_files_give_layouts_or_an_import_error(text: str, model: str | None) -> None:
    try:
        files = layouts_from_mig_parted(text, CATALOG, model=model)
    except AdoptError as exc:
        assert exc.code in adopt.IMPORT_CODES, exc.code
        return
    for path, body in files.items():
        assert FILE_PATH.fullmatch(path), path
        docs = list(yaml.safe_load_all(body))
        assert len(docs) == 1 and set(docs[0]) == NODE_KEYS, body
    result = validate_inventory({p: t.encode() for p, t in files.items()})
    assert {d.code for d in result.diagnostics} <= set(rules.CODES), [str(d) for d in result.diagnostics]


# Through the real command against the twin: what an API server lets through (it validates label values and
# names, not annotations or ConfigMap data), each value at its worst.
TWIN_CASES: list[tuple[str, str, Any]] = [
    ("annotation", kubeagentmode.OBSERVED, "[" * 100_000),
    ("annotation", kubeagentmode.OBSERVED, "x" * 200_000),
    ("config", CONFIG_KEY, "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))),
    ("config", CONFIG_KEY, "version: v1\nmig-configs:\n  x\n---\n: [{devices: all, mig-enabled: true,"
     " mig-devices: {'1g.18gb\n# yaml-language-server: $schema=https://evil': 1}}]\n"),
]  # fmt: skip


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.mark.timeout(180)
def test_hostile_annotations_and_configs_through_the_command(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from reconciler.cli import cli

    with ClusterTwin.from_inventory(INVENTORY) as twin:
        twin.settle()
        policy = twin.store.list("clusterpolicies.nvidia.com")[0]
        cm_name = policy["spec"]["migManager"]["config"]["name"]
        for n, (what, key, value) in enumerate(TWIN_CASES):
            if what == "annotation":
                twin.store.patch("nodes", "gpu-h200-01", {"metadata": {"annotations": {key: value}}})
            else:
                twin.store.patch("configmaps", cm_name, {"data": {key: value}}, namespace="gpu-operator")
            work = tmp_path / f"case-{n}"
            work.mkdir()
            out = work / "out"
            p = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "reconciler",
                    "import",
                    "--kubeconfig",
                    str(twin.kubeconfig),
                    "--out",
                    str(out),
                    "-o",
                    "json",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert p.returncode in (0, 1), (n, p.stdout, p.stderr)
            assert "Traceback" not in p.stderr and "MP899" not in p.stderr, (n, p.stderr)
            doc = json.loads(p.stdout)
            # The hostile source is refused with its code and the next source used.
            assert ("MP588" if what == "annotation" else "MP584") in {x["code"] for x in doc["problems"]}, doc
            assert {x["code"] for x in doc["problems"]} <= set(adopt.IMPORT_CODES), doc["problems"]
            assert p.returncode == (0 if doc["valid"] and not doc["problems"] else 1), (n, doc)
            assert all(f.startswith("out/") for f in _tree(work)), _tree(work)  # nothing beside --out
            files = {f: (out / f).read_text("utf-8") for f in _tree(out)}
            assert all(FILE_PATH.fullmatch(f) for f in files), sorted(files)
            _check_files({f: t for f, t in files.items() if f != "cluster.yaml"}, set(twin.fleet.nodes))
            validated = CliRunner().invoke(cli, ["validate", str(out)], catch_exceptions=False)
            assert validated.exit_code == (0 if doc["valid"] else 1), (n, validated.output)
            # Restore the base for the next case.
            if what == "annotation":
                base = next(n for n in BASE["nodes"] if n["metadata"]["name"] == "gpu-h200-01")
                restore = {"metadata": {"annotations": {key: base["metadata"]["annotations"].get(key)}}}
                twin.store.patch("nodes", "gpu-h200-01", restore)
            else:
                twin.store.patch("configmaps", cm_name, {"data": BASE["config_map"]["data"]}, namespace="gpu-operator")
        # --out holding a link (nodes/ committed as a link in a cloned repository): refused, nothing outside.
        linked, outside = tmp_path / "linked", tmp_path / "outside"
        linked.mkdir()
        outside.mkdir()
        (linked / "nodes").symlink_to(outside)
        p = subprocess.run(
            [sys.executable, "-m", "reconciler", "import", "--kubeconfig", str(twin.kubeconfig), "--out", str(linked)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert p.returncode == 2 and "MP589" in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert list(outside.iterdir()) == [] and _tree(linked) == {"nodes"}


def _base_import() -> tuple[Any, dict[str, str]]:
    facts, configs = _facts(BASE)
    imported = import_cluster(facts, configs, CATALOG)
    files = render_inventory(imported, CLUSTER, catalog=CATALOG)
    return imported, {p: t for p, t in files.items() if p.startswith("layouts/")}


BASE_IMPORT, BASE_LAYOUTS = _base_import()
MERGE_CASES = 150


@st.composite
def hostile_layouts(draw: st.DrawFn) -> dict[str, str]:
    """--merge: the layouts already in --out (a person's files), mutated as documents or replaced by raw text."""
    out: dict[str, str] = {}
    for path, text in BASE_LAYOUTS.items():
        how = draw(st.sampled_from(["keep", "mutate", "mutate", "raw"]))
        if how == "keep":
            out[path] = text
        elif how == "mutate":
            doc = draw(mutations.mutated(yaml.safe_load(text)))
            try:
                out[path] = yaml.safe_dump(doc, allow_unicode=True)
            except (yaml.YAMLError, ValueError, RecursionError):
                out[path] = text
        else:
            out[path] = draw(st.sampled_from(_RAW) | HOSTILE)
    return out


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=MERGE_CASES)
@given(existing=hostile_layouts())
def test_merge_over_hostile_existing_layouts_adds_files_and_touches_none(existing: dict[str, str]) -> None:
    files = render_inventory(BASE_IMPORT, None, existing_layouts=existing, catalog=CATALOG)
    assert not set(files) & set(existing)  # --merge never rewrites a file that is there
    names = {n.name for n in BASE_IMPORT.nodes}
    _check_files(files, names)
    # Every layout a node file names is there: written now, or an existing one whose content is that cut.
    for path, text in files.items():
        if path.startswith("nodes/"):
            for gpu in yaml.safe_load(text)["spec"]["gpus"]:
                if "layout" in gpu:
                    assert f"layouts/{gpu['layout']}.yaml" in {**existing, **files}, (path, gpu)
