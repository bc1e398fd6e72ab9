"""The generated reference under docs/reference/ is what the code says today: regenerated here, compared byte for
byte (run `python -m reconciler.docsgen --write` after changing a code or a command), and it follows the code by
itself: a code or an option added anywhere appears without touching the generator."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from reconciler import cli, docsgen
from reconciler.docsgen import __main__ as docsgen_main
from reconciler.model import codes

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_reference_is_what_the_generator_writes_today() -> None:
    stale = [rel for rel, generate in docsgen.GENERATED.items() if (ROOT / rel).read_text("utf-8") != generate()]
    assert not stale, f"stale generated reference {stale}: run `python -m reconciler.docsgen --write`"


def test_the_writer_reports_a_stale_file_and_rewrites_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert docsgen_main.main(["--root", str(tmp_path)]) == 1  # missing files are stale
    assert docsgen_main.main(["--root", str(tmp_path), "--write"]) == 0
    assert docsgen_main.main(["--root", str(tmp_path)]) == 0
    codes_md = tmp_path / "docs" / "reference" / "codes.md"
    codes_md.write_text(codes_md.read_text("utf-8").replace("| MP307 |", "| MP397 |"), "utf-8")
    capsys.readouterr()
    assert docsgen_main.main(["--root", str(tmp_path)]) == 1
    assert capsys.readouterr().out.strip() == "stale: docs/reference/codes.md"


def test_a_code_added_to_the_registry_appears_in_its_family_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another engineer's new code needs no edit of the generator: it lands in its family's table, once."""
    new = codes.Code("MP998", codes.Family.OBSERVER, codes.Level.WARNING, "a meaning | with a pipe <b>")
    monkeypatch.setattr(codes, "DECLARED", (*codes.DECLARED, new))
    text = docsgen.codes_reference()
    rows = [line for line in text.splitlines() if line.startswith("| MP998 ")]
    assert rows == ["| MP998 | warning | a meaning \\| with a pipe &lt;b> |  |"]
    observer = text.split("## Node observer", 1)[1].split("\n## ", 1)[0]
    assert rows[0] in observer


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    text = docsgen.cli_reference()
    ctx = click.Context(cli.cli, info_name="migplan")
    names = cli.cli.list_commands(ctx)
    assert {"validate", "plan", "reconcile", "run", "agent", "demo", "twin", "import", "check-workloads"} <= set(names)
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings == ["migplan", *(f"migplan {n}" for n in names)]
    for name in names:
        command = cli.cli.get_command(ctx, name)
        assert command is not None
        section = text.split(f"\n## migplan {name}\n", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option):
                assert all(f"`{o}" in section or f", {o}" in section for o in param.opts), (name, param.opts)
    assert "`-o, --output [text|json|github|codequality|sarif]`" in text


def test_every_setting_has_a_row_and_a_new_one_appears_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from reconciler import settings

    text = docsgen.settings_reference()
    for f in dataclasses.fields(settings.Settings):
        assert f"| `{f.name}` | `MIGPLAN_{f.name.upper()}` |" in text, f.name
    # a default computed at start (the replica's identity) is described, never the machine's own value
    assert "| `identity` | `MIGPLAN_IDENTITY` | POD_NAME, else the host name |" in text
    grown = dataclasses.make_dataclass(
        "Grown", [("queue_depth", int, dataclasses.field(default=7))], bases=(settings.Settings,), frozen=True
    )
    monkeypatch.setattr(settings, "Settings", grown)
    assert "| `queue_depth` | `MIGPLAN_QUEUE_DEPTH` | `7` |  |" in docsgen.settings_reference()
