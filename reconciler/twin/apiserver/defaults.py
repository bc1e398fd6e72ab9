"""Defaulting as the real server's decoder applies it to every write (create, update, every patch type, /status).

Pure: works in place on the JSON dict of a decoded built-in object. The real apiserver decodes every request body
(for a patch: the patched object) into the versioned type, runs the scheme's defaulters (zz_generated.defaults.go,
which calls the hand-written `SetDefaults_*` below) and re-encodes quantities in canonical form when storing. Ported
from kubernetes/kubernetes:
- pkg/apis/core/v1/defaults.go: SetDefaults_ResourceList (RoundUp to milli + canonical form), SetDefaults_Pod
  (requests from limits for containers and initContainers, enableServiceLinks, hostNetwork host ports),
  SetDefaults_PodSpec (dnsPolicy, restartPolicy, securityContext, terminationGracePeriodSeconds, schedulerName),
  SetDefaults_Container (imagePullPolicy from the image tag, terminationMessagePath/Policy), SetDefaults_Volume
  (emptyDir when no source) and the volume sources' defaultMode (420), HostPath type, ServiceAccountTokenProjection
  expirationSeconds (3600), ObjectFieldSelector apiVersion (v1), SetDefaults_Probe, SetDefaults_HTTPGetAction,
  container port protocol (TCP, declarative default), SetDefaults_NodeStatus (allocatable from capacity),
  SetDefaults_Namespace (the kubernetes.io/metadata.name label), SetDefaults_NamespaceStatus (Active);
- pkg/apis/apps/v1/defaults.go: SetDefaults_DaemonSet, SetDefaults_Deployment; their pod templates get the PodSpec
  and Container defaults but not SetDefaults_Pod (a template's requests are not defaulted from its limits);
- k8s.io/kubernetes/pkg/util/parsers ParseImageName with distribution/reference: no tag and no digest means
  `latest`; a name that does not parse has no tag (IfNotPresent).
ConfigMap (SetDefaults_ConfigMap: data {} when nil), Lease and Event have no visible defaults (the ConfigMap's empty
map is dropped by omitempty). Every quantity is decoded here: a malformed one is the decoder's 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request
from .quantity import canonical

# distribution/reference (regexp.go): path components, an optional domain, tag and digest
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
_DEFAULT_MODE = 420  # 0644: Secret/ConfigMap/DownwardAPI/Projected volume sources


def image_tag(image: str) -> str:
    """parsers.ParseImageName's tag: `latest` when neither tag nor digest is given, "" when it does not parse."""
    if not isinstance(image, str) or len(image) > 255:
        return ""
    # the domain may hold upper case, the repository path may not (ParseNormalizedNamed)
    m = _REFERENCE.match(image)
    if m is None:
        return ""
    tag, digest = m.group("tag"), m.group("digest")
    if not tag and not digest:
        return "latest"
    return tag or ""


def _quantities(
    values: Any, path: str, fail: Callable[[str], Exception], *, resource_list: bool
) -> dict[str, Any] | Any:
    """Canonical form of every quantity in a ResourceList (a dict); other shapes are left to validation."""
    if not isinstance(values, dict):
        return values
    out: dict[str, Any] = {}
    for name, raw in values.items():
        try:
            out[name] = canonical(raw, resource_list=resource_list)
        except ValueError as exc:
            raise fail(str(exc)) from exc
    return out


def _quantity(holder: Any, key: str, fail: Callable[[str], Exception]) -> None:
    if isinstance(holder, dict) and key in holder and holder[key] is not None:
        try:
            holder[key] = canonical(holder[key])
        except ValueError as exc:
            raise fail(str(exc)) from exc


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _sub(obj: Any, *keys: str) -> Any:
    cur = obj
    for k in keys:
        cur = cur.get(k) if isinstance(cur, dict) else None
    return cur


def _resource_requirements(res: Any, fail: Callable[[str], Exception]) -> None:
    if isinstance(res, dict):
        for field in ("limits", "requests"):
            if isinstance(res.get(field), dict):
                res[field] = _quantities(res[field], field, fail, resource_list=True)


def _field_ref(item: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    ref = item.get("fieldRef")
    if isinstance(ref, dict) and not ref.get("apiVersion"):
        ref["apiVersion"] = "v1"  # SetDefaults_ObjectFieldSelector
    _quantity(item.get("resourceFieldRef"), "divisor", fail)


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)):
        if not probe.get(key):
            probe[key] = value
    _http_get(probe.get("httpGet"))


