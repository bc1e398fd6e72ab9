"""What every command shares: its `-o/--output` option and its way of ending on an error.

A command that cannot go on (usage, I/O, cluster or configuration error) says so in one line on stderr and exits 2
(the CLI contract: 1 is kept for the command's negative answer, invalid or drift). Each command keeps its own words
(`migplan plan: ...`, `error MP800: ...`); only the ending is shared.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import click

from reconciler.model.errors import MigplanError

EXIT_ERROR = 2  # usage, I/O, cluster or configuration error (reconciler.cli)

F = TypeVar("F", bound=Callable[..., Any])


def output_option(
    *choices: str, default: str = "text", show_default: bool = True, help: str | None = None
) -> Callable[[F], F]:
    """The `-o/--output` option, with the formats one command offers."""
    return click.option(
        "-o", "--output", type=click.Choice(list(choices)), default=default, show_default=show_default, help=help
    )


def fail(message: str, *, code: str | None = None) -> NoReturn:
    """End the command: `error CODE: message` (or `message` as it is, without a code) on stderr, exit 2."""
    click.echo(f"error {code}: {message}" if code is not None else message, err=True)
    sys.exit(EXIT_ERROR)


@contextlib.contextmanager
def failing(prefix: str = "") -> Iterator[None]:
    """A MigplanError raised in the block ends the command: `error CODE: <prefix><message>`, exit 2."""
    try:
        yield
    except MigplanError as exc:
        fail(f"{prefix}{exc.message}", code=exc.code)
