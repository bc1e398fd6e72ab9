"""The twin's mig-parted tries orderings as mig-parted does (issue 26 item 4): `MigConfig.Flatten` puts the largest
profiles first (G, then C, then attributes, descending) and `iteratePermutationsUntilSuccess` swaps in place from
there, skipping equal profiles; a profile the GPU does not have fails every ordering (`resolveMigProfileOnDevice`)."""

from __future__ import annotations

import pytest

from reconciler.twin.operator.migparted import MigPartedError, flatten, orderings


def test_flatten_is_largest_first() -> None:
    got = flatten({"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1, "1g.18gb+me": 1, "1c.3g.71gb": 1, "7g.141gb": 0})
    assert got == ["3g.71gb", "1c.3g.71gb", "2g.35gb", "1g.18gb+me", "1g.18gb", "1g.18gb"]


def test_orderings_follow_the_swap_recursion_and_skip_equal_profiles() -> None:
    assert list(orderings(["3g", "2g", "1g"])) == [
        ("3g", "2g", "1g"),
        ("3g", "1g", "2g"),
        ("2g", "3g", "1g"),
        ("2g", "1g", "3g"),
        ("1g", "2g", "3g"),
        ("1g", "3g", "2g"),
    ]
    assert list(orderings(["3g", "1g", "1g"])) == [("3g", "1g", "1g"), ("1g", "3g", "1g"), ("1g", "1g", "3g")]


def test_a_profile_the_gpu_lacks_fails_every_ordering() -> None:
    from reconciler.catalog import load_catalog
    from reconciler.twin.gpus import TwinGpu
    from reconciler.twin.operator import migparted

    model = load_catalog().get("H100-80GB")
    assert model is not None
    gpu = TwinGpu(node="n", index=0, model=model, mig_enabled=True)
    with pytest.raises(MigPartedError) as e:
        migparted._set_mig_config(gpu, {"1g.18gb": 1})
    assert "all orderings failed" in str(e.value) and "not found on this GPU" in e.value.details[0]
