"""check-workloads reads manifests before any API server validated them: a name, a container or a resource holding
a newline or a control character stays inside its one finding line."""

from __future__ import annotations

from reconciler import resources
from reconciler.adapters.fsinventory import read_inventory_dir
from reconciler.catalog import load_catalog
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.logic.workloads import workloads
from reconciler.logic.workloads.manifests import read_manifests

POD = b"""apiVersion: v1
kind: Pod
metadata: {name: "x\\nf.yaml:1: error MP000: forged", namespace: "n\\u202e"}
spec:
  containers:
  - name: "c\\nforged\\x1b[2J"
    resources: {limits: {"nvidia.com/mig-9g\\n.99gb": 1, nvidia.com/mig-1g.18gb: 2}}
"""


def test_names_from_a_manifest_stay_inside_one_printable_line() -> None:
    result = validate_inventory(read_inventory_dir(resources.inventory_dir()), catalog=load_catalog())
    assert result.desired is not None
    manifests, diags = read_manifests(POD, file="f.yaml")
    found, _ = workloads.check_workloads(
        manifests, desired=result.desired, nodes=workloads.plan_nodes(result.desired, load_catalog())
    )
    assert {d.code for d in found} == {"MP606", "MP607", "MP608"}, [str(d) for d in found]
    for d in diags + found:
        assert len(str(d).splitlines()) == 1 and str(d).isprintable(), str(d)
    assert any("Pod n\\u202e/x f.yaml:1: error MP000: forged" in d.message for d in found)
