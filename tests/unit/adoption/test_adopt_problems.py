"""An import problem quotes what the cluster holds; it stays one printable line, so a hostile ConfigMap cannot
forge a `warning MPxxx:` line in `migplan import`'s output."""

from __future__ import annotations

from reconciler.catalog import load_catalog
from reconciler.logic.adoption.adopt import NodeFacts, Problem, import_cluster, parse_configs
from reconciler.model.observed import ObservedNode

FORGED = (
    'version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-enabled: true\n    "k\\nwarning MP000: forged": 1\n'
)


def test_a_hostile_mig_parted_key_stays_inside_one_problem_line() -> None:
    source = parse_configs("ConfigMap gpu-operator/c", FORGED)
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H200",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/mig.config": "x",
        "nvidia.com/mig.config.state": "success",
    }
    imported = import_cluster([NodeFacts(ObservedNode("n1", labels))], source, load_catalog())
    mp584 = [p for p in imported.problems if p.code == "MP584"]
    assert mp584 and all("\n" not in p.message and p.message.isprintable() for p in imported.problems)
    assert "k warning MP000: forged" in mp584[0].message


def test_a_problem_message_is_one_printable_line() -> None:
    p = Problem("MP584", "a\n  in line 2\r\nb\x1b[2J\u202ec")
    assert p.message == "a in line 2 b\\x1b[2J\\u202ec" and str(p) == f"MP584: {p.message}"
