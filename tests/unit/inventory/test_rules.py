"""Each validation rule has a failing and a passing case (the corpus holds more failing ones).

A case is an inventory built from a few YAML lines; the failing one must produce the rule's code,
the passing one (the nearest legal variant) must produce no error at all.
"""

from __future__ import annotations

import pytest

from reconciler.catalog import load_catalog
from reconciler.logic.inventory import rules
from reconciler.logic.inventory.validation import validate_inventory
from reconciler.model.inventory import GpuSpec, MigStrategy, NodeSpec, Partition, Placement, SourceRef

CLUSTER = "apiVersion: migplan/v1\nkind: Cluster\nspec: {{migStrategy: {s}}}\n"


def node(gpus: str, name: str = "n1") -> bytes:
    return f"apiVersion: migplan/v1\nkind: Node\nmetadata: {{name: {name}}}\nspec:\n  gpus:\n{gpus}".encode()


def gpu(model: str, parts: list[str], *, index: int = 0, enabled: bool = True) -> str:
    body = "".join(f"          - {p}\n" for p in parts)
    return (
        f"    - index: {index}\n      model: {model}\n      mig:\n        enabled: {str(enabled).lower()}\n"
        f"        partitions:\n{body}"
        if parts
        else f"    - index: {index}\n      model: {model}\n      mig: {{enabled: {str(enabled).lower()}}}\n"
    )


def layout(name: str, parts: list[str], model: str | None = None) -> bytes:
    m = f"  model: {model}\n" if model else ""
    body = "".join(f"      - {p}\n" for p in parts)
    return (
        f"apiVersion: migplan/v1\nkind: Layout\nmetadata: {{name: {name}}}\nspec:\n{m}  mig:\n    enabled: true\n"
        f"    partitions:\n{body}"
    ).encode()


def inv(nodes: str | dict[str, bytes], strategy: str = "mixed", **extra: bytes) -> dict[str, bytes]:
    files = {"cluster.yaml": CLUSTER.format(s=strategy).encode()}
    if isinstance(nodes, str):
        files["nodes/n1.yaml"] = node(nodes)
    else:
        files.update(nodes)
    # keyword names stand for paths: layouts__halves_yaml -> layouts/halves.yaml
    files.update({k.replace("__", "/").replace("_yaml", ".yaml").replace("_md", ".md"): v for k, v in extra.items()})
    return files


H100, H200, A100 = "H100-80GB", "H200-141GB", "A100-40GB"
SMALL = ["{profile: 2g.35gb}", "{profile: 1g.18gb}", "{profile: 1g.18gb}"]
OFF = gpu(H100, [], enabled=False)
HALVES = layout("halves", ["{profile: 3g.40gb}", "{profile: 3g.40gb}"], model=H100)

