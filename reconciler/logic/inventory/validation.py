"""Validate an inventory root: files (path -> bytes) in, DesiredState and diagnostics out.

Pure: no file system, no Git, no clock. The caller reads the files (reconciler.adapters.fsinventory
for a directory, the Git loader for a revision) and passes them as a mapping of '/'-separated paths
relative to the inventory root:

    cluster.yaml          kind Cluster
    nodes/<node>.yaml     kind Node     (file name = metadata.name)
    layouts/<name>.yaml   kind Layout   (file name = metadata.name)

Other files: non-YAML files (README.md, .gitkeep, ...) are ignored, other YAML files get a warning.

Two stages, so that a one-node change costs one parse:
1. per file (cached in a ParseCache by Git blob id, or by a content hash): YAML loading
   (reconciler.logic.inventory.yamldocs), the schema pass (reconciler.logic.inventory.schemas), building model values,
   and the rules that need only that file (node name = file name, duplicate GPU indexes, the
   hardware rules of GPUs whose partitions are written inline);
2. across files, re-run every time over the cached results (cheap): the cluster file, duplicate
   node names, layout references and the hardware rules of layouts (memoised per layout and GPU
   model), and the strategy rules.

All errors of all files are reported in one run; DesiredState is returned only when there is none.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.catalog import Catalog, GpuModel, load_catalog
from reconciler.logic.inventory import deviceclasses, reporttarget, rules, schemas, yamldocs
from reconciler.logic.inventory.rules import GpuCheck, diag
from reconciler.logic.inventory.yamldocs import YamlDoc
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.durations import parse_duration
from reconciler.model.inventory import (
    CONFIG_PROPAGATION_SECONDS,
    DEFAULT_WRITE_CONCURRENCY,
    ApplyMode,
    ApplySettings,
    ClusterSpec,
    DeclaredClass,
    DesiredState,
    DeviceClassSettings,
    GpuOperatorSettings,
    GpuSpec,
    InventoryFiles,
    LayoutSpec,
    MigStrategy,
    NodeSpec,
    OwnerClass,
    Partition,
    Placement,
    ReportSettings,
    SourceRef,
    VerifyMode,
    VerifySettings,
)
from reconciler.model.revisions import WORKDIR, Revision

__all__ = [
    "ParseCache",
    "SolverChoice",
    "ValidationResult",
    "classify",
    "solver_choices",
    "validate_inventory",
]

CLUSTER_FILE = "cluster.yaml"
# Use the fast parser and compiled schema for plain, valid files (results are identical; tests run
# the corpus and the example both ways). False forces the reference path everywhere.
FAST_PATH = True
# (model key, MIG enabled, ((profile, placement), ...)) -> placements, for GPUs whose hardware check
# found nothing to say: fleets repeat a few cuts thousands of times, and the answer depends on
# nothing else (diagnostics, which carry lines, are never memoised).
_MEMO_LIMIT = 65_536
_GpuMemo = dict[tuple[str, bool, tuple[tuple[str, int | None], ...]], tuple[Placement, ...]]
_YAML_SUFFIXES = (".yaml", ".yml")
_NOT_CUT: Any = object()  # _shape_of not called yet (None is its answer for a file without a shape)


@dataclass(frozen=True, slots=True)
class ValidationResult:
    desired: DesiredState | None  # None when any error; GpuSpec.placements filled by the solver
    diagnostics: tuple[Diagnostic, ...]  # every error and warning of every file, sorted by file, line

    @property
    def valid(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if not d.is_error)


@dataclass(frozen=True, slots=True)
class _Entry:
    """Stage-1 result for one file; immutable so a cache can hand it to any number of runs."""

    path: str
    kind: str
    diagnostics: tuple[Diagnostic, ...]
    blob: str = ""
    cluster: ClusterSpec | None = None
    layout: LayoutSpec | None = None
    node: NodeSpec | None = None  # GPUs that use a layout have partitions=() until stage 2
    layout_refs: Mapping[int, SourceRef] = field(default_factory=dict)  # GPU index -> `layout:` key
    # Read by the fast path, whose layout_refs lines are only the GPU item's line: a diagnostic that needs the
    # exact `layout:` line reads the file again, from the files being validated (see _layout_ref). A flag, not the
    # bytes: a controller keeps its cache between cycles, and the files' bytes need not live as long (issue 29,
    # `runrss4`); the entry's key (path, blob id or content id) names exactly the bytes validated with it.
    reread: bool = False


class ParseCache:
    """Per-file parse + schema + per-file rule results, keyed by (path, blob id).

    `parses` counts files actually parsed, so tests can show that a one-node change costs one
    parse. Entries not used by the latest run are dropped, so a long-running controller holds
    one inventory's worth of results, not its history.
    """

    def __init__(self) -> None:
        self.parses = 0
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._layout_checks: dict[tuple[str, str, str], GpuCheck] = {}
        self._gpu_memo: _GpuMemo = {}
        self._shapes: _ShapeMemo = {}  # node files that differ only by the node's name (see _shape_of)
        self._catalog: Catalog | None = None

    def _bind(self, catalog: Catalog) -> None:
        # Per-file results depend on the catalog (model resolution, hardware rules).
        if self._catalog is not catalog:
            self._entries.clear()
            self._layout_checks.clear()
            self._gpu_memo.clear()
            self._shapes.clear()
            self._catalog = catalog

    def __len__(self) -> int:
        return len(self._entries)


def classify(path: str) -> tuple[str | None, Diagnostic | None]:
    """The document kind a path holds (Cluster, Node, Layout), or None for a file to skip, plus a
    diagnostic for paths that are wrong rather than merely foreign."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        return None, diag("MP411", f"invalid inventory path {path!r}: paths are relative and '/'-separated", None)
    if path == CLUSTER_FILE:
        return "Cluster", None
    if path in ("nodes", "layouts") or (parts[0] == CLUSTER_FILE and len(parts) > 1):
        # A file where a folder belongs (or a folder where cluster.yaml belongs): read as it is,
        # the inventory would silently have no nodes, layouts or cluster settings.
        what = "a file where the folder" if path in ("nodes", "layouts") else "a folder where the file"
        return None, diag("MP420", f"{what} {parts[0]} belongs; the inventory is not applied", SourceRef(path))
    if len(parts) > 2 and parts[0] in ("nodes", "layouts") and parts[1].endswith(_YAML_SUFFIXES):
        return None, diag(
            "MP420",
            f"{parts[0]}/{parts[1]} is a folder where a file belongs; the inventory is not applied",
            SourceRef(f"{parts[0]}/{parts[1]}"),
        )
    is_yaml = path.endswith(_YAML_SUFFIXES)
    if len(parts) >= 2 and parts[0] in ("nodes", "layouts"):
        kind = "Node" if parts[0] == "nodes" else "Layout"
        if len(parts) > 2:
            if is_yaml:
                return None, diag(
                    "MP411",
                    f"{parts[0]}/ holds one file per {kind.lower()}, not folders; move it to {parts[0]}/{parts[-1]}",
                    SourceRef(path),
                )
            return None, None
        if path.endswith(".yaml") and len(parts[1]) > len(".yaml"):
            return kind, None
        if is_yaml:
            return None, diag("MP410", f"ignored: files under {parts[0]}/ must end in .yaml", SourceRef(path))
        return None, None
    if is_yaml:
        return None, diag(
            "MP410",
            "ignored: not part of the inventory format (cluster.yaml, nodes/<node>.yaml, layouts/<name>.yaml)",
            SourceRef(path),
        )
    return None, None


