"""reconciler.logic.observe.profilecheck: a node whose GPUs (as GFD reports them) would not understand its plan's
profiles is held before it is labelled (mig-parted would empty such a GPU and report success)."""

from __future__ import annotations

from reconciler.catalog import load_catalog
from reconciler.logic.observe import profilecheck
from reconciler.model.inventory import GpuSpec, NodeSpec, Partition

CATALOG = load_catalog()


def _plan(model: str, *profiles: str) -> NodeSpec:
    parts = tuple(Partition(profile=p) for p in profiles)
    return NodeSpec(name="n", gpus=(GpuSpec(index=0, model=model, mig_enabled=True, partitions=parts),))


def test_a_node_of_the_plans_model_is_not_held() -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/mig-1g.18gb.count": "2"}
    assert profilecheck.unoffered(_plan("H200-141GB", "1g.18gb", "3g.71gb"), labels, CATALOG) is None


def test_a_node_of_another_model_is_held_naming_the_profiles() -> None:
    why = profilecheck.unoffered(
        _plan("H200-141GB", "1g.18gb", "3g.40gb"), {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, CATALOG
    )
    assert why is not None and "H100-80GB" in why and "1g.18gb" in why and "3g.40gb" not in why.split("no ")[1]


def test_single_strategy_product_suffix_is_read() -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}
    assert profilecheck.unoffered(_plan("H200-141GB", "1g.18gb"), labels, CATALOG) is not None
    assert profilecheck.reported_profiles(labels) == frozenset({"1g.10gb"})


def test_profile_names_the_catalog_does_not_know_mean_the_driver_names_them_otherwise() -> None:
    """GB200 boards whose driver says 1g.24gb where the catalog says 1g.23gb: only the node's names are believed."""
    labels = {"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/mig-1g.24gb.count": "7"}
    why = profilecheck.unoffered(_plan("GB200-186GB", "1g.23gb"), labels, CATALOG)
    assert why is not None and "1g.24gb" in why and "1g.23gb" in why
    # the same labels with the catalog's names: nothing to say
    ok = {"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/mig-1g.23gb.count": "7"}
    assert profilecheck.unoffered(_plan("GB200-186GB", "1g.23gb"), ok, CATALOG) is None


def test_a_node_that_says_nothing_or_a_plan_without_mig_is_not_held() -> None:
    assert profilecheck.unoffered(_plan("H200-141GB", "1g.18gb"), {}, CATALOG) is None
    no_mig = NodeSpec(name="n", gpus=(GpuSpec(index=0, model="H200-141GB", mig_enabled=False),))
    assert profilecheck.unoffered(no_mig, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, CATALOG) is None


def test_hostile_labels_do_not_break_it() -> None:
    labels = {"nvidia.com/mig-.count": "x", "nvidia.com/gpu.product": "-MIG-", "nvidia.com/mig-" + "a" * 500: "1"}
    assert profilecheck.unoffered(_plan("H200-141GB", "1g.18gb"), labels, CATALOG) is None


def test_gb200_plan_in_the_early_naming_is_accepted_on_a_node_that_uses_it() -> None:
    """Issue 26 item 5: either documented GB200 naming is accepted, and the node's own names decide which."""
    early = {"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/mig-1g.24gb.count": "2"}
    late = {"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/mig-1g.23gb.count": "2"}
    plan_early = _plan("GB200-186GB", "1g.24gb", "1g.24gb", "2g.47gb", "3g.95gb")
    plan_late = _plan("GB200-186GB", "1g.23gb", "1g.23gb", "2g.47gb", "3g.93gb")
    assert profilecheck.unoffered(plan_early, early, CATALOG) is None
    assert profilecheck.unoffered(plan_late, late, CATALOG) is None
    why = profilecheck.unoffered(plan_early, late, CATALOG)
    assert why is not None and "catalog's naming" in why and "1g.24gb, 3g.95gb" in why
    why = profilecheck.unoffered(plan_late, early, CATALOG)
    assert why is not None and "early boards/drivers naming" in why and "1g.23gb, 3g.93gb" in why


def test_gb200_names_both_namings_share_do_not_say_which_so_the_others_are_held() -> None:
    shared = {"nvidia.com/gpu.product": "NVIDIA-GB200", "nvidia.com/mig-2g.47gb.count": "3"}
    assert profilecheck.unoffered(_plan("GB200-186GB", "2g.47gb", "1g.47gb"), shared, CATALOG) is None
    why = profilecheck.unoffered(_plan("GB200-186GB", "2g.47gb", "1g.23gb"), shared, CATALOG)
    assert why is not None and "both of its documented namings share" in why and "1g.23gb" in why
    # a node saying nothing about its MIG devices is still not held
    quiet = {"nvidia.com/gpu.product": "NVIDIA-GB200"}
    assert profilecheck.unoffered(_plan("GB200-186GB", "1g.24gb"), quiet, CATALOG) is None