def _http_get(action: Any) -> None:
    if isinstance(action, dict):
        if not action.get("path"):
            action["path"] = "/"
        if not action.get("scheme"):
            action["scheme"] = "HTTP"


def _container(c: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_Container plus the generated defaults of its members."""
    if not c.get("imagePullPolicy"):
        c["imagePullPolicy"] = "Always" if image_tag(c.get("image", "")) == "latest" else "IfNotPresent"
    if not c.get("terminationMessagePath"):
        c["terminationMessagePath"] = "/dev/termination-log"
    if not c.get("terminationMessagePolicy"):
        c["terminationMessagePolicy"] = "File"
    for port in _dicts(c.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
    for env in _dicts(c.get("env")):
        source = env.get("valueFrom")
        if isinstance(source, dict):
            _field_ref(source, fail)
    if not isinstance(c.get("resources"), dict):
        c["resources"] = {}  # ResourceRequirements is a struct: always serialised
    _resource_requirements(c["resources"], fail)
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(c.get(key))
    lifecycle = c.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            _http_get(_sub(lifecycle, hook, "httpGet"))


def _volume(v: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_Volume and the defaults of its source."""
    sources = {k for k in v if k != "name" and v[k] is not None}
    if not sources:
        v["emptyDir"] = {}
    _quantity(v.get("emptyDir"), "sizeLimit", fail)
    for key in ("secret", "configMap", "downwardAPI", "projected"):
        src = v.get(key)
        if isinstance(src, dict) and src.get("defaultMode") is None:
            src["defaultMode"] = _DEFAULT_MODE
    host_path = v.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") is None:
        host_path["type"] = ""
    for item in _dicts(_sub(v, "downwardAPI", "items")):
        _field_ref(item, fail)
    for source in _dicts(_sub(v, "projected", "sources")):
        for item in _dicts(_sub(source, "downwardAPI", "items")):
            _field_ref(item, fail)
        token = source.get("serviceAccountToken")
        if isinstance(token, dict) and token.get("expirationSeconds") is None:
            token["expirationSeconds"] = 3600
    _resource_requirements(_sub(v, "ephemeral", "volumeClaimTemplate", "spec", "resources"), fail)


def pod_spec(spec: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_PodSpec and the generated defaults of volumes, containers and overhead (pods and templates)."""
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
    for v in _dicts(spec.get("volumes")):
        _volume(v, fail)
    for field in _CONTAINER_LISTS:
        for c in _dicts(spec.get(field)):
            _container(c, fail)
    if isinstance(spec.get("overhead"), dict):
        spec["overhead"] = _quantities(spec["overhead"], "overhead", fail, resource_list=True)
    _resource_requirements(spec.get("resources"), fail)


def pod(obj: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetObjectDefaults_Pod: SetDefaults_Pod, then the PodSpec defaults, then the status ResourceLists."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    for field in ("containers", "initContainers"):
        for c in _dicts(spec.get(field)):
            res = c.get("resources")
            if not isinstance(res, dict):
                continue
            limits = res.get("limits")
            if isinstance(limits, dict):
                requests = res.get("requests")
                if not isinstance(requests, dict):
                    requests = res["requests"] = {}
                for name, value in limits.items():
                    requests.setdefault(name, value)
                if not requests:
                    res.pop("requests")  # an empty ResourceList is omitted when serialised
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    if spec.get("hostNetwork") is True:
        for field in ("containers", "initContainers"):
            for c in _dicts(spec.get(field)):
                for port in _dicts(c.get("ports")):
                    if not port.get("hostPort"):
                        port["hostPort"] = port.get("containerPort")
    pod_spec(spec, fail)
    for single, plural in (("podIP", "podIPs"), ("hostIP", "hostIPs")):
        _single_and_plural(obj.get("status"), single, plural, lambda v: {"ip": v}, _ip)
    for field in _STATUS_LISTS:
        for status in _dicts(_sub(obj, "status", field)):
            if isinstance(status.get("allocatedResources"), dict):
                status["allocatedResources"] = _quantities(
                    status["allocatedResources"], "allocatedResources", fail, resource_list=True
                )
            _resource_requirements(status.get("resources"), fail)


def _single_and_plural(
    holder: Any, single: str, plural: str, wrap: Callable[[Any], Any], unwrap: Callable[[Any], Any]
) -> None:
    """The v1 <-> internal round trip of a field kept twice in v1 (podCIDR/podCIDRs, podIP/podIPs, hostIP/hostIPs):
    the singular one wins when both are set and differ, fills the list when it is empty, and is rewritten from the
    list's first item on the way out (Convert_v1_NodeSpec_To_core_NodeSpec, Convert_v1_PodStatus_To_core_PodStatus
    and their reverse)."""
    if not isinstance(holder, dict):
        return
    one, many = holder.get(single), holder.get(plural)
    if one and (not isinstance(many, list) or not many or unwrap(many[0]) != one):
        holder[plural] = [wrap(one)]
    many = holder.get(plural)
    if isinstance(many, list) and many and unwrap(many[0]):
        holder[single] = unwrap(many[0])


def _ip(value: Any) -> Any:
    return value.get("ip") if isinstance(value, dict) else None


def node(obj: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_NodeStatus (allocatable from capacity when absent), the two ResourceLists, podCIDR(s)."""
    _single_and_plural(obj.get("spec"), "podCIDR", "podCIDRs", lambda v: v, lambda v: v)
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    if status.get("allocatable") is None and isinstance(status.get("capacity"), dict):
        status["allocatable"] = dict(status["capacity"])
    for field in ("capacity", "allocatable"):
        if isinstance(status.get(field), dict):
            status[field] = _quantities(status[field], field, fail, resource_list=True)
            if not status[field]:
                status.pop(field)  # omitempty
        elif field in status and status[field] is None:
            status.pop(field)


def daemonset(obj: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_DaemonSet and the template's PodSpec defaults."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    strategy = spec.get("updateStrategy")
    if not isinstance(strategy, dict):
        strategy = spec["updateStrategy"] = {}
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            rolling = strategy["rollingUpdate"] = {}
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = 1
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    _template(spec, fail)


def deployment(obj: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_Deployment (apps/v1) and the template's PodSpec defaults."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    strategy = spec.get("strategy")
    if not isinstance(strategy, dict):
        strategy = spec["strategy"] = {}
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            rolling = strategy["rollingUpdate"] = {}
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = "25%"
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = "25%"
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = 600
    _template(spec, fail)


def _template(spec: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    template = spec.get("template")
    if not isinstance(template, dict):
        template = spec["template"] = {}
    tspec = template.get("spec")
    if not isinstance(tspec, dict):
        tspec = template["spec"] = {}
    pod_spec(tspec, fail)


def namespace(obj: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_Namespace (only for a named namespace) and SetDefaults_NamespaceStatus."""
    meta = obj["metadata"]
    if meta.get("name"):
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels["kubernetes.io/metadata.name"] = meta["name"]
    status = obj.get("status")
    if isinstance(status, dict) and not status.get("phase"):
        status["phase"] = "Active"


def limit_range(obj: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """SetDefaults_LimitRangeItem for Container items (default from max, defaultRequest from default, then min)
    and the ResourceLists of every item."""
    for item in _dicts(_sub(obj, "spec", "limits")):
        for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            if isinstance(item.get(field), dict):
                item[field] = _quantities(item[field], field, fail, resource_list=True)
        if item.get("type") != "Container":
            continue
        default = dict(item.get("default") or {})
        default_request = dict(item.get("defaultRequest") or {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            default_request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            default_request.setdefault(name, value)
        for field, values in (("default", default), ("defaultRequest", default_request)):
            if values:
                item[field] = values


def resource_quota(obj: dict[str, Any], fail: Callable[[str], Exception]) -> None:
    """The ResourceLists of a ResourceQuota (spec.hard, status.hard, status.used)."""
    for holder, field in ((obj.get("spec"), "hard"), (obj.get("status"), "hard"), (obj.get("status"), "used")):
        if isinstance(holder, dict) and isinstance(holder.get(field), dict):
            holder[field] = _quantities(holder[field], field, fail, resource_list=True)


_DEFAULTERS: dict[str, Callable[[dict[str, Any], Callable[[str], Exception]], None]] = {
    "pods": pod,
    "nodes": node,
    "daemonsets.apps": daemonset,
    "deployments.apps": deployment,
    "namespaces": namespace,
    "limitranges": limit_range,
    "resourcequotas": resource_quota,
}


def apply(resource: str, kind: str, version: str, obj: dict[str, Any]) -> None:
    """Run the scheme's defaulters for one decoded built-in object; 400 (the decoder's) for a bad quantity."""
    defaulter = _DEFAULTERS.get(resource)
    if defaulter is None:
        return

    def fail(message: str) -> Exception:
        return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {message}')

    defaulter(obj, fail)
