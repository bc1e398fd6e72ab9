"""The files `migplan import` writes, in the house style of inventory/ (modelines, a comment saying where each
value came from, flow-style partitions), and layouts made from a hand-written mig-parted file.

Pure: values from reconciler.logic.adoption.adopt in, file texts out, byte-stable for the same input. Every value that
came from the cluster reaches the YAML as one scalar (quoted unless YAML 1.1 and 1.2 both read it back as the
same string) or inside a one-line comment: a label or annotation cannot add keys, lines or documents.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import yaml

from reconciler.catalog import Catalog, GpuModel
from reconciler.logic.adoption.adopt import ClusterFacts, GpuCut, Imported, NodeImport, cut_problem
from reconciler.logic.codecs.migparted import ConfigEntry, MigPartedFormatError, parse_strict
from reconciler.logic.inventory.yamldocs import is_yaml12_number
from reconciler.model.printable import one_line

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_CutKey = tuple[str, bool, tuple[tuple[str, int | None], ...]]


# ---------------------------------------------------------------------------------------------- writing


@functools.lru_cache(maxsize=4096)  # a fleet repeats the same few models and profiles thousands of times
def _scalar(text: str) -> str:
    """A flow-style YAML scalar: plain when both YAML 1.1 and 1.2 read it back as this string (`3g.71gb`,
    `H200-141GB`), double-quoted otherwise (a value from the cluster can hold anything)."""
    if (
        re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", text)
        and not re.fullmatch(r"[0-9._+-]+|[0-9.]+e[0-9+-]*", text)
        and not is_yaml12_number(text)  # `0o17`, `1E5`: text to PyYAML, numbers to YAML 1.2 (MP116)
    ):
        try:
            plain = yaml.safe_load(text) == text
        except yaml.YAMLError:
            plain = False
        if plain:
            return text
    return _double_quoted(text)


def _double_quoted(text: str) -> str:
    """A YAML double-quoted scalar that reads back as `text`. Not json.dumps: JSON writes a character beyond
    U+FFFF as a surrogate pair (`\\ud83d\\ude42`), which YAML readers refuse (a syntax error in the file we
    wrote), and leaves U+2028 raw, which YAML folds as a line break. Printable characters are kept, every
    other one escaped; a lone surrogate (no UTF-8 form, no YAML escape) becomes U+FFFD, as Go's JSON does."""
    out = ['"']
    for c in text:
        code = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out) + '"'


def _comment(text: str) -> str:
    """One line of comment: whitespace runs (newlines, U+2028, NEL, which YAML also ends a line on) become one
    space, and what is not printable (a control character the YAML reader refuses even in a comment, a bidi
    override that would make the line read otherwise, a lone surrogate) is written as its escape."""
    return one_line(text)


def _partition_line(profile: str, placement: int | None, indent: str) -> str:
    at = f", placement: {placement}" if placement is not None else ""
    return f"{indent}- {{profile: {_scalar(profile)}{at}}}"


def _cut_key(c: GpuCut) -> _CutKey:
    return (c.model, c.mig_enabled, tuple(sorted(c.partitions, key=lambda p: (p[0], -1 if p[1] is None else p[1]))))


