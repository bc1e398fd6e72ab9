"""deploy/helm/migplan, with a real Helm 3 binary (tests/helpers/helmbin.py): `helm lint` passes; `helm template`
renders the same objects as kustomize for the same settings (the defaults = deploy/base, ci/example-values.yaml =
deploy/overlays/example, applyMode=agent = deploy/overlays/agent-mode), the one difference being who says it
manages them (`app.kubernetes.io/managed-by`: Helm vs kustomize); the credentials Secret only when asked for; and
every rendered object is accepted by the twin's API server (after a server-side dry run)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.helmbin import HelmUnavailable, helm_binary
from kubernetes import client
from test_deploy import DEPLOY, collection, monitoring_crd, render, send

from reconciler import __version__
from reconciler.controller.loop import kube_configuration
from reconciler.twin.apiserver import ApiServerTwin

CHART = DEPLOY / "helm" / "migplan"
MANAGED_BY = "app.kubernetes.io/managed-by"


@pytest.fixture(scope="module")
def helm() -> Path:
    try:
        return helm_binary()
    except HelmUnavailable as exc:
        pytest.fail(f"a Helm 3 binary is needed: {exc}")


def template(helm: Path, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(helm), "template", "migplan", str(CHART), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def normal(objs: list[dict[str, Any]], *, manager: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Objects by (kind, namespace, name), `managed-by` checked to be `manager` where set and then dropped, the
    settings file parsed (Helm writes its keys sorted, kustomize as the file has them: the same settings)."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in objs:
        labels = o["metadata"].get("labels", {})
        if MANAGED_BY in labels:
            assert labels.pop(MANAGED_BY) == manager, o["metadata"]
        if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {}):
            o["data"]["config.yaml"] = yaml.safe_load(o["data"]["config.yaml"])
        key = (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        assert key not in out, key
        out[key] = o
    return out


def test_lint(helm: Path) -> None:
    out = subprocess.run([str(helm), "lint", str(CHART)], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0 and "0 chart(s) failed" in out.stdout, out.stdout + out.stderr
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["version"] == chart["appVersion"] == __version__


@pytest.mark.parametrize(
    ("args", "overlay"),
    [
        ((), "base"),
        (("-f", str(CHART / "ci" / "example-values.yaml")), "overlays/example"),
        (("--set", "applyMode=agent"), "overlays/agent-mode"),
        (("--set", "draDriver.restartPlugin=true"), "overlays/dra-static"),
    ],
    ids=["defaults=base", "example-values=example", "agent=agent-mode", "dra-static=dra-static"],
)
def test_helm_renders_what_kustomize_renders(helm: Path, args: tuple[str, ...], overlay: str) -> None:
    from_helm = normal(template(helm, *args), manager="Helm")
    from_kustomize = normal(render(DEPLOY / overlay), manager="kustomize")
    assert sorted(from_helm) == sorted(from_kustomize)
    for key, obj in from_kustomize.items():
        assert from_helm[key] == obj, key
    assert len(from_helm) >= 20


def test_the_chart_holds_the_same_alerting_rules_as_the_monitoring_component() -> None:
    assert (CHART / "files" / "prometheusrule.yaml").read_bytes() == (
        DEPLOY / "components" / "monitoring" / "prometheusrule.yaml"
    ).read_bytes()


def test_values_move_what_they_name(helm: Path) -> None:
    objs = template(
        helm,
        "--set", "namespace=gpu-tools", "--set", "gpuOperator.namespace=nvidia-gpu-operator",
        "--set", "gpuOperator.clusterPolicy=gpu-cluster-policy", "--set", "agent.enabled=false",
        "--set", "repository.url=https://git.example.org/inv.git", "--set", "image.tag=9.9.9",
        "--set", "draDriver.restartPlugin=true", "--set", "draDriver.namespace=dra-system",
    )  # fmt: skip
    kinds = {o["kind"] for o in objs}
    assert "DaemonSet" not in kinds and "ValidatingAdmissionPolicy" not in kinds and "Secret" not in kinds
    namespaces = {o["metadata"].get("namespace") for o in objs} - {None}
    assert namespaces == {"gpu-tools", "nvidia-gpu-operator", "default", "dra-system"}
    (restart,) = [o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "migplan-dra-plugin-restart"]
    assert restart["metadata"]["namespace"] == "dra-system"
    assert restart["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    settings = yaml.safe_load(cm["data"]["config.yaml"])
    assert settings["repo"] == "https://git.example.org/inv.git" and settings["namespace"] == "gpu-tools"
    (role,) = [o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "migplan-controller"]
    assert any(r.get("resourceNames") == ["gpu-cluster-policy"] for r in role["rules"])
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "migplan:9.9.9"


def test_the_credentials_secret_only_when_asked_for_and_never_a_placeholder(helm: Path) -> None:
    refused = subprocess.run(
        [str(helm), "template", "migplan", str(CHART), "--set", "credentials.create=true"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0 and "credentials.password is required" in refused.stderr
    objs = template(
        helm, "--set", "credentials.create=true", "--set", "credentials.password=tok",
        "--set", "credentials.webhookSecret=hook",
    )  # fmt: skip
    (secret,) = [o for o in objs if o["kind"] == "Secret"]
    assert secret["stringData"] == {"password": "tok", "webhook-secret": "hook"}
    assert secret["metadata"] == {
        "name": "migplan-git-credentials",
        "namespace": "migplan",
        "labels": {MANAGED_BY: "Helm", "app.kubernetes.io/part-of": "migplan"},
    }


def test_every_rendered_object_is_accepted_by_the_twin(helm: Path, tmp_path: Path) -> None:
    objs = template(helm, "-f", str(CHART / "ci" / "example-values.yaml"))
    with ApiServerTwin(namespaces=("default", "gpu-operator")) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "config")
        for kind in ("ServiceMonitor", "PrometheusRule"):
            api.store.create("customresourcedefinitions.apiextensions.k8s.io", monitoring_crd(kind))
        raw = client.ApiClient(kube_configuration(str(kubeconfig)))
        created, unserved = [], []
        for obj in sorted(objs, key=lambda o: o["kind"] != "Namespace"):
            path = collection(obj)
            status, body = send(raw, "POST", path + "?dryRun=All", obj)
            if status == 404 and (not isinstance(body, dict) or "namespaces" not in str(body)):
                unserved.append(obj["kind"])
                continue
            assert status == 201, (obj["kind"], obj["metadata"]["name"], body)
            status, body = send(raw, "POST", path, obj)
            assert status == 201, (obj["kind"], obj["metadata"]["name"], body)
            created.append(obj["kind"])
    assert {"Namespace", "Deployment", "DaemonSet", "ConfigMap", "ServiceMonitor", "PrometheusRule"} <= set(created)
    assert set(unserved) <= {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