def validate_inventory(
    files: Mapping[str, bytes],
    *,
    revision: Revision = WORKDIR,
    cache: ParseCache | None = None,
    blob_ids: Mapping[str, str] | None = None,
    catalog: Catalog | None = None,
    unreadable: Mapping[str, str] | None = None,
    followed_branch: str | None = None,
    root: str = "",
) -> ValidationResult:
    """Validate one inventory root. Never raises for bad input: it all ends up in diagnostics.

    `unreadable` (path -> why) lists what the loader could not read; by default it is taken from
    `files` when that is an InventoryFiles. Each entry that concerns the inventory is an error (MP420):
    an inventory with a part that cannot be read is refused, never taken as smaller than it is.

    `followed_branch` and `root` say where this inventory lives (the branch a controller follows,
    the root inside the repository) for the rule that keeps report commits off the inventory
    (MP412); an unknown branch (None) is treated as the reports branch, the safe assumption."""
    if unreadable is None:
        unreadable = files.unreadable if isinstance(files, InventoryFiles) else {}
    result = _validate(
        files,
        revision=revision,
        cache=cache,
        blob_ids=blob_ids,
        catalog=catalog,
        where=(followed_branch, root),
    )
    problems = unreadable_diagnostics(unreadable)
    if not problems:
        return result
    diagnostics = tuple(sorted((*result.diagnostics, *problems), key=_sort_key))
    return ValidationResult(None, diagnostics)


def _concerns_inventory(path: str) -> bool:
    """Whether an unreadable path could hold part of the inventory (the root itself, cluster.yaml,
    anything under nodes/ or layouts/, any YAML file); others (a README, docs/) are not inventory."""
    first = path.split("/", 1)[0]
    return path == "." or first in (CLUSTER_FILE, "nodes", "layouts") or path.endswith(_YAML_SUFFIXES)


def unreadable_diagnostics(unreadable: Mapping[str, str]) -> tuple[Diagnostic, ...]:
    """MP420 for each unreadable path that concerns the inventory (see InventoryFiles)."""
    out = []
    for path in sorted(unreadable):
        if _concerns_inventory(path) or "nested deeper" in unreadable[path]:
            shown = path if len(path) <= 200 else path[:100] + "..." + path[-60:]
            out.append(
                diag(
                    "MP420", f"cannot read {shown}: {unreadable[path]}; the inventory is not applied", SourceRef(shown)
                )
            )
    return tuple(out)


def _validate(
    files: Mapping[str, bytes],
    *,
    revision: Revision,
    cache: ParseCache | None,
    blob_ids: Mapping[str, str] | None,
    catalog: Catalog | None,
    where: tuple[str | None, str],
) -> ValidationResult:
    catalog = catalog if catalog is not None else load_catalog()
    cache = cache if cache is not None else ParseCache()
    cache._bind(catalog)
    diagnostics: list[Diagnostic] = []
    entries: list[_Entry] = []
    used: dict[tuple[str, str], _Entry] = {}
    for path in sorted(files):
        kind, problem = classify(path)
        if problem is not None:
            diagnostics.append(problem)
        if kind is None:
            continue
        data = files[path]
        blob = (blob_ids or {}).get(path)
        shape: _Shape | None = _NOT_CUT
        if blob is None and kind == "Node":
            # A node file's shape names its content exactly (the text with its stem cut out, and the stem): its
            # digest, needed anyway, stands in for a content hash of the file.
            shape = _shape_of(path, data)
            blob = f"{shape.key.hex()}/{shape.stem.decode()}" if shape is not None else None
        blob = blob or _content_id(data)
        key = (path, blob)
        entry = cache._entries.get(key)
        if entry is None:
            entry = _stage1(path, kind, data, catalog, cache._gpu_memo, blob, cache._shapes, shape)
            cache.parses += 1
        used[key] = entry
        entries.append(entry)
        diagnostics.extend(entry.diagnostics)
    cache._entries = used

    desired, cross = _stage2(entries, files, catalog=catalog, cache=cache, revision=revision)
    diagnostics.extend(cross)
    if desired is not None:
        diagnostics.extend(_report_target(desired.cluster, followed_branch=where[0], root=where[1]))
    ordered = tuple(sorted(_dedupe(diagnostics), key=_sort_key))
    if any(d.is_error for d in ordered):
        return ValidationResult(None, ordered)
    return ValidationResult(desired, ordered)


