"""Fuzz: `migplan check-workloads` inputs — Kubernetes manifests a person or `helm template` wrote.

The corpus tests/corpus-workloads/*.yaml is parsed, its documents mutated (mutations.py: values of any
type, keys deleted or added, items duplicated or swapped; plus wrappers: `kind: List` inside a List,
deep nesting), written back as YAML (block or flow), JSON (NaN and Infinity allowed, as Python writes
them) or raw text edits (duplicate keys, anchors, quantities such as `1e400`), and read as the command
reads them: manifests.read_manifests then workloads.check_workloads against the example plan.
Asserted: nothing raises, every diagnostic has a code in workloads.CODES and a file, and each case ends
quickly. A fixed set of hostile files (30 MB, FIFO, symlink loop, non-UTF-8 names, alias bomb, deep
nesting) goes through the real command in one process each: no traceback, exit 0/1/2 as the README
documents, every diagnostic registered. Derandomized for CI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import mutations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.workloads import workloads
from reconciler.logic.workloads.manifests import read_manifests

CORPUS = Path(__file__).resolve().parents[1] / "corpus-workloads"
FILES: dict[str, str] = {
    p.name: p.read_text("utf-8") for p in sorted(CORPUS.iterdir()) if p.suffix in (".yaml", ".json")
}


def _docs(text: str) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return []  # the syntax-error cases: fuzzed as text only


DOCS: dict[str, list[Any]] = {n: _docs(t) for n, t in FILES.items()}
DOCS = {n: d for n, d in DOCS.items() if d}
_RESULT = validate_inventory(read_inventory_dir(resources.inventory_dir()), catalog=load_catalog())
assert _RESULT.desired is not None and _RESULT.valid
DESIRED = _RESULT.desired
NODES = workloads.plan_nodes(DESIRED, load_catalog())
WORKLOAD_CASES = 600
TEXT_CASES = 300
CASE_SECONDS = 2.0  # one manifest file, read and checked (the slowest seen is well under 0.1 s)

# Raw text that a YAML or JSON writer would not produce but a person or a templater might.
TEXT_EDITS = [
    "nvidia.com/mig-1g.18gb: 1e400",
    "nvidia.com/mig-1g.18gb: Infinity",
    "nvidia.com/mig-1g.18gb: .nan",
    "nvidia.com/mig-1g.18gb: 99999999999999999999999999999999999999",
    "nvidia.com/mig-1g.18gb: 1Ei",
    "nvidia.com/mig-1g.18gb: 0.5",
    "nvidia.com/mig-1g.18gb: -1",
    "nvidia.com/gpu: 1e3",
    "replicas: 1e400",
    "replicas: 010",
    "replicas: 0x10",
    "replicas: .inf",
    "replicas: 99999999999999999999",
    "parallelism: -5",
    "kind: List",
    "kind: PodList",
    "items: [[[[]]]]",
    "<<: *nope",
    "a: &a [*a]",
    "!!python/object:os.system {}",
    "key: !!binary AAAA",
    "key: !!timestamp 2026-99-99",
    'nodeName: "\\u0000"',
    "- \u202e\U0001f642",
    "{{ .Values.x }}",
    "--- {kind: Pod, apiVersion: v1}",
    "...",
    "\t",
    "? [a, b]\n: c",
    "? {a: 1}\n: c",
    "1: 2",
    "null: x",
]


def _dump(doc: Any, how: str) -> str:
    if how == "json":
        return json.dumps(doc, default=str)  # NaN and Infinity as Python writes them
    return yaml.safe_dump(doc, default_flow_style=(how == "flow"), sort_keys=False, allow_unicode=True)


@st.composite
def mutated_files(draw: st.DrawFn) -> bytes:
    name = draw(st.sampled_from(sorted(DOCS)))
    docs = draw(mutations.mutated(DOCS[name]))
    if not isinstance(docs, list):
        docs = [docs]
    wrap = draw(st.sampled_from(["none", "none", "list", "list-in-list", "deep"]))
    if wrap == "list":
        docs = [{"apiVersion": "v1", "kind": "List", "items": docs}]
    elif wrap == "list-in-list":
        docs = [{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "PodList", "items": docs}]}]
    elif wrap == "deep":
        deep: Any = docs
        for _ in range(draw(st.integers(50, 400))):
            deep = {"k": deep} if draw(st.booleans()) else [deep]
        docs = [{"apiVersion": "v1", "kind": "Pod", "spec": deep}]
    how = draw(st.sampled_from(["block", "block", "flow", "json"]))
    try:
        text = (
            "---\n".join(_dump(d, how) for d in docs)
            if how != "json"
            else _dump(docs[0] if len(docs) == 1 else docs, how)
        )
    except (RecursionError, ValueError):
        text = FILES[name]
    return text.encode("utf-8", "surrogatepass")


# Values written raw after a key of the corpus, where a YAML writer would have quoted them.
RAW_VALUES = [
    "1e400", "-1e400", "Infinity", ".inf", "-.inf", ".nan", "NaN", "9" * 40, "1Ei", "1e3", "0.5", "-1", "010",
    "0x10", "0o7", "+4", "1_000", "1:20", "~", "null", "yes", "[]", "{}", "[[[[[[]]]]]]", "&a x", "*a", "!!binary AAAA",
    "!!timestamp 2026-99-99", "!!timestamp x y", "!!bool maybe",
    "!!python/object:os.system {}", "!!float x", "!!int 1.5", "\"\\u0000\"", "'\u202e'",
    "|\n  multi\n  line", "{{ .Values.x }}", "x #", "'a: b'", "\"\\ud800\"",
]  # fmt: skip


@st.composite
def edited_texts(draw: st.DrawFn) -> bytes:
    """A corpus file edited as text: a value replaced raw, a line duplicated (a duplicate key), raw lines
    inserted at a drawn place and indentation."""
    lines = FILES[draw(st.sampled_from(sorted(FILES)))].splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines)))
        op = draw(st.sampled_from(["value", "value", "value", "duplicate", "insert"]))
        if op == "value" and i < len(lines) and re.match(r"^\s*(- )?[\w./-]+:\s*\S", lines[i]):
            key = lines[i].split(":", 1)[0] if "/" not in lines[i].split(":", 1)[0] else lines[i].rsplit(": ", 1)[0]
            lines[i] = f"{key}: {draw(st.sampled_from(RAW_VALUES))}"
        elif op == "duplicate" and i < len(lines):
            lines.insert(i, lines[i])
        else:
            indent = draw(st.sampled_from(["", "  ", "    ", "      ", "        ", "          "]))
            lines.insert(i, indent + draw(st.sampled_from(TEXT_EDITS)))
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def _check(data: bytes) -> None:
    start = time.monotonic()
    manifests, diags = read_manifests(data, file="f.yaml")
    found, summaries = workloads.check_workloads(manifests, desired=DESIRED, nodes=NODES)
    more, _ = workloads.check_workloads(
        manifests, desired=DESIRED, nodes=workloads.with_cluster_facts(NODES, free={}), free_source="x"
    )
    elapsed = time.monotonic() - start
    for d in diags + found + more:
        assert d.code in workloads.CODES, d
        assert d.file == "f.yaml", d
        assert d.line is None or d.line >= 1, d
        assert len(str(d).splitlines()) == 1 and str(d).isprintable(), str(d)  # no forged line
        json.dumps(d.to_json())
    json.dumps(summaries)
    assert elapsed < CASE_SECONDS, elapsed


_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=WORKLOAD_CASES)
@given(data=mutated_files())
def test_mutated_manifests_give_registered_diagnostics(data: bytes) -> None:
    _check(data)


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=TEXT_CASES)
@given(data=edited_texts())
def test_hostile_manifest_text_gives_registered_diagnostics(data: bytes) -> None:
    _check(data)


def _hostile_tree(root: Path) -> None:
    """The files no mutation of a document produces: size, kind of file, names, links, expansion, depth."""
    good = FILES["good-article-pod.yaml"].encode()
    (root / "big.yaml").write_bytes(b"# 30 MB\n" + b"a" * (30 * 1024 * 1024) + b"\n")
    (root / "over.yaml").write_bytes(b"a" * (33 * 1024 * 1024))
    os.mkfifo(root / "fifo.yaml")
    (root / "loop1.yaml").symlink_to("loop2.yaml")
    (root / "loop2.yaml").symlink_to("loop1.yaml")
    (root / "dangling.json").symlink_to(root / "nowhere")
    (root / "sub").mkdir()
    (root / "sub" / "up").symlink_to("..")  # a directory loop: not followed
    (root / "sub" / "self.yaml").symlink_to(".")
    with open(os.fsencode(root) + b"/\xff\xfe.yaml", "wb") as f:
        f.write(good)
    (root / "new\nline::error::.yaml").write_bytes(good)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    (root / "bomb.yaml").write_text("apiVersion: v1\nkind: Pod\n" + bomb)
    (root / "deep.yaml").write_text("[" * 100_000 + "]" * 100_000)
    (root / "deep-block.yaml").write_text("a:\n" + "".join("  " * i + "- \n" for i in range(1, 600)))
    (root / "deep.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    limits = '{"limits": {"nvidia.com/mig-1g.18gb": NaN}, "requests": {"nvidia.com/mig-1g.18gb": Infinity}}'
    (root / "nan.json").write_text(
        '{"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1e400, "template": {"spec": '
        f'{{"containers": [{{"name": "a", "resources": {limits}}}]}}}}}}}}'
    )
    (root / "dup.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nkind: Deployment\nspec:\n  replicas: 3\n  replicas: 1e400\n"
    )
    pod = yaml.safe_load(good)
    nested = {"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": [pod, 7]}]}
    (root / "list-in-list.yaml").write_text(yaml.safe_dump(nested))
    (root / "dir.yaml").mkdir()


@pytest.mark.timeout(120)
def test_hostile_files_through_the_command(tmp_path: Path) -> None:
    _hostile_tree(tmp_path)
    start = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "reconciler", "check-workloads", "--example", "-o", "json", str(tmp_path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - start
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1, err
    assert "Traceback" not in err and "MP899" not in err, err
    doc = json.loads(p.stdout)
    diags = doc["errors"] + doc["warnings"]
    assert all(d["code"] in workloads.CODES and d["file"] for d in diags), diags
    by_file = {Path(d["file"]).name: d["code"] for d in diags}
    assert {k: by_file.get(k) for k in ("over.yaml", "fifo.yaml", "loop1.yaml", "dangling.json")} == dict.fromkeys(
        ("over.yaml", "fifo.yaml", "loop1.yaml", "dangling.json"), "MP600"
    ), by_file
    assert {k: by_file.get(k) for k in ("bomb.yaml", "deep.yaml", "deep.json")} == dict.fromkeys(
        ("bomb.yaml", "deep.yaml", "deep.json"), "MP601"
    ), by_file
    assert by_file.get("nan.json") in ("MP605", "MP619"), by_file
    # The pod inside the List inside the List, and the two good files with odd names, are read and checked.
    assert len(doc["workloads"]) == 3, doc["workloads"]
    assert elapsed < 30, elapsed


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "data",
    [
        b"a" * (33 * 1024 * 1024),
        b"\xff\xfe\x00garbage",
        b"[" * 200_000,
        b"{{ .Values.image }}\n",
        b"--- !!python/object/apply:os.system ['true']\n",
    ],
    ids=["over-limit", "binary", "deep", "template", "python-tag"],
)
def test_hostile_stdin_through_the_command(data: bytes) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "reconciler", "check-workloads", "--example", "-o", "json", "-"],
        input=data,
        capture_output=True,
        timeout=60,
        check=False,
    )
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1 and "Traceback" not in err and "MP899" not in err, err
    diags = [*json.loads(p.stdout)["errors"], *json.loads(p.stdout)["warnings"]]
    assert diags and all(d["code"] in workloads.CODES and d["file"] == "<stdin>" for d in diags), diags


# --reports-from-git: drift.yaml comes from a branch people can push to. Mutated, it is free partitions per
# node (then checked against as `free`) or ReportUnreadable (MP622), quickly.
REPORT = {
    "apiVersion": "migplan/v1",
    "kind": "DriftReport",
    "revision": "main@sha1:abc",
    "nodes": [
        {"name": "gpu-h200-01", "occupancy": [{"profile": "3g.71gb", "total": 1, "used": 1}]},
        {"name": "gpu-h200-02", "occupancy": [{"profile": "3g.71gb", "total": 2, "used": 0}, {"profile": "gpu"}]},
    ],
}
REPORT_CASES = 300
POD = read_manifests(FILES["good-article-pod.yaml"].encode(), file="pod.yaml")[0]


@pytest.mark.timeout(120)
@settings(_SETTINGS, max_examples=REPORT_CASES)
@given(doc=mutations.mutated(REPORT), flow=st.booleans(), raw=st.none() | st.sampled_from(RAW_VALUES))
def test_a_mutated_drift_report_is_free_partitions_or_unreadable(doc: Any, flow: bool, raw: str | None) -> None:
    try:
        data = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True).encode("utf-8", "surrogatepass")
    except (yaml.YAMLError, ValueError, RecursionError):
        return
    if raw is not None:  # a value a YAML writer would have quoted, written raw after a key
        data = re.sub(rb"(?m)^(\w+): .*$", lambda m: m.group(1) + b": " + raw.encode(), data, count=1)
    start = time.monotonic()
    try:
        _, free = workloads.free_from_drift_report(data)
    except workloads.ReportUnreadable as exc:
        assert str(exc)
        return
    nodes = workloads.with_cluster_facts(NODES, free=free)
    found, _ = workloads.check_workloads(POD, desired=DESIRED, nodes=nodes, free_source="the report")
    assert all(d.code in workloads.CODES for d in found)
    assert time.monotonic() - start < CASE_SECONDS
