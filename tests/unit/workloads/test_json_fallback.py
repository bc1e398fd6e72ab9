"""A manifest that is JSON but that the YAML reader cannot parse (a surrogate-pair escape) is read as JSON: the YAML
reader's verdict is asked of the registry's UNPARSED trait, not of a code string."""

from __future__ import annotations

from reconciler.logic.workloads.manifests import _read_yaml, read_manifests

POD = (
    b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"a": "\\ud83d\\ude00"}},'
    b' "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/mig-1g.18gb": 1}}}]}}\n'
)


def test_json_the_yaml_reader_refuses_is_read_as_json() -> None:
    assert [d.code for d in _read_yaml(POD.decode(), "p.json")[1]] == ["MP601"]  # the YAML reader gives up
    manifests, diags = read_manifests(POD, file="p.json")
    assert diags == []
    [pod] = manifests
    assert pod.body["metadata"]["annotations"] == {"a": "\U0001f600"}