CASES: dict[str, tuple[dict[str, bytes], dict[str, bytes]]] = {
    "MP301": (
        inv(gpu("H300-200GB", ["{profile: 3g.40gb}"])),
        inv(gpu("NVIDIA-H100-80GB-HBM3", ["{profile: 3g.40gb}"])),
    ),
    "MP302": (inv(gpu(H100, ["{profile: 3g.71gb}"])), inv(gpu(H200, ["{profile: 3g.71gb}"]))),
    "MP303": (
        inv(gpu(H100, ["{profile: 1g.20gb}"] * 5)),
        inv(gpu(H100, ["{profile: 1g.20gb}"] * 4)),
    ),
    "MP304": (
        inv(gpu(H100, ["{profile: 4g.40gb}", "{profile: 2g.20gb}", "{profile: 2g.20gb}"])),
        inv(gpu(H100, ["{profile: 4g.40gb}", "{profile: 2g.20gb}", "{profile: 1g.10gb}"])),
    ),
    "MP305": (
        inv(gpu(A100, ["{profile: 1g.10gb}"] * 4 + ["{profile: 1g.5gb}"])),
        inv(gpu(A100, ["{profile: 1g.10gb}"] * 3 + ["{profile: 1g.5gb}"])),
    ),
    "MP306": (
        inv(gpu(H100, ["{profile: 3g.40gb, placement: 2}"])),
        inv(gpu(H100, ["{profile: 3g.40gb, placement: 4}"])),
    ),
    "MP307": (
        inv(gpu(H100, ["{profile: 2g.20gb, placement: 0}", "{profile: 1g.10gb, placement: 1}"])),
        inv(gpu(H100, ["{profile: 2g.20gb, placement: 0}", "{profile: 1g.10gb, placement: 2}"])),
    ),
    "MP308": (
        inv(
            gpu(
                H200,
                ["{profile: 3g.71gb, placement: 0}", "{profile: 2g.35gb}", "{profile: 1g.18gb}", "{profile: 1g.18gb}"],
            )
        ),
        inv(gpu(H200, ["{profile: 3g.71gb}", *SMALL])),
    ),
    "MP309": (inv(gpu(H100, [])), inv(gpu(H100, [], enabled=False))),
    "MP310": (inv(gpu(H100, ["{profile: 3g.40gb}"], enabled=False)), inv(gpu(H100, ["{profile: 3g.40gb}"]))),
    "MP311": (inv(gpu(H200, ["{profile: 1c.3g.71gb}"])), inv(gpu(H200, ["{profile: 3g.71gb}"]))),
    "MP313": (
        inv("    - index: 0\n      model: H100-80GB\n", layouts__halves_yaml=HALVES),
        inv("    - index: 0\n      model: H100-80GB\n      layout: halves\n", layouts__halves_yaml=HALVES),
    ),
    "MP314": (
        inv("    - index: 0\n      model: A100-40GB\n      layout: halves\n", layouts__halves_yaml=HALVES),
        inv("    - index: 0\n      model: H100-80GB\n      layout: halves\n", layouts__halves_yaml=HALVES),
    ),
    "MP401": (
        inv(gpu(H100, ["{profile: 3g.40gb}", "{profile: 4g.40gb}"]), strategy="single"),
        inv(gpu(H100, ["{profile: 3g.40gb}", "{profile: 3g.40gb}"]), strategy="single"),
    ),
    "MP402": (
        inv(gpu(H100, ["{profile: 3g.40gb}"]) + gpu(H100, [], index=1, enabled=False), strategy="single"),
        inv(gpu(H100, ["{profile: 3g.40gb}"]) + gpu(H100, ["{profile: 3g.40gb}"], index=1), strategy="single"),
    ),
    "MP404": (
        inv({"nodes/n1.yaml": node(gpu(H100, ["{profile: 3g.40gb}"]), name="n2")}),
        inv(gpu(H100, ["{profile: 3g.40gb}"])),
    ),
    "MP405": (
        inv({"nodes/n1.yaml": node(gpu(H100, [])), "nodes/n2.yaml": node(gpu(H100, []), name="n1")} | {}),
        inv(
            {
                "nodes/n1.yaml": node(gpu(H100, [], enabled=False)),
                "nodes/n2.yaml": node(gpu(H100, [], enabled=False), name="n2"),
            }
        ),
    ),
    "MP406": (
        inv(gpu(H100, [], enabled=False) + gpu(H100, [], enabled=False)),
        inv(gpu(H100, [], enabled=False) + gpu(H100, [], index=1, enabled=False)),
    ),
    "MP407": (
        inv("    - index: 0\n      model: H100-80GB\n      layout: quarters\n", layouts__halves_yaml=HALVES),
        inv("    - index: 0\n      model: H100-80GB\n      layout: halves\n", layouts__halves_yaml=HALVES),
    ),
    "MP408": (
        inv(gpu(H100, [], enabled=False), layouts__other_yaml=HALVES),
        inv(gpu(H100, [], enabled=False), layouts__halves_yaml=HALVES),
    ),
    "MP409": ({"nodes/n1.yaml": node(gpu(H100, [], enabled=False))}, inv(gpu(H100, [], enabled=False))),
    "MP411": (
        inv(gpu(H100, [], enabled=False), nodes__rack__n3_yaml=node(gpu(H100, []), name="n3")),
        inv(gpu(H100, [], enabled=False), nodes__n3_yaml=node(gpu(H100, [], enabled=False), name="n3")),
    ),
}


def codes(files: dict[str, bytes]) -> set[str]:
    return {d.code for d in validate_inventory(files).diagnostics}


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_fails_and_passes(code: str) -> None:
    failing, passing = CASES[code]
    bad = validate_inventory(failing)
    assert code in {d.code for d in bad.diagnostics}, [str(d) for d in bad.diagnostics]
    assert not bad.valid
    good = validate_inventory(passing)
    assert good.valid and not good.errors, [str(d) for d in good.diagnostics]
    assert code not in {d.code for d in good.diagnostics}


