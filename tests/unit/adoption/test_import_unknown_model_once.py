"""A GPU whose model the catalog lacks is said once (MP583): NVML's name when the observer saw it, else the GFD
label's; whether it was said already is asked of the registry's UNKNOWN_MODEL trait, and the notes are typed."""

from __future__ import annotations

from reconciler.catalog import load_catalog
from reconciler.logic.adoption.adopt import ConfigSource, NodeFacts, Note, import_cluster
from reconciler.logic.adoption.adoptfiles import render_inventory
from reconciler.model.nodeobservation import ObservedGpu
from reconciler.model.observed import ObservedNode

LABELS = {"nvidia.com/gpu.product": "NVIDIA-Mystery", "nvidia.com/gpu.count": "1"}
NO_CONFIGS = ConfigSource("ConfigMap x/y", None, "ConfigMap x/y not found")


def test_nvml_names_the_unknown_model_once() -> None:
    node = NodeFacts(
        ObservedNode(name="odd", labels=LABELS),
        observed=(ObservedGpu(0, "GPU-0", "NVIDIA Mystery", True, False, False),),
    )
    imported = import_cluster([node], NO_CONFIGS, load_catalog())
    assert [(p.code, p.message) for p in imported.problems] == [
        ("MP583", "node odd GPU 0: NVML names this GPU 'NVIDIA Mystery', not a model of the catalog")
    ]
    [gpu] = imported.nodes[0].gpus
    assert gpu.notes == (Note("NVML names this GPU 'NVIDIA Mystery', not a model of the catalog", "MP583"),)
    text = render_inventory(imported, None)["nodes/odd.yaml"]
    assert text.count("MP583") == 1


def test_without_an_observer_the_label_names_it() -> None:
    imported = import_cluster([NodeFacts(ObservedNode(name="odd", labels=LABELS))], NO_CONFIGS, load_catalog())
    assert [p.code for p in imported.problems if p.node == "odd"].count("MP583") == 1
    assert any("(nvidia.com/gpu.product) is not in the catalog" in str(n) for n in imported.nodes[0].gpus[0].notes)
