"""One error registry: every code the package names is declared once in reconciler.model.codes, and the generated
reference, docs/reference/codes.md, documents each registered code in exactly one row of one family's table, with the
registry's severity (tests/unit/test_docs_reference.py checks that the file is what the generator writes today)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from reconciler.model import codes

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "reconciler"
CODES_MD = (ROOT / "docs" / "reference" / "codes.md").read_text(encoding="utf-8")
CODE = re.compile(r"\bMP\d{3}\b")


def _declarations() -> list[str]:
    """The code strings of every `Code(...)` call in the registry's source, duplicates kept."""
    tree = ast.parse((PACKAGE / "model" / "codes.py").read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Code":
            first = node.args[0]
            assert isinstance(first, ast.Constant) and isinstance(first.value, str), ast.dump(node)
            out.append(first.value)
    return out


def test_no_code_is_declared_twice() -> None:
    declared = _declarations()
    twice = sorted({c for c in declared if declared.count(c) > 1})
    assert not twice, f"declared more than once: {twice}"
    assert len(declared) == len(codes.DECLARED) == len(codes.REGISTRY)
    assert all(CODE.fullmatch(c.code) and c.meaning.strip() for c in codes.DECLARED)


def test_a_second_declaration_is_refused_at_import() -> None:
    first = codes.DECLARED[0]
    again = codes.Code(first.code, codes.Family.GIT, codes.Level.WARNING, "another meaning")
    try:
        codes._index((*codes.DECLARED, again))
    except ValueError as exc:
        assert first.code in str(exc)
    else:
        raise AssertionError("a code declared twice was accepted")


def test_every_code_named_in_the_package_is_registered() -> None:
    """Any MPnnn in any text file of the package, the manifests, CI, schemas or benchmarks (code, comment,
    docstring, Markdown, YAML) is a registered code."""
    unknown: dict[str, set[str]] = {}
    seen: set[str] = set()
    paths = [p for d in ("reconciler", "deploy", "ci", ".ci", "schemas", "benchmarks") for p in (ROOT / d).rglob("*")]
    for path in sorted(paths):
        if not path.is_file() or path.suffix not in {".py", ".md", ".yaml", ".yml", ".json", ".sh", ".txt", ""}:
            continue
        found = set(CODE.findall(path.read_text(encoding="utf-8", errors="replace")))
        seen |= found
        for c in found - set(codes.REGISTRY):
            unknown.setdefault(c, set()).add(str(path.relative_to(ROOT)))
    assert not unknown, f"codes used but not registered in reconciler/model/codes.py: {unknown}"
    assert {"MP301", "MP509", "MP553", "MP701", "MP821", "MP930"} <= seen  # the scan does read the package


def test_no_kubernetes_status_is_used_as_a_code() -> None:
    """API errors carry registered MP55x codes (adapters/kube/cluster.py api_error), never an ad-hoc `K8S<status>`."""
    offenders = [
        str(p.relative_to(ROOT))
        for p in PACKAGE.rglob("*.py")
        if re.search(r"K8S\{|\"K8S\d", p.read_text(encoding="utf-8"))
    ]
    assert not offenders


def _code_tables() -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table of docs/reference/codes.md whose first column is headed `code`: (header, rows)."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    lines = CODES_MD.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-| :]+\|$", lines[i + 1]):
            header = [c.strip().lower() for c in lines[i].strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            if header[0] == "code":
                tables.append((header, rows))
            continue
        i += 1
    return tables


def test_every_registered_code_is_in_exactly_one_reference_table_with_its_severity() -> None:
    tables = _code_tables()
    assert len(tables) == len({c.family for c in codes.DECLARED})  # one table per family
    where: dict[str, list[int]] = {}
    wrong_severity = []
    for t, (header, rows) in enumerate(tables):
        sev = header.index("severity") if "severity" in header else None
        for row in rows:
            for c in CODE.findall(row[0]):
                where.setdefault(c, []).append(t)
                if sev is not None and c in codes.REGISTRY and row[sev] != codes.REGISTRY[c].severity.value:
                    wrong_severity.append((c, row[sev], codes.REGISTRY[c].severity.value))
    missing = sorted(set(codes.REGISTRY) - set(where))
    assert not missing, f"registered codes missing from docs/reference/codes.md: {missing}"
    unknown = sorted(set(where) - set(codes.REGISTRY))
    assert not unknown, f"docs/reference/codes.md documents codes that are not registered: {unknown}"
    twice = sorted(c for c, ts in where.items() if len(ts) > 1)
    assert not twice, f"codes in more than one row of docs/reference/codes.md: {twice}"
    assert not wrong_severity, f"docs/reference/codes.md severity differs from the registry: {wrong_severity}"


def test_each_reference_table_holds_one_family() -> None:
    """A table documents one family, so a reader finds a code where its family's other codes are."""
    seen = []
    for header, rows in _code_tables():
        families = {codes.REGISTRY[c].family for row in rows for c in CODE.findall(row[0]) if c in codes.REGISTRY}
        assert len(families) == 1, (header, families)
        seen += families
    assert len(seen) == len(set(seen))


def test_traits_belong_to_their_family_and_the_in_progress_set_is_one() -> None:
    # The traits of other families than the findings', each with the family it belongs to.
    elsewhere = {
        codes.Trait.REMOTE: codes.Family.GIT,
        codes.Trait.NO_ROOT: codes.Family.GIT,
        codes.Trait.UNPARSED: codes.Family.WORKLOAD,
        codes.Trait.UNKNOWN_MODEL: codes.Family.IMPORT,
    }
    finding_traits = ~(codes.Trait.REMOTE | codes.Trait.NO_ROOT | codes.Trait.UNPARSED | codes.Trait.UNKNOWN_MODEL)
    traited = [c for c in codes.DECLARED if c.traits & finding_traits]
    assert traited and all(c.family is codes.Family.FINDING for c in traited)
    assert all(c.family is codes.Family.GIT for c in codes.DECLARED if c.traits & codes.Trait.REMOTE)
    for trait, home in elsewhere.items():
        carriers = [c for c in codes.DECLARED if c.traits & trait]
        assert carriers and all(c.family is home for c in carriers), trait
    assert {"MP509", "MP521", "MP536"} <= codes.IN_PROGRESS_CODES
    from reconciler.controller import signals
    from reconciler.logic.drift import drift

    assert signals.IN_FLIGHT_CODES is codes.IN_PROGRESS_CODES
    assert drift.node_status([drift.finding("MP521", "cordoned")]) is drift.NodeStatus.DRIFTED
    from reconciler import outcome
    from reconciler.adapters.git import source as gitsource

    want = {gitsource.UNREACHABLE, gitsource.AUTH_REFUSED, gitsource.HOST_KEY_REFUSED, gitsource.REVISION_NOT_FOUND}
    assert want == outcome.REMOTE_STATES


def test_family_views_are_the_registry() -> None:
    """The per-family tables other modules import are views: same codes, same severities, same meanings."""
    from reconciler import observer
    from reconciler.logic.adoption import adopt
    from reconciler.logic.drift import drift
    from reconciler.logic.inventory import rules
    from reconciler.logic.workloads import workloads

    views = {
        codes.Family.VALIDATION: {c: (r.severity.value, r.title) for c, r in rules.CODES.items()},
        codes.Family.FINDING: {c: (s.value, m) for c, (s, m) in drift.FINDING_CODES.items()},
        codes.Family.WORKLOAD: {c: (r.severity.value, r.title) for c, r in workloads.CODES.items()},
    }
    for fam, view in views.items():
        assert view == {c.code: (c.severity.value, c.meaning) for c in codes.family(fam)}, fam
    assert {c.code: c.meaning for c in codes.family(codes.Family.IMPORT)} == adopt.IMPORT_CODES
    assert {c.code: c.meaning for c in codes.family(codes.Family.OBSERVER)} == observer.CODES


def test_tables_in_docstrings_agree_with_the_registry() -> None:
    """A module's docstring table (rules.py repeats the validation codes for the reader) says the registry's
    severity, so the copy cannot drift into a second declaration."""
    rows = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        for code, sev in re.findall(r"^\| (MP\d{3}) +\| (error|warning|info) +\|", path.read_text(), flags=re.M):
            rows += 1
            assert codes.REGISTRY[code].severity.value == sev, (str(path.relative_to(ROOT)), code, sev)
    assert rows >= 50


def test_each_error_type_has_its_own_registered_code() -> None:
    """Code tells errors apart by type: every MigplanError subclass that sets a code sets a registered one that no
    unrelated type sets (a narrower kind of the same error, a subclass, may keep its parent's code), so
    `isinstance` and the code shown to users say the same thing."""
    import importlib
    import pkgutil

    import reconciler
    from reconciler.model.errors import MigplanError

    for mod in pkgutil.walk_packages(reconciler.__path__, "reconciler."):
        if not mod.name.startswith(("reconciler.twin", "reconciler.kubeletapi", "reconciler.__main__")):
            importlib.import_module(mod.name)
    owners: dict[str, list[type[MigplanError]]] = {}
    stack: list[type[MigplanError]] = [MigplanError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if "code" in vars(cls):
            owners.setdefault(vars(cls)["code"], []).append(cls)
    assert len(owners) >= 15
    assert not set(owners) - set(codes.REGISTRY), sorted(set(owners) - set(codes.REGISTRY))
    shared = {
        code: [f"{c.__module__}.{c.__qualname__}" for c in classes]
        for code, classes in owners.items()
        if not any(all(issubclass(c, root) for c in classes) for root in classes)
    }
    assert not shared, shared
