"""deploy/prometheus (alerting rules) and deploy/grafana (dashboard) against promtool and the metrics the
controller really exports.

- the plain rules file and the PrometheusRule component carry the same groups;
- `promtool check rules` accepts them; `promtool test rules` runs tests/integration/monitoring/ on synthetic
  series, a firing and a quiet case for every alert (on a copy without annotations: promtool compares them
  all, and their templates are checked here instead);
- every alert has a summary, a description and a runbook_url naming a section of deploy/README.md, and its
  templates only use labels the alert's expression keeps;
- every expression — the rules' and each dashboard panel's, Grafana variables substituted — parses
  (promtool, as recording rules) and uses only metric names and label names that ControllerMetrics exports
  (collected from a populated registry), plus the target labels Prometheus adds (job, instance).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from reconciler.controller.metrics import ControllerMetrics, PartitionRows

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "migplan-rules.yaml"
PROMETHEUS_RULE = REPO / "deploy" / "components" / "monitoring" / "prometheusrule.yaml"
RULE_TESTS = Path(__file__).parent / "monitoring" / "migplan-rules.test.yaml"
DASHBOARD = REPO / "deploy" / "grafana" / "migplan-dashboard.json"
DEPLOY_README = REPO / "deploy" / "README.md"
PROMTOOL = shutil.which("promtool") or "promtool"  # Debian package `prometheus` (.ci/apt-packages.txt)

TARGET_LABELS = frozenset({"job", "instance"})  # added by Prometheus to every scraped series
# Grafana's variables, as the dashboard uses them, replaced by values PromQL accepts.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$node": ".*", "$profile": ".*", "$owner": ".*"}


def exported() -> dict[str, frozenset[str]]:
    """Sample name -> label names, from a ControllerMetrics registry with one child per labelled metric."""
    m = ControllerMetrics()
    for value in vars(m).values():
        if isinstance(value, MetricWrapperBase):
            names = value._labelnames  # prometheus_client keeps them only here
            if names:
                child = value.labels(*("x" for _ in names))
                if hasattr(child, "observe"):
                    child.observe(1.0)
        elif isinstance(value, PartitionRows):  # rows, not a labelled Gauge (metrics.py): one row, three series
            value.set([("x", "x", 1, 0)])
    m.revision.info({"revision": "main@sha1:0"})
    out: dict[str, set[str]] = {}
    for family in m.registry.collect():
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(labels) for name, labels in out.items()}


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["groups"]
    return groups


def alerts() -> list[dict[str, Any]]:
    return [r for g in rule_groups() for r in g["rules"] if "alert" in r]


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


# --- a small PromQL reader: which metric names and label names an expression uses -------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{([^{}]*)\}")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"})


def used_names(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) of a PromQL expression."""
    labels: set[str] = set()
    strings: list[str] = []
    text = _STRING.sub(lambda m: strings.append(m.group()) or '""', expr)
    for body in _MATCHERS.findall(text):
        for matcher in body.split(","):
            if matcher.strip():
                labels.add(re.split(r"=~|!~|!=|=", matcher)[0].strip())
    text = _MATCHERS.sub(" ", text)
    for _word, names in _GROUPING.findall(text):
        labels |= {n.strip() for n in names.split(",") if n.strip()}
    text = _GROUPING.sub(" ", _RANGE.sub(" ", text))
    metrics = set()
    for m in _IDENT.finditer(text):
        word = m.group()
        follows = text[m.end() :].lstrip()[:1]
        if follows == "(" or word.lower() in KEYWORDS or re.fullmatch(r"\d.*", word):
            continue  # a function call, an operator keyword
        metrics.add(word)
    return metrics, labels


def check_names(expr: str, registry: dict[str, frozenset[str]], where: str) -> None:
    metrics, labels = used_names(expr)
    assert metrics, f"{where}: no metric in {expr!r}"
    unknown = metrics - set(registry)
    assert not unknown, f"{where}: {sorted(unknown)} not exported by migplan (in {expr!r})"
    known_labels = set().union(*(registry[m] for m in metrics)) | TARGET_LABELS
    assert labels <= known_labels, f"{where}: labels {sorted(labels - known_labels)} not on {sorted(metrics)}"


def test_the_reader_sees_what_an_expression_uses() -> None:
    metrics, labels = used_names(
        'histogram_quantile(0.95, sum by (le) (rate(migplan_x_bucket{a="b,c", d!~"e"}[5m]))) > on (f) migplan_y'
    )
    assert metrics == {"migplan_x_bucket", "migplan_y"} and labels == {"le", "a", "d", "f"}
    with pytest.raises(AssertionError, match="not exported"):
        check_names("sum(up)", exported(), "probe")
    with pytest.raises(AssertionError, match="labels"):
        check_names('sum by (gpu) (migplan_partitions{state="free"})', exported(), "probe")


