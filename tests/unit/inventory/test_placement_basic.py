from reconciler.catalog import load_catalog
from reconciler.logic.inventory.placement import Request, solve
from reconciler.model.inventory import Placement

H200 = load_catalog().get("H200-141GB")


def test_article_cut_fits_only_with_3g_at_4() -> None:
    assert H200 is not None
    got = solve(H200, [Request("3g.71gb"), Request("2g.35gb"), Request("1g.18gb"), Request("1g.18gb")])
    assert got is not None
    assert got[0] == Placement(4, 4)
    assert solve(H200, [Request("3g.71gb", 0), Request("2g.35gb"), Request("1g.18gb"), Request("1g.18gb")]) is None


def test_instance_limit_is_part_of_feasibility() -> None:
    assert H200 is not None
    assert solve(H200, [Request("1g.18gb")] * 7) is not None
    assert solve(H200, [Request("1g.18gb")] * 8) is None