def test_warning_rules_fail_and_pass() -> None:
    # MP312: placements unknown (B200) -> warning but valid; a known model gets no such warning.
    b200 = inv(gpu("B200-180GB", ["{profile: 3g.90gb}", "{profile: 4g.90gb}"]))
    r = validate_inventory(b200)
    assert r.valid and [d.code for d in r.warnings] == ["MP312"]
    assert "slice counts" in r.warnings[0].message
    assert r.desired is not None and r.desired.nodes["n1"].gpus[0].placements == ()
    assert "MP312" not in codes(inv(gpu(H100, ["{profile: 3g.40gb}"])))
    # ...but counts are still enforced on such a model.
    assert "MP303" in codes(inv(gpu("B200-180GB", ["{profile: 3g.90gb}"] * 3)))
    # MP403: partitions under strategy none -> warning; none without MIG partitions -> nothing.
    r = validate_inventory(inv(gpu(H100, ["{profile: 3g.40gb}"]), strategy="none"))
    assert r.valid and [d.code for d in r.warnings] == ["MP403"]
    assert codes(inv(gpu(H100, [], enabled=False), strategy="none")) == set()
    # MP410: unexpected YAML -> warning; non-YAML files are ignored silently.
    assert codes(inv(gpu(H100, [], enabled=False), values_yaml=b"a: 1\n")) == {"MP410"}
    assert codes(inv(gpu(H100, [], enabled=False), README_md=b"# hi\n")) == set()


def test_single_strategy_message_quotes_the_device_plugin() -> None:
    r = validate_inventory(inv(gpu(H200, ["{profile: 3g.71gb}", "{profile: 2g.35gb}"]), strategy="single"))
    (d,) = r.errors
    assert d.code == "MP401" and d.file == "nodes/n1.yaml" and d.line == 6
    assert "more than one MIG device type present on node" in d.message
    assert "migStrategy: mixed" in d.message


def test_refusals_are_quoted_as_the_device_plugin_words_them() -> None:
    # k8s-device-plugin device_map.go: under mixed a C != G profile matches no resource pattern (buildMigDeviceMap);
    # under single a MIG-enabled GPU without devices fails assertAllMigDevicesAreValid; the MIG-device checks run
    # before the same-migEnabled check, so a node with both problems logs the type error.
    (ci,) = validate_inventory(inv(gpu(H200, ["{profile: 1c.3g.71gb}"]))).errors
    assert "'MIG profile '1c.3g.71gb' does not match any resource patterns'" in ci.message
    (empty,) = validate_inventory(inv(gpu(H100, []))).errors
    assert "'device <index> has no MIG devices configured'" in empty.message
    both = inv(gpu(H100, ["{profile: 3g.40gb}", "{profile: 4g.40gb}"]) + gpu(H100, [], index=1, enabled=False))
    modes = next(
        d
        for d in validate_inventory(both | {"cluster.yaml": CLUSTER.format(s="single").encode()}).errors
        if d.code == "MP402"
    )
    assert "(its log shows 'more than one MIG device type present on node' first)" in modes.message


def test_diagnostics_point_at_the_partition_line() -> None:
    files = inv(gpu(H100, ["{profile: 3g.40gb, placement: 0}", "{profile: 3g.40gb, placement: 3}"]))
    (d,) = validate_inventory(files).errors
    assert (d.code, d.file, d.line) == ("MP306", "nodes/n1.yaml", 12)
    assert "allowed starts: 0, 4" in d.message


def test_layout_rules_point_at_the_layout_file() -> None:
    bad_layout = layout("tight", ["{profile: 3g.40gb, placement: 0}", "{profile: 4g.40gb}"])
    files = inv(
        "    - index: 0\n      model: H100-80GB\n      layout: tight\n"
        "    - index: 1\n      model: H100-80GB\n      layout: tight\n",
        layouts__tight_yaml=bad_layout,
    )
    errs = validate_inventory(files).errors
    assert [(d.code, d.file) for d in errs] == [("MP308", "layouts/tight.yaml")]  # once, not per GPU


def test_check_gpu_returns_placements_aligned_with_partitions() -> None:
    h200 = load_catalog().get(H200)
    assert h200 is not None
    parts = [Partition(p) for p in ("1g.18gb", "3g.71gb", "1g.18gb", "2g.35gb")]
    check = rules.check_gpu(h200, mig_enabled=True, partitions=parts, source=None, context="t")
    assert check.diagnostics == ()
    assert check.placements[1] == Placement(4, 4)
    assert len(check.placements) == 4