def test_the_registry_has_what_the_alerts_need() -> None:
    reg = exported()
    assert reg["migplan_findings"] == {"node", "code", "severity"}
    assert reg["migplan_owner_partitions"] == {"owner", "profile", "state"}
    assert reg["migplan_partitions"] == {"node", "profile", "state"}
    assert "le" in reg["migplan_reconcile_duration_seconds_bucket"]


# --- alerting rules -------------------------------------------------------------------------------


def test_plain_rules_and_prometheusrule_are_the_same() -> None:
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert rule["kind"] == "PrometheusRule" and rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == yaml.safe_load(RULES.read_text()), (
        f"{PROMETHEUS_RULE.relative_to(REPO)} spec differs from {RULES.relative_to(REPO)}"
    )


def test_promtool_checks_the_rules() -> None:
    proc = promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in proc.stdout


def test_promtool_unit_tests_fire_and_stay_quiet(tmp_path: Path) -> None:
    bare = {"groups": [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
                       for g in rule_groups()]}  # fmt: skip
    (tmp_path / "migplan-rules.yaml").write_text(yaml.safe_dump(bare))
    tests = yaml.safe_load(RULE_TESTS.read_text())
    tests["rule_files"] = ["migplan-rules.yaml"]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    # every alert has at least one case where it fires and one where it is quiet
    cases: dict[str, set[bool]] = {}
    for t in tests["tests"]:
        for c in t["alert_rule_test"]:
            cases.setdefault(c["alertname"], set()).add(bool(c["exp_alerts"]))
    assert cases == {a["alert"]: {True, False} for a in alerts()}
    proc = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return out


def test_every_alert_has_summary_description_and_a_runbook() -> None:
    anchors = _anchors(DEPLOY_README.read_text())
    reg = exported()
    for a in alerts():
        name, ann = a["alert"], a["annotations"]
        assert {"summary", "description", "runbook_url"} <= ann.keys(), name
        path, _, anchor = ann["runbook_url"].partition("#")
        assert path == "deploy/README.md" and anchor == name.lower() and anchor in anchors, name
        assert a["labels"]["severity"] in ("critical", "warning", "info"), name
        check_names(a["expr"], reg, name)
        # A template may only name labels the expression's result keeps (its outermost grouping).
        kept = set(re.findall(r"\bby \(([^()]*)\)", a["expr"])[0].replace(" ", "").split(","))
        if "absent(" in a["expr"]:
            kept = set()  # absent() keeps only equality matchers: the summary must not need labels
        for text in (ann["summary"], ann["description"]):
            for label in re.findall(r"\$labels\.(\w+)", text):
                assert label in kept or (label == "node" and "if $labels.node" in text), (name, label)


# --- Grafana dashboard ----------------------------------------------------------------------------


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def panel_exprs(doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for p in doc["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for v in doc["templating"]["list"]:
        if v["type"] == "query":
            metric = re.fullmatch(r"label_values\((\w+), (\w+)\)", v["query"]["query"])
            assert metric, v["name"]
            out.append((f"variable {v['name']}", f"count by ({metric.group(2)}) ({metric.group(1)})"))
    return out


def substitute(expr: str) -> str:
    for var, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def test_dashboard_is_importable_as_is() -> None:
    doc = dashboard()
    assert doc["uid"] == "migplan-overview" and doc["schemaVersion"] >= 36 and doc["title"]
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for p in doc["panels"]:
        grid = p["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, p["title"]
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["targets"] and all(t["datasource"] == p["datasource"] for t in p["targets"]), p["title"]
    titles = " | ".join(p["title"].lower() for p in doc["panels"])
    for topic in ("per profile", "per owner", "findings by code", "in flight", "cycle duration", "apply", "report"):
        assert topic in titles, topic


def test_every_panel_query_parses_and_uses_exported_metrics(tmp_path: Path) -> None:
    reg = exported()
    exprs = panel_exprs(dashboard())
    assert len(exprs) >= 15
    rules = []
    for i, (title, expr) in enumerate(exprs):
        expr = substitute(expr)
        check_names(expr, reg, title)
        rules.append({"record": f"migplan:dashboard_panel_{i}", "expr": expr})
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = promtool("check", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # promtool itself refuses a broken one, so the check above can fail
    path.write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": [{"record": "x:y", "expr": "sum by (a"}]}]}))
    assert promtool("check", "rules", str(path)).returncode != 0
