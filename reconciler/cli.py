"""The `migplan` command line.

Each subcommand lives in its own module under reconciler/commands/ and is imported only when it is
run, so `migplan validate` in CI does not pay for importing the Kubernetes client.
Exit codes shared by every command: 0 success, 1 the command's negative answer (invalid, drift
found), 2 usage or I/O error; commands document their own on top of these.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import click

from reconciler import __version__

# command name -> module under reconciler.commands exposing `command: click.Command`
COMMANDS: dict[str, str] = {
    "validate": "validate",
    "plan": "plan",
    "reconcile": "reconcile",
    "run": "run",
    "agent": "agent",
    "demo": "demo",
    "twin": "twin",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._available(name))

    @staticmethod
    def _available(name: str) -> bool:
        return importlib.util.find_spec(f"reconciler.commands.{COMMANDS[name]}") is not None

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS or not self._available(cmd_name):
            return None
        module = importlib.import_module(f"reconciler.commands.{COMMANDS[cmd_name]}")
        command: click.Command = module.command
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="migplan")
def cli() -> None:
    """migplan: NVIDIA MIG partitions as code (validate, plan, reconcile, report)."""


def main(argv: list[str] | None = None) -> Any:
    # click exits 2 on usage errors, which is our contract for usage/IO errors as well.
    return cli.main(args=argv, prog_name="migplan")