def layout_name(model: str, partitions: Sequence[tuple[str, int | None]]) -> str:
    """A readable, valid layout name: `h200-141gb-1x3g71gb-1x2g35gb-2x1g18gb` (+ `-at-<starts>` with placements)."""
    counts = Counter(p for p, _ in partitions)
    parts = "-".join(
        f"{n}x{re.sub(r'[^a-z0-9]', '', p.lower().replace('+', 'p').replace('-', 'n'))}"
        for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    base = re.sub(r"[^a-z0-9-]+", "-", model.lower()).strip("-")
    starts = [s for _, s in sorted(partitions, key=lambda p: (p[0], -1 if p[1] is None else p[1])) if s is not None]
    name = f"{base}-{parts}" + (f"-at-{''.join(map(str, starts))}" if starts else "")
    if len(name) > 63 or not _NAME_RE.fullmatch(name):
        digest = hashlib.sha1(repr((model, sorted(partitions, key=str))).encode()).hexdigest()[:10]
        name = f"{base[:40].strip('-')}-cut-{digest}"
    return name


def render_layout(name: str, model: str, partitions: Sequence[tuple[str, int | None]], why: str) -> str:
    lines = [
        "# yaml-language-server: $schema=../../schemas/layout.schema.json",
        f"# {_comment(why)}",
        "apiVersion: migplan/v1",
        "kind: Layout",
        f"metadata: {{name: {_scalar(name)}}}",
        "spec:",
        f"  model: {_scalar(model)}",
        "  mig:",
        "    enabled: true",
        "    partitions:",
        *(_partition_line(p, s, "      ") for p, s in partitions),
    ]
    return "\n".join(lines) + "\n"


def render_node(node: NodeImport, layouts: Mapping[_CutKey, str]) -> str:
    lines = [
        "# yaml-language-server: $schema=../../schemas/node.schema.json",
        "# Written by `migplan import` from the running cluster. Source:",
        *(f"#   - {_comment(s)}" for s in node.sources),
    ]
    if node.owners:
        lines.append(
            "# Owners suggested from the pods holding partitions (not applied: copy into `owner:` once checked):"
        )
        lines.extend(f"#   {_comment(o)}" for o in node.owners)
    lines += ["apiVersion: migplan/v1", "kind: Node", "metadata:", f"  name: {_scalar(node.name)}", "spec:"]
    if node.layout_writer is not None:  # another writer cuts these GPUs: no partitions of migplan's (MP320)
        lines.append(f"  layoutWriter: {_scalar(node.layout_writer)}")
    lines.append("  gpus:")
    for c in node.gpus:
        lines.extend(f"    # {_comment(str(x))}" for x in c.notes)
        lines.append(f"    - index: {c.index}")
        lines.append(f"      model: {_scalar(c.model)}")
        layout = layouts.get(_cut_key(c))
        if layout is not None:
            lines.append(f"      layout: {_scalar(layout)}")
        elif not c.mig_enabled:
            lines.append("      mig: {enabled: false}")
        elif not c.partitions:
            lines.append("      mig: {enabled: true, partitions: []}")
        else:
            lines += ["      mig:", "        enabled: true", "        partitions:"]
            lines.extend(_partition_line(p, s, "          ") for p, s in c.partitions)
    return "\n".join(lines) + "\n"


def render_cluster(cluster: ClusterFacts) -> str:
    lines = [
        "# yaml-language-server: $schema=../schemas/cluster.schema.json",
        "# Written by `migplan import` from the running cluster.",
        *(f"# {_comment(n)}" for n in cluster.notes),
        "apiVersion: migplan/v1",
        "kind: Cluster",
        f"metadata: {{name: {_scalar(cluster.name)}}}",
        "spec:",
        f"  migStrategy: {_scalar(cluster.strategy)}  # none | single | mixed -- ClusterPolicy spec.mig.strategy",
        "  apply:",
        "    mode: gpu-operator          # gpu-operator | agent | report-only",
        "    maxUnavailableNodes: 1      # nodes reconfigured at once",
        "    allowDisruption: false      # never destroy a partition a running pod holds unless true",
        "  gpuOperator:",
        f"    namespace: {_scalar(cluster.namespace)}",
        f"    clusterPolicy: {_scalar(cluster.cluster_policy)}",
        "    devicePluginDaemonSet: " + _scalar(cluster.device_plugin_daemonset),
        f"    migConfigMap: {_scalar(cluster.mig_config_map)}",
        "  reports: {branch: migplan-reports, path: reports}",
    ]
    return "\n".join(lines) + "\n"


def render_inventory(
    imported: Imported,
    cluster: ClusterFacts | None,
    *,
    existing_layouts: Mapping[str, str] | None = None,
    catalog: Catalog | None = None,
) -> dict[str, str]:
    """The files of an inventory root: cluster.yaml (unless None), layouts/ for every cut two or more GPUs
    share (MIG-enabled, no problem noted), nodes/<node>.yaml. With `existing_layouts` (--merge: path -> text
    of the layouts already there) and `catalog`, a GPU whose cut equals an existing layout refers to it by
    its name; a generated name already taken by other content is not overwritten (those GPUs stay inline)."""
    existing = existing_layouts or {}
    reuse = _existing_layout_keys(existing, catalog) if catalog is not None else {}
    cut_keys = [(_cut_key(c), bool(c.notes)) for n in imported.nodes for c in n.gpus if c.mig_enabled and c.partitions]
    shared = Counter(k for k, _ in cut_keys)
    doubtful = {k for k, noted in cut_keys if noted}
    layouts: dict[_CutKey, str] = {}
    files: dict[str, str] = {}
    for key, uses in sorted(shared.items(), key=lambda kv: repr(kv[0])):
        if key in doubtful:
            continue
        if key in reuse:
            layouts[key] = reuse[key]
            continue
        if uses < 2:
            continue
        model, _, parts = key
        name = layout_name(model, parts)
        text = render_layout(name, model, parts, f"A cut {uses} GPUs of the cluster share, found by `migplan import`.")
        path = f"layouts/{name}.yaml"
        if path in existing and existing[path] != text:
            continue
        layouts[key] = name
        if path not in existing:
            files[path] = text
    if cluster is not None:
        files["cluster.yaml"] = render_cluster(cluster)
    for node in imported.nodes:
        files[f"nodes/{node.name}.yaml"] = render_node(node, layouts)
    return files


def _existing_layout_keys(existing: Mapping[str, str], catalog: Catalog) -> dict[_CutKey, str]:
    """Cut key -> name of each existing layout that pins a known model and is named as its file (what cannot be
    read, or is named otherwise, is ignored: it is the user's file, and `migplan validate` reports it)."""
    out: dict[_CutKey, str] = {}
    for path, text in sorted(existing.items()):
        if not path.startswith("layouts/"):
            continue
        try:
            doc = yaml.safe_load(text)
            spec, name = doc["spec"], doc["metadata"]["name"]
            model = catalog.resolve(str(spec["model"]))
            mig = spec["mig"]
            parts = [(str(x["profile"]), x.get("placement")) for x in mig["partitions"]]
        except (yaml.YAMLError, ValueError, KeyError, TypeError, AttributeError):
            continue  # ValueError: PyYAML constructs `2026-13-45T00:00:00` as a date and fails there
        if model is None or mig.get("enabled") is not True or not parts or not isinstance(name, str):
            continue
        if name != path[len("layouts/") : -len(".yaml")] or not _NAME_RE.fullmatch(name):
            continue  # a name that is not its file's (MP408) or not a name: a node referring to it would not resolve
        if any(s is not None and (not isinstance(s, int) or isinstance(s, bool)) for _, s in parts):
            continue
        cut = GpuCut(0, model.key, True, tuple(parts))
        out.setdefault(_cut_key(cut), name)
    return out


# ---------------------------------------------------------------------------------------------- from a file


class AdoptError(ValueError):
    """An import that cannot go on (code from IMPORT_CODES)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def layouts_from_mig_parted(
    text: str, catalog: Catalog, *, config: str | None = None, model: str | None = None
) -> dict[str, str]:
    """Layouts from a mig-parted config file: one per named config and device group (entry), for MIG-enabled
    entries. The model comes from the entry's device filter, else `model`; raises AdoptError (MP586/MP587)."""
    try:
        configs = parse_strict(text)
    except MigPartedFormatError as exc:
        raise AdoptError("MP586", f"the mig-parted file does not parse: {exc}") from exc
    if config is not None and config not in configs:
        raise AdoptError("MP587", f"config {config!r} is not in the file (it has {', '.join(sorted(configs))})")
    forced = None
    if model is not None:
        forced = catalog.resolve(model)
        if forced is None:
            raise AdoptError("MP587", f"--model {model!r} is not a model of the catalog ({', '.join(catalog.keys)})")
    files: dict[str, str] = {}
    skipped: list[str] = []
    for name in [config] if config is not None else sorted(configs):
        for k, entry in enumerate(configs[name]):
            if not entry.mig_enabled or not entry.mig_devices:
                continue
            models = [forced] if forced is not None else _filter_models(entry, catalog)
            if not models:
                skipped.append(f"{name}[{k}]")
                continue
            for gm in models:
                parts = tuple((p, None) for p, c in sorted(entry.mig_devices.items()) for _ in range(c))
                why = cut_problem(gm, parts)
                if why:
                    raise AdoptError("MP587", f"config {name!r} entry {k} does not fit {gm.key}: {why}")
                lname = _layout_file_name(name, gm, len(models) > 1 or len(configs[name]) > 1)
                origin = f"From mig-parted config {name!r} (entry {k}) by `migplan import --from-mig-parted`."
                files[f"layouts/{lname}.yaml"] = render_layout(lname, gm.key, parts, origin)
    if not files:
        hint = f" (entries without a device filter: {', '.join(skipped)}; give --model)" if skipped else ""
        raise AdoptError("MP587", f"no MIG-enabled entry could be turned into a layout{hint}")
    return files


def _filter_models(entry: ConfigEntry, catalog: Catalog) -> list[GpuModel]:
    out: list[GpuModel] = []
    for f in entry.device_filter:
        m = catalog.by_pci_device_id(f.split(":", 1)[0])
        if m is not None and m not in out:
            out.append(m)
    return out


def _layout_file_name(config: str, model: GpuModel, qualify: bool) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", config.lower()).strip("-") or "layout"
    name = f"{base}-{re.sub(r'[^a-z0-9-]+', '-', model.key.lower())}" if qualify else base
    name = name.strip("-")
    if len(name) > 63 or not _NAME_RE.fullmatch(name):
        name = f"{name[:50].strip('-')}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    return name
