"""The `migplan` command line.

Each subcommand lives in its own module under reconciler/commands/ and is imported only when it is
run, so `migplan validate` in CI does not pay for importing the Kubernetes client.
Exit codes shared by every command: 0 success, 1 the command's negative answer (invalid, drift
found), 2 usage or I/O error; commands document their own on top of these.

No traceback reaches a user: every failure migplan foresees is an error value with a code, and a
last-resort handler (here, around every command and around click itself) turns anything else into
one line `error MP899: internal error: ...` and exit 2 — never 1, which would read as "invalid" or
"drift" to a CI job. `--debug` (or MIGPLAN_DEBUG=1) prints the traceback as well, for a bug report.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import traceback
from typing import Any, NoReturn

import click

from reconciler import __version__

# command name -> module under reconciler.commands exposing `command: click.Command`
COMMANDS: dict[str, str] = {
    "validate": "validate",
    "plan": "plan",
    "post-comment": "postcomment",
    "reconcile": "reconcile",
    "run": "run",
    "agent": "agent",
    "demo": "demo",
    "twin": "twin",
    "check-workloads": "checkworkloads",
    "import": "adopt",
    "init": "init",
    "profiles": "profiles",
}


INTERNAL_ERROR = "MP899"  # an error migplan did not foresee (a bug): one line, exit 2
EXIT_ERROR = 2
# What click raises on purpose (usage errors, --help, sys.exit): click itself handles these.
_CLICK_FLOW = (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit)
_DEBUG = {"on": False}


def _debugging() -> bool:
    return _DEBUG["on"] or os.environ.get("MIGPLAN_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


def _redact(text: str) -> str:
    from reconciler.model.redaction import redact  # pure: importable even when pygit2 is what is broken

    return redact(text)


def internal_error(exc: BaseException) -> NoReturn:
    """The last resort: one line naming the failure (secrets in URLs redacted), exit 2."""
    if _debugging():
        traceback.print_exception(exc, file=sys.stderr)
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    hint = "" if _debugging() else " (run with --debug or MIGPLAN_DEBUG=1 for the traceback)"
    click.echo(f"error {INTERNAL_ERROR}: internal error: {_redact(detail)[:500]}{hint}", err=True)
    sys.exit(EXIT_ERROR)


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

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _CLICK_FLOW:
            raise
        except Exception as exc:  # the last resort (see the module docstring)
            internal_error(exc)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="migplan")
@click.option("--debug", is_flag=True, help="Print the traceback of an internal error (also MIGPLAN_DEBUG=1).")
def cli(debug: bool) -> None:
    """migplan: NVIDIA MIG partitions as code (validate, plan, reconcile, report)."""
    _DEBUG["on"] = debug
    threading.excepthook = _thread_died


def _thread_died(args: threading.ExceptHookArgs) -> None:
    """A helper thread (HTTP server, leader elector) that dies says so in one line, like a command."""
    if args.exc_type is SystemExit or args.exc_value is None:
        return
    if _debugging():
        traceback.print_exception(args.exc_value, file=sys.stderr)
    name = args.thread.name if args.thread is not None else "?"
    first = (str(args.exc_value).strip().splitlines() or [""])[0]
    detail = _redact(f"{args.exc_type.__name__}: {first}")[:500]
    click.echo(f"error {INTERNAL_ERROR}: thread {name} died: {detail}", err=True)


def main(argv: list[str] | None = None) -> Any:
    """The `migplan` program. Called without arguments it is the process's entry point (the console
    script, python -m reconciler): a one-shot command may then end the process without the interpreter's
    teardown (reconciler/commands/quickexit.py). With arguments (tests) it raises SystemExit as click does."""
    # click exits 2 on usage errors, which is our contract for usage/IO errors as well.
    try:
        return cli.main(args=argv, prog_name="migplan")
    except SystemExit as done:
        if argv is None:
            from reconciler.commands import quickexit

            if quickexit.requested():
                quickexit.exit_now(done.code)
        raise
    except Exception as exc:  # outside any command (e.g. listing them for --help): still one line
        internal_error(exc)