def _report_target(cluster: ClusterSpec, *, followed_branch: str | None, root: str) -> list[Diagnostic]:
    problem = reporttarget.report_target_problem(cluster.reports, followed_branch=followed_branch, root=root)
    if problem is None:
        return []
    return [diag(reporttarget.CODE, problem, cluster.reports.source or SourceRef(CLUSTER_FILE))]


def _content_id(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _sort_key(d: Diagnostic) -> tuple[str, int, str, str]:
    return (d.file or "", d.line or 0, d.code, d.message)


def _dedupe(ds: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple[str, str | None, int | None, str]] = set()
    out = []
    for d in ds:
        k = (d.code, d.file, d.line, d.message)
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out


# --------------------------------------------------------------------------------------------
# Stage 1: one file


def _stage1(
    path: str,
    kind: str,
    data: bytes,
    catalog: Catalog,
    memo: _GpuMemo,
    blob: str,
    shapes: _ShapeMemo | None = None,
    shape: _Shape | None = _NOT_CUT,
) -> _Entry:
    """One file's entry. `shape` is the file's _shape_of() when the caller has it already."""
    if shape is _NOT_CUT:
        shape = _shape_of(path, data) if kind == "Node" else None
    if shapes is None:
        shape = None
    if shape is not None and shapes is not None:
        known = shapes.get(shape.key, _UNSEEN)
        if isinstance(known, _Recipe):
            return _rebind(known, path, shape.stem.decode(), blob)
        if known is None:
            shape = None  # seen, and not reusable: read as usual without trying again
    # A new shape's file is parsed once: the fast path and the shape's guard share the parse.
    parsed = yamldocs.fast_parse(data) if shape is not None else _NOT_PARSED
    e = _stage1_entry(path, kind, data, catalog, memo, parsed)
    if shape is not None and shapes is not None and len(shapes) < _SHAPE_LIMIT:
        shapes[shape.key] = _recipe(e) if _shape_holds(e, shape, parsed) else None
    # Direct construction: dataclasses.replace() costs more than the rest of a small file's entry.
    return _Entry(e.path, e.kind, e.diagnostics, blob, e.cluster, e.layout, e.node, e.layout_refs, e.reread)


# --------------------------------------------------------------------------------------------
# Node files that differ only by the node's name
#
# A fleet's node files repeat a handful of cuts: most differ from another one only by the node's name (the file's
# stem, written once as `metadata.name`). A node file whose text, with its stem cut out, is a shape already read
# clean gets that file's entry with its name and file swapped in, without being parsed again. What makes the swap
# exact (tests/unit/inventory/test_validation_shapes.py holds each guard):
#   - the stem is a plain YAML scalar that can only be read as that string (a letter first, then letters, digits
#     and dashes, no YAML keyword), so the same text with another such stem parses to the same document with
#     another name;
#   - cut out wherever it occurs (at most four times: the name, and comments that repeat it), the rest of the text
#     is the same byte for byte (line numbers included);
#   - the shape was read clean (no diagnostic at all) as `metadata.name` == its stem, and every occurrence is the
#     name's value or in a comment, none in a label or another value. Either the text says so plainly (each
#     occurrence is the whole value of the `name:` line where metadata.name was read, or in a comment line before
#     any content, which cannot be anything but a comment), or the same text with a probe name in the stem's
#     places parses to the same document with the probe as its name (a second parse of the file).
# Anything else is read as before.

_SHAPE_LIMIT = 4096  # distinct shapes kept per cache: a fleet has a handful; a bound against a hostile one
_SHAPE_STEM = re.compile(rb"[a-z][a-z0-9-]{0,251}[a-z0-9]\Z")
_YAML_WORDS = frozenset({b"true", b"false", b"yes", b"no", b"on", b"off", b"null", b"y", b"n"})
_SHAPE_HOLE = b"\x00"  # never in a readable YAML file (a NUL is refused), so it cannot stand for real text
_SHAPE_PROBE = "migplan-shape-probe"
_ShapeMemo = dict[bytes, "_Recipe | None"]  # None: a shape seen and found not reusable (not tried again)
_UNSEEN = object()
_Parsed = tuple[str, dict[str, Any]] | None  # yamldocs.fast_parse's answer
_NOT_PARSED: Any = object()  # fast_parse not called yet (None is its answer for a file it declines)


@dataclass(frozen=True, slots=True)
class _Shape:
    key: bytes  # digest of the text with the stem cut out
    stem: bytes
    template: bytes


def _shape_of(path: str, data: bytes) -> _Shape | None:
    if not (path.startswith("nodes/") and path.endswith(".yaml")) or path.count("/") != 1:
        return None
    stem = path[len("nodes/") : -len(".yaml")].encode()
    if stem in _YAML_WORDS or not _SHAPE_STEM.match(stem) or not 0 < data.count(stem) <= 4 or _SHAPE_HOLE in data:
        return None
    template = data.replace(stem, _SHAPE_HOLE)
    return _Shape(hashlib.blake2b(template, digest_size=16).digest(), stem, template)


def _shape_holds(entry: _Entry, shape: _Shape, read: _Parsed) -> bool:
    """The entry read clean, names the file's stem, and the shape is the name's value alone (the probe).
    `read` is the file's own fast parse (None where the fast parser declined it)."""
    if entry.diagnostics or entry.node is None or entry.node.name != shape.stem.decode():
        return False
    if entry.node.source is not None and _only_name_and_leading_comments(shape.template, entry.node.source.line):
        return True
    probe_text = shape.template.replace(_SHAPE_HOLE, _SHAPE_PROBE.encode())
    if read is not None:
        probe = yamldocs.fast_parse(probe_text)
        if probe is None:
            return False
        value, probed = read[1], probe[1]
    else:
        # The reference loader read this file (a flow list, quotes): the probe is read the same way, once per
        # distinct shape, so a fleet written in that style is not read file by file at ~2 ms each either.
        own, _ = yamldocs.load_yaml(shape.template.replace(_SHAPE_HOLE, shape.stem), file="")
        other, _ = yamldocs.load_yaml(probe_text, file="")
        if own is None or other is None:
            return False
        value, probed = own.value, other.value
    if not isinstance(value, dict) or not isinstance(probed, dict):
        return False
    meta = probed.get("metadata")
    if not isinstance(meta, dict) or meta.get("name") != _SHAPE_PROBE:
        return False
    renamed = {**probed, "metadata": {**meta, "name": entry.node.name}}
    return bool(renamed == value)


def _only_name_and_leading_comments(template: bytes, name_line: int | None) -> bool:
    """Every hole in the template is either the whole value of line `name_line` (`<spaces>name: <hole>`, where
    metadata.name was read) or in the comment lines that open the file (lines starting with '#' before any other
    line: no scalar, quote or block can be open there). Anything else needs the probe."""
    header = 0  # where the opening comment lines end
    while template.startswith(b"#", header):
        end = template.find(b"\n", header)
        if end < 0:
            return True  # nothing but comments
        header = end + 1
    hole = template.find(_SHAPE_HOLE, header)
    while hole >= 0:
        start = template.rfind(b"\n", 0, hole) + 1
        end = template.find(b"\n", hole)
        line = template[start : end if end >= 0 else len(template)]
        if template.count(b"\n", 0, start) + 1 != name_line or line.lstrip(b" ") != b"name: " + _SHAPE_HOLE:
            return False
        hole = template.find(_SHAPE_HOLE, hole + 1)
    return True


# A rebind builds every object of the node again with the new file in its SourceRefs (about 50 per node file, for
# thousands of files). The shape's entry is flattened once into a recipe of plain tuples, so a rebind is a loop
# over values, and its most numerous objects (SourceRef, Partition, GpuSpec) are built by setting their slots
# directly: a frozen dataclass's __init__ sets each field through object.__setattr__(self, name, value), which
# looks the slot's descriptor up by name every time, and was most of a rebind's cost. The result is the same
# object (test_validation_shapes.py compares every rebound entry with the parse of its file, and checks these
# field lists against the classes'); it is only valid for frozen, slotted dataclasses without __post_init__.
_NEW = object.__new__
_REF_FIELDS = ("file", "line")
_PARTITION_FIELDS = ("profile", "placement", "owner", "purpose", "source")
_GPU_FIELDS = ("index", "model", "mig_enabled", "partitions", "layout", "placements", "source")
_set_ref_file, _set_ref_line = (vars(SourceRef)[f].__set__ for f in _REF_FIELDS)
_set_profile, _set_placement, _set_owner, _set_purpose, _set_source = (
    vars(Partition)[f].__set__ for f in _PARTITION_FIELDS
)
_set_gpu = tuple(vars(GpuSpec)[f].__set__ for f in _GPU_FIELDS)


def _ref(file: str, line: int | None) -> SourceRef:
    ref: SourceRef = _NEW(SourceRef)
    _set_ref_file(ref, file)
    _set_ref_line(ref, line)
    return ref


def _partition(
    profile: str, placement: int | None, owner: str | None, purpose: str | None, source: SourceRef | None
) -> Partition:
    """Partition(profile, placement, owner, purpose, source)."""
    partition: Partition = _NEW(Partition)
    _set_profile(partition, profile)
    _set_placement(partition, placement)
    _set_owner(partition, owner)
    _set_purpose(partition, purpose)
    _set_source(partition, source)
    return partition


def _gpu(
    index: int,
    model: str,
    mig_enabled: bool,
    partitions: tuple[Partition, ...],
    layout: str | None,
    placements: tuple[Placement, ...],
    source: SourceRef | None,
) -> GpuSpec:
    """GpuSpec(...) with every field given (stage 2 builds one per GPU that uses a layout, too)."""
    gpu: GpuSpec = _NEW(GpuSpec)
    set_index, set_model, set_mig, set_partitions, set_layout, set_placements, set_source = _set_gpu
    set_index(gpu, index)
    set_model(gpu, model)
    set_mig(gpu, mig_enabled)
    set_partitions(gpu, partitions)
    set_layout(gpu, layout)
    set_placements(gpu, placements)
    set_source(gpu, source)
    return gpu


# index, model, MIG enabled, layout, placements, line of the GPU item,
# ((profile, placement, owner, purpose, line of the partition item), ...)
_GpuRecipe = tuple[int, str, bool, str | None, tuple[Placement, ...], int | None, tuple[tuple[Any, ...], ...]]


@dataclass(frozen=True, slots=True)
class _Recipe:
    """A shape's entry as plain values: what _rebind needs to build it again for another file."""

    entry: _Entry
    name_line: int | None
    gpus: tuple[_GpuRecipe, ...]
    layout_refs: tuple[tuple[int, int | None], ...]


def _line(src: SourceRef | None) -> int | None:
    return None if src is None else src.line


def _recipe(e: _Entry) -> _Recipe | None:
    node = e.node
    assert node is not None  # only clean node entries become shapes (_shape_holds)
    if node.source is None or any(g.source is None or any(p.source is None for p in g.partitions) for g in node.gpus):
        return None  # never the case for a node read from a file; a recipe always writes a SourceRef
    gpus = tuple(
        (
            g.index,
            g.model,
            g.mig_enabled,
            g.layout,
            g.placements,
            _line(g.source),
            tuple((p.profile, p.placement, p.owner, p.purpose, _line(p.source)) for p in g.partitions),
        )
        for g in node.gpus
    )
    refs = tuple((i, s.line) for i, s in e.layout_refs.items())
    return _Recipe(e, _line(node.source), gpus, refs)


def _rebind(r: _Recipe, path: str, name: str, blob: str) -> _Entry:
    """The entry of another file of the same shape, with this file's name and path in every position."""
    gpus = []
    for index, model, mig_enabled, layout, placements, line, parts in r.gpus:
        partitions = tuple(
            [_partition(profile, start, owner, purpose, _ref(path, at)) for profile, start, owner, purpose, at in parts]
        )
        gpus.append(_gpu(index, model, mig_enabled, partitions, layout, placements, _ref(path, line)))
    e = r.entry
    assert e.node is not None  # a recipe is only made of a node entry
    renamed = NodeSpec(name, tuple(gpus), e.node.labels, _ref(path, r.name_line), e.node.layout_writer)
    refs = {i: _ref(path, line) for i, line in r.layout_refs}
    return _Entry(path, e.kind, (), blob, None, None, renamed, refs, e.reread)


def _stage1_entry(
    path: str, kind: str, data: bytes, catalog: Catalog, memo: _GpuMemo, parsed: _Parsed = _NOT_PARSED
) -> _Entry:
    # Fast path first (see yamldocs.fast_parse): it only ever says "this file is plain and
    # schema-valid and has nothing to report, here is what it holds"; anything else, including
    # every diagnostic, comes from the reference path below.
    if FAST_PATH:
        entry = _fast_stage1(path, kind, data, catalog, memo, parsed)
        if entry is not None:
            return entry
    doc, problems = yamldocs.load_yaml(data, file=path)
    if doc is None:
        return _Entry(path, kind, problems)
    # A file the fast parser declined (a flow list `[...]`, quotes) is still valid more often than not, and the
    # compiled schema is ~50x cheaper than jsonschema. It accepts only what the reference accepts for JSON-like
    # values (it says False when unsure); not for floats (`4.0` is an integer to it, a wrong type to the
    # reference), which the fast path's byte screen keeps away and which go to jsonschema here.
    fine = FAST_PATH and _json_plain(doc.value) and schemas.fast_valid(kind, doc.value)
    bad = () if fine else schemas.check_document(doc, kind=kind, file=path)
    if bad:
        return _Entry(path, kind, bad)
    return _build(doc, path, kind, catalog, memo)


def _json_plain(value: object) -> bool:
    """Only mappings with string keys, lists, strings, ints, booleans and nulls: no float, nothing else."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if not all(type(k) is str for k in v):
                return False
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif v is not None and type(v) not in (str, int, bool):
            return False
    return True


def _fast_stage1(
    path: str, kind: str, data: bytes, catalog: Catalog, memo: _GpuMemo, parsed: _Parsed = _NOT_PARSED
) -> _Entry | None:
    if parsed is _NOT_PARSED:
        parsed = yamldocs.fast_parse(data)
    if parsed is None or not schemas.fast_valid(kind, parsed[1]):
        return None
    text, value = parsed
    if kind == "Node":
        lines = yamldocs.node_item_lines(text, value)
        doc = YamlDoc(value, lines, exact=False) if lines is not None else None
    else:
        full = yamldocs.scan_lines(text)
        doc = YamlDoc(value, full) if full is not None else None
    if doc is None:
        return None
    entry = _build(doc, path, kind, catalog, memo)
    if entry.diagnostics:
        return None  # lines of keys are not known here; the reference words every diagnostic
    if doc.exact:
        return entry
    e = entry
    return _Entry(e.path, e.kind, e.diagnostics, e.blob, e.cluster, e.layout, e.node, e.layout_refs, True)


def _build(doc: YamlDoc, path: str, kind: str, catalog: Catalog, memo: _GpuMemo) -> _Entry:
    if kind == "Cluster":
        return _Entry(path, kind, (), cluster=_cluster(doc, path))
    if kind == "Layout":
        return _layout_entry(doc, path, catalog)
    return _node_entry(doc, path, catalog, memo)


def _src(doc: YamlDoc, file: str, *path: str | int) -> SourceRef:
    return SourceRef(file, doc.line_of(path))


def _cluster(doc: YamlDoc, file: str) -> ClusterSpec:
    v = doc.value
    spec = v["spec"]
    a, g, r, ver = (spec.get(k, {}) for k in ("apply", "gpuOperator", "reports", "verify"))
    dg, dr = GpuOperatorSettings(), ReportSettings()
    return ClusterSpec(
        name=v.get("metadata", {}).get("name", "default"),
        mig_strategy=MigStrategy(spec["migStrategy"]),
        apply=ApplySettings(
            mode=ApplyMode(a.get("mode", ApplyMode.GPU_OPERATOR.value)),
            max_unavailable_nodes=a.get("maxUnavailableNodes", 1),
            allow_disruption=a.get("allowDisruption", False),
            confirm_node_removal=a.get("confirmNodeRemoval", 0),
            config_propagation_seconds=a.get("configPropagationSeconds", CONFIG_PROPAGATION_SECONDS),
            drain_timeout_seconds=a.get("drainTimeoutSeconds", ApplySettings().drain_timeout_seconds),
            write_concurrency=a.get("writeConcurrency", DEFAULT_WRITE_CONCURRENCY),
        ),
        gpu_operator=GpuOperatorSettings(
            namespace=g.get("namespace", dg.namespace),
            cluster_policy=g.get("clusterPolicy", dg.cluster_policy),
            device_plugin_daemonset=g.get("devicePluginDaemonSet", dg.device_plugin_daemonset),
            mig_config_map=g.get("migConfigMap", dg.mig_config_map),
        ),
        reports=ReportSettings(
            branch=r.get("branch", dr.branch),
            path=r.get("path", dr.path),
            source=_src(doc, file, "spec", "reports", "path") if "path" in r else None,
            min_interval_seconds=_min_interval(r.get("minInterval"), dr.min_interval_seconds),
        ),
        verify=VerifySettings(
            mode=VerifyMode(ver.get("mode", VerifyMode.NONE.value)),
            allowed_signers=tuple(ver.get("allowedSigners", ())),
            gpg_public_keys=tuple(ver.get("gpgPublicKeys", ())),
        ),
        source=_src(doc, file, "spec", "migStrategy"),
        layout_writer=spec.get("layoutWriter", "migplan"),
        device_classes=_device_classes(doc, file, spec.get("deviceClasses") or {}),
    )


def _device_classes(doc: YamlDoc, file: str, raw: dict[str, Any]) -> DeviceClassSettings:
    """spec.deviceClasses (the schema pass has checked every field's type and form)."""
    at = ("spec", "deviceClasses")
    owners = tuple(
        OwnerClass(
            owner=o["owner"],
            name=o.get("name") or deviceclasses.owner_class_name(o["owner"]),
            extended_resource_name=o.get("extendedResourceName"),
            source=_src(doc, file, *at, "owners", i),
        )
        for i, o in enumerate(raw.get("owners") or ())
    )
    declared = tuple(
        DeclaredClass(
            name=c["name"],
            extended_resource_name=c.get("extendedResourceName"),
            selectors=tuple(c.get("selectors") or ()),
            source=_src(doc, file, *at, "declared", i),
        )
        for i, c in enumerate(raw.get("declared") or ())
    )
    source = _src(doc, file, *at, "enabled") if "enabled" in raw else None
    return DeviceClassSettings(raw.get("enabled", True), owners, declared, source)


def _min_interval(raw: Any, default: int) -> int:
    """reports.minInterval in seconds; the schema pass (MP203/MP205) has refused anything else."""
    seconds = parse_duration(raw) if isinstance(raw, str) else None
    return default if seconds is None else seconds


def _partitions(doc: YamlDoc, file: str, raw: list[dict[str, Any]], *path: str | int) -> tuple[Partition, ...]:
    line_of = doc.line_of
    get = doc.lines.get
    out = []
    for i, p in enumerate(raw):
        at = (*path, i)
        line = get(at) or line_of(at)
        out.append(_partition(p["profile"], p.get("placement"), p.get("owner"), p.get("purpose"), _ref(file, line)))
    return tuple(out)


def _resolve(catalog: Catalog, written: str, source: SourceRef) -> tuple[GpuModel | None, Diagnostic | None]:
    model = catalog.resolve(written)
    if model is not None:
        return model, None
    close = difflib.get_close_matches(written, list(catalog.keys), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}? " if close else ""
    return None, diag(
        "MP301",
        f"unknown GPU model {written!r}; {hint}known models: {', '.join(catalog.keys)} "
        "(GFD product strings such as NVIDIA-H200 are accepted too)",
        source,
    )


def _layout_entry(doc: YamlDoc, file: str, catalog: Catalog) -> _Entry:
    v = doc.value
    name = v["metadata"]["name"]
    stem = file[len("layouts/") : -len(".yaml")]
    out: list[Diagnostic] = []
    name_src = _src(doc, file, "metadata", "name")
    if name != stem:
        out.append(
            diag("MP408", f"layout name {name!r} differs from its file name {stem!r}.yaml; make them equal", name_src)
        )
    mig = v["spec"]["mig"]
    partitions = _partitions(doc, file, mig.get("partitions", []), "spec", "mig", "partitions")
    model_key: str | None = None
    if "model" in v["spec"]:
        model, bad = _resolve(catalog, v["spec"]["model"], _src(doc, file, "spec", "model"))
        if bad is not None:
            out.append(bad)
        if model is not None:
            model_key = model.key
            # A layout pinned to a model is checked on its own, so a broken layout is reported
            # even before a node uses it; stage 2 reuses nothing from here (it memoises per model).
            check = rules.check_gpu(
                model,
                mig_enabled=mig["enabled"],
                partitions=partitions,
                source=_src(doc, file, "spec", "mig"),
                context=f"layout {name} on {model.key}",
            )
            out.extend(check.diagnostics)
    layout = LayoutSpec(name=name, mig_enabled=mig["enabled"], partitions=partitions, model=model_key, source=name_src)
    return _Entry(file, "Layout", tuple(out), layout=layout)


def _node_entry(doc: YamlDoc, file: str, catalog: Catalog, memo: _GpuMemo) -> _Entry:
    v = doc.value
    name = v["metadata"]["name"]
    stem = file[len("nodes/") : -len(".yaml")]
    out: list[Diagnostic] = []
    name_src = _src(doc, file, "metadata", "name")
    if name != stem:
        out.append(
            diag(
                "MP404",
                f"node name {name!r} differs from its file name {stem!r}.yaml; the file name must be the "
                "Kubernetes node name",
                name_src,
            )
        )
    gpus: list[GpuSpec] = []
    refs: dict[int, SourceRef] = {}
    first_index: dict[int, SourceRef] = {}
    models: dict[str, GpuModel | None] = {}  # a node repeats its model on every GPU
    get = doc.lines.get
    for i, g in enumerate(v["spec"]["gpus"]):
        gsrc = SourceRef(file, get(("spec", "gpus", i)) or doc.line_of(("spec", "gpus", i)))
        index = g["index"]
        if index in first_index:
            out.append(
                diag(
                    "MP406",
                    f"node {name}: GPU index {index} is listed twice (first at line {first_index[index].line})",
                    _src(doc, file, "spec", "gpus", i, "index"),
                )
            )
        else:
            first_index[index] = gsrc
        written = g["model"]
        model = models.get(written) if written in models else models.setdefault(written, catalog.resolve(written))
        if model is None:
            _, bad = _resolve(catalog, g["model"], _src(doc, file, "spec", "gpus", i, "model"))
            if bad is not None:
                out.append(bad)
        has_mig, has_layout = "mig" in g, "layout" in g
        if has_mig == has_layout:
            hint = "" if has_mig else "; for a GPU without MIG write mig: {enabled: false}"
            out.append(
                diag(
                    "MP313",
                    f"node {name} GPU {index}: write exactly one of `mig:` (partitions inline) or `layout:` "
                    f"(a file under layouts/){hint}",
                    gsrc,
                )
            )
            continue
        model_key = model.key if model is not None else g["model"]
        if has_layout:
            refs[index] = _src(doc, file, "spec", "gpus", i, "layout")
            gpus.append(GpuSpec(index=index, model=model_key, mig_enabled=False, layout=g["layout"], source=gsrc))
            continue
        mig = g["mig"]
        partitions = _partitions(doc, file, mig.get("partitions", []), "spec", "gpus", i, "mig", "partitions")
        placements: tuple[Placement, ...] = ()
        if model is not None:
            key = (model.key, bool(mig["enabled"]), tuple((p.profile, p.placement) for p in partitions))
            known = memo.get(key)
            if known is not None:
                placements = known
            else:
                check = rules.check_gpu(
                    model,
                    mig_enabled=mig["enabled"],
                    partitions=partitions,
                    source=gsrc,
                    context=f"node {name} GPU {index}",
                )
                out.extend(check.diagnostics)
                placements = check.placements
                if not check.diagnostics and len(memo) < _MEMO_LIMIT:
                    memo[key] = placements
        gpus.append(
            GpuSpec(
                index=index,
                model=model_key,
                mig_enabled=mig["enabled"],
                partitions=partitions,
                placements=placements,
                source=gsrc,
            )
        )
    out.extend(_index_gaps(doc, file, name, v["spec"]["gpus"]))
    labels = dict(v["metadata"].get("labels", {}))
    node = NodeSpec(
        name=name, gpus=tuple(gpus), labels=labels, source=name_src, layout_writer=v["spec"].get("layoutWriter")
    )
    return _Entry(file, "Node", tuple(out), node=node, layout_refs=refs)


def _index_gaps(doc: YamlDoc, file: str, name: str, raw_gpus: list[Any]) -> list[Diagnostic]:
    """MP315: a node's GPU indexes must be 0..n-1, as NVML numbers them.

    An error, not a warning: a gap (0, 1, 3) means either a typo or a GPU the file does not describe, and
    migplan renders `devices: [i]` per listed GPU, so the GPU left out keeps whatever cut it has while its
    neighbour's plan lands on the wrong device. A node with fewer GPUs listed than it has, all from 0, is
    valid here and reported by drift instead (MP531), because only the cluster knows the count.
    Duplicates are MP406's; they are ignored here."""
    seen: dict[int, int] = {}
    for i, g in enumerate(raw_gpus):
        seen.setdefault(g["index"], i)
    expected = range(len(seen))
    if sorted(seen) == list(expected):
        return []
    missing = [k for k in expected if k not in seen]
    first_bad = min((k for k in seen if k >= len(seen)), default=max(seen))
    return [
        diag(
            "MP315",
            f"node {name}: GPU indexes must be 0..{len(seen) - 1} as NVML numbers them, found "
            f"{', '.join(map(str, sorted(seen)))} (missing {', '.join(map(str, missing))}); describe every GPU "
            "from index 0 (mig: {enabled: false} for one without MIG) or fix the index",
            _src(doc, file, "spec", "gpus", seen[first_bad], "index"),
        )
    ]


# --------------------------------------------------------------------------------------------
# Stage 2: across files


def _stage2(
    entries: list[_Entry], files: Mapping[str, bytes], *, catalog: Catalog, cache: ParseCache, revision: Revision
) -> tuple[DesiredState | None, list[Diagnostic]]:
    out: list[Diagnostic] = []
    cluster_entries = [e for e in entries if e.kind == "Cluster"]
    if not cluster_entries:
        out.append(
            diag(
                "MP409",
                "cluster.yaml is missing: every inventory root needs one (apiVersion: migplan/v1, kind: Cluster, "
                "spec.migStrategy)",
                SourceRef(CLUSTER_FILE),
            )
        )
    cluster = cluster_entries[0].cluster if cluster_entries else None

    layouts: dict[str, _Entry] = {}
    for e in entries:
        if e.kind == "Layout":
            layouts[e.path[len("layouts/") : -len(".yaml")]] = e
    layout_checks: dict[tuple[str, str, str], GpuCheck] = {}
    names: dict[str, str] = {}
    nodes: dict[str, NodeSpec] = {}
    for e in entries:
        if e.kind != "Node" or e.node is None:
            continue
        node = e.node
        if node.name in names:
            out.append(
                diag(
                    "MP405",
                    f"node {node.name} is also defined in {names[node.name]}; a node has exactly one file",
                    node.source,
                )
            )
            continue
        names[node.name] = e.path
        gpus = []
        for g in node.gpus:
            if g.layout is None:
                gpus.append(g)
                continue
            le = layouts.get(g.layout)
            if le is None:
                ref_src = _layout_ref(e, g, files)
                known = ", ".join(sorted(layouts)) or "none"
                out.append(
                    diag(
                        "MP407",
                        f"node {node.name} GPU {g.index}: layout {g.layout!r} not found (no layouts/{g.layout}.yaml; "
                        f"layouts: {known})",
                        ref_src,
                    )
                )
                continue
            if le.layout is None:
                continue  # the layout file's own errors are already reported
            lay = le.layout
            model = catalog.get(g.model)
            if model is None:
                continue  # MP301 already reported on the node
            if lay.model is not None and lay.model != model.key:
                ref_src = _layout_ref(e, g, files)
                out.append(
                    diag(
                        "MP314",
                        f"node {node.name} GPU {g.index} ({model.key}) uses layout {lay.name}, "
                        f"which is for {lay.model} only",
                        ref_src,
                    )
                )
                continue
            key = (le.path, le.blob, model.key)
            check = layout_checks.get(key) or cache._layout_checks.get(key)
            if check is None:
                check = rules.check_gpu(
                    model,
                    mig_enabled=lay.mig_enabled,
                    partitions=lay.partitions,
                    source=lay.source,
                    context=f"layout {lay.name} on {model.key} (node {node.name} GPU {g.index})",
                )
            if key not in layout_checks:
                layout_checks[key] = check
                out.extend(check.diagnostics)
            # Direct construction: dataclasses.replace() costs several times more, per GPU.
            gpus.append(_gpu(g.index, g.model, lay.mig_enabled, lay.partitions, g.layout, check.placements, g.source))
        resolved = NodeSpec(node.name, tuple(gpus), node.labels, node.source, node.layout_writer)
        nodes[node.name] = resolved
        if cluster is not None:
            gpu_lines = {g.index: g.source for g in node.gpus}
            out.extend(rules.check_strategy(cluster.mig_strategy, resolved, gpu_lines=gpu_lines))
            out.extend(rules.check_layout_writer(resolved, cluster.layout_writer))
    cache._layout_checks = layout_checks
    if cluster is None:
        return None, out
    desired = DesiredState(
        cluster=cluster,
        nodes=dict(sorted(nodes.items())),
        layouts={k: e.layout for k, e in sorted(layouts.items()) if e.layout is not None},
        revision=revision,
    )
    out.extend(deviceclasses.check(desired))
    return desired, out


def _layout_ref(e: _Entry, g: GpuSpec, files: Mapping[str, bytes]) -> SourceRef | None:
    """Where `layout:` is written for GPU g, exactly, even for a file read by the fast path (its bytes are
    files[e.path]: the entry was found or made for them)."""
    if e.reread:
        doc, _ = yamldocs.load_yaml(files[e.path], file=e.path)
        if doc is not None:
            for i, raw in enumerate(doc.value["spec"]["gpus"]):
                if raw.get("index") == g.index and "layout" in raw:
                    return SourceRef(e.path, doc.line_of(("spec", "gpus", i, "layout")))
    return e.layout_refs.get(g.index, g.source)


# --------------------------------------------------------------------------------------------
# What the solver chose (for `migplan validate` output)


@dataclass(frozen=True, slots=True)
class SolverChoice:
    node: str
    gpu: int
    profile: str
    placement: Placement
    source: SourceRef | None
    layout: str | None


def solver_choices(desired: DesiredState) -> tuple[SolverChoice, ...]:
    """Partitions written without `placement:` and where the solver put them."""
    out = []
    for node in desired.nodes.values():
        for g in node.gpus:
            for p, pl in zip(g.partitions, g.placements, strict=False):
                if p.placement is None:
                    out.append(SolverChoice(node.name, g.index, p.profile, pl, p.source, g.layout))
    return tuple(out)