def test_strategy_rules_on_values() -> None:
    src = SourceRef("nodes/n.yaml", 3)
    gpus = (
        GpuSpec(0, H100, True, (Partition("3g.40gb"), Partition("3g.40gb"))),
        GpuSpec(1, H100, True, (Partition("3g.40gb"),)),
    )
    n = NodeSpec("n", gpus, source=src)
    assert rules.check_strategy(MigStrategy.SINGLE, n, gpu_lines={}) == ()
    assert rules.check_strategy(MigStrategy.MIXED, n, gpu_lines={}) == ()
    (w,) = rules.check_strategy(MigStrategy.NONE, n, gpu_lines={0: src})
    assert w.code == "MP403" and not w.is_error


def test_every_code_is_documented_in_the_table() -> None:
    doc = rules.__doc__ or ""
    for code, rule in rules.CODES.items():
        assert f"| {code} | {rule.severity.value:<7} |" in doc, code


# Load and schema rules: the failing cases live in tests/corpus/; here, next to each, the nearest
# legal spelling passes (so a rule that fires on everything would be caught).
NEAR_MISSES: dict[str, tuple[str, str]] = {
    "MP109": (
        "{profile: 3g.40gb, owner: &o team-a}\n          - {profile: 3g.40gb, owner: *o}",
        "{profile: 3g.40gb, owner: team-a}\n          - {profile: 3g.40gb, owner: team-a}",
    ),
    "MP110": ("{profile: !gpu 3g.40gb}", "{profile: 3g.40gb}"),
    "MP111": ("{profile: 3g.40gb, owner: a, owner: b}", "{profile: 3g.40gb, owner: a, purpose: b}"),
    "MP202": ("{profile: 3g.40gb, palcement: 4}", "{profile: 3g.40gb, placement: 4}"),
    "MP203": ("{profile: 3g.40gb, placement: '4'}", "{profile: 3g.40gb, placement: 4}"),
    "MP205": ("{profile: 3g.40gb, owner: Team_A}", "{profile: 3g.40gb, owner: team-a}"),
    "MP206": ("{profile: 1g.10gb, placement: 8}", "{profile: 1g.10gb, placement: 6}"),
}


@pytest.mark.parametrize("code", sorted(NEAR_MISSES))
def test_load_and_schema_rules_fail_and_pass(code: str) -> None:
    bad, good = NEAR_MISSES[code]
    failing = validate_inventory(inv(gpu(H100, [bad])))
    assert code in {d.code for d in failing.errors}, [str(d) for d in failing.diagnostics]
    passing = validate_inventory(inv(gpu(H100, [good])))
    assert passing.valid and not passing.diagnostics, [str(d) for d in passing.diagnostics]


def test_gb200_plans_validate_in_either_documented_naming_but_not_a_mix_of_unknown_names() -> None:
    """Issue 26 item 5: GB200 names its slices 1g.23gb..7g.186gb (production boards) or 1g.24gb..7g.189gb (early
    boards/drivers); the catalog accepts either, with the same slice counts and limits."""

    def parts(*names: str) -> list[str]:
        return [f"{{profile: {n}}}" for n in names]

    late = validate_inventory(inv(gpu("GB200-186GB", parts("1g.23gb", "1g.23gb", "2g.47gb", "3g.93gb"))))
    early = validate_inventory(inv(gpu("GB200-186GB", parts("1g.24gb", "1g.24gb", "2g.47gb", "3g.95gb"))))
    assert late.valid and not late.errors, [str(d) for d in late.diagnostics]
    assert early.valid and not early.errors, [str(d) for d in early.diagnostics]
    # the early names obey the same limits: 8 x 1g.24gb is one more than the 7 a GB200 holds
    too_many = validate_inventory(inv(gpu("GB200-186GB", parts(*["1g.24gb"] * 8))))
    assert not too_many.valid
    # a name neither naming has is still refused, and B200 does not borrow GB200's other naming
    assert not validate_inventory(inv(gpu("GB200-186GB", parts("1g.25gb")))).valid
    assert not validate_inventory(inv(gpu("B200-180GB", parts("1g.24gb")))).valid
