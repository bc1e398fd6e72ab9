"""What the commands share (reconciler/commands/common.py): one `-o/--output` option and one way of ending on an
error — one line on stderr, exit 2 (never 1, which reads as "invalid" or "drift" to a CI job)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from reconciler.commands.common import fail, failing, output_option
from reconciler.model.errors import MigplanError


@click.command()
@output_option("text", "json", "sarif", help="The format.")
@click.option("--raise", "to_raise", type=click.Choice(["migplan", "other", "none"]), default="none")
def _probe(output: str, to_raise: str) -> None:
    with failing("cannot do it: "):
        if to_raise == "migplan":
            raise MigplanError("the server said no", code="MP550")
        if to_raise == "other":
            raise ValueError("not ours")
    click.echo(f"output={output}")


def test_the_output_option_offers_the_commands_choices_and_its_default() -> None:
    runner = CliRunner()
    assert runner.invoke(_probe, []).output == "output=text\n"
    assert runner.invoke(_probe, ["-o", "sarif"]).output == "output=sarif\n"
    assert runner.invoke(_probe, ["--output", "json"]).output == "output=json\n"
    refused = runner.invoke(_probe, ["-o", "yaml"])
    assert refused.exit_code == 2 and "'yaml' is not one of 'text', 'json', 'sarif'" in refused.output
    assert "[default: text]" in runner.invoke(_probe, ["--help"]).output


def test_a_migplan_error_in_the_block_ends_the_command_with_its_code_and_exit_2() -> None:
    result = CliRunner().invoke(_probe, ["--raise", "migplan"])
    assert result.exit_code == 2
    assert result.stderr == "error MP550: cannot do it: the server said no\n"
    assert result.stdout == ""


def test_an_unforeseen_error_is_not_swallowed() -> None:
    result = CliRunner().invoke(_probe, ["--raise", "other"])
    assert isinstance(result.exception, ValueError)


def test_fail_writes_one_line_with_or_without_a_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        fail("--node is required", code="MP800")
    assert ended.value.code == 2
    assert capsys.readouterr().err == "error MP800: --node is required\n"
    with pytest.raises(SystemExit) as ended:
        fail("migplan plan: no such revision")
    assert ended.value.code == 2
    assert capsys.readouterr().err == "migplan plan: no such revision\n"
