"""docs/reference/cli.md from the `migplan` click group: every command, its usage, help and options.

Pure: reads the click objects (importing each command's module, as `migplan COMMAND --help` does) and returns
Markdown. Nothing depends on the terminal (click's own help wraps to its width) or on the environment: usage and
option lines are click's own help records, joined here without wrapping, so the file is the same on every machine.
"""

from __future__ import annotations

import inspect

import click

from reconciler import cli

PROLOGUE = """\
# Command-line reference

Generated from the `migplan` command itself (`reconciler/docsgen/clidoc.py`): do not edit by hand; after changing a
command run `python -m reconciler.docsgen --write` (a test fails while this file is stale). Every command also
answers `-h` / `--help`.

Exit codes shared by every command: **0** success, **1** the command's negative answer (invalid, drift, findings),
**2** usage, I/O or cluster error — never a traceback (an error migplan did not foresee is one line `error MP899:
internal error: ...`; `migplan --debug` or `MIGPLAN_DEBUG=1` prints the traceback too). The codes are listed in
[codes.md](codes.md); settings read from the environment and files in [settings.md](settings.md).
"""


def _text(value: str) -> str:
    """Help text as Markdown prose: no raw HTML (an option's `<NAME>` would vanish in a renderer)."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _paragraphs(help_text: str | None) -> list[str]:
    """click's help text as paragraphs: lines of a paragraph joined, `\\b` (keep as is) paragraphs verbatim."""
    out = []
    for block in inspect.cleandoc(help_text or "").split("\n\n"):
        if not block.strip():
            continue
        if block.startswith("\b"):
            out.append("```\n" + block.lstrip("\b").strip("\n") + "\n```")
        else:
            out.append(_text(" ".join(line.strip() for line in block.splitlines())))
    return out


def _anchor(path: str) -> str:
    """GitHub's heading anchor for `## migplan check-workloads`: lower case, spaces to dashes."""
    return path.lower().replace(" ", "-")


def _command(ctx: click.Context, path: str, command: click.Command) -> list[str]:
    pieces = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"## {path}", "", f"`{path} {pieces}`", ""]
    for paragraph in _paragraphs(command.help):
        lines += [paragraph, ""]
    # Arguments are named on their own line; options (the help option included) each get theirs.
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    options = [p for p in command.params if not isinstance(p, click.Argument)]
    records = [r for p in options if (r := p.get_help_record(ctx)) is not None]
    # The help option from the context's names, not click's per-command cache: a command invoked once on its own
    # (a test runner, say) caches `--help` alone, which would make this page depend on what ran before.
    if command.add_help_option and (names := command.get_help_option_names(ctx)):
        records.append((", ".join(sorted(names, key=len)), "Show this message and exit."))
    if arguments:
        lines += ["Arguments: " + ", ".join(f"`{a.make_metavar(ctx)}`" for a in arguments), ""]
    if records:
        lines.append("Options:")
        lines.append("")
        for opts, help_text in records:
            detail = _text(" ".join(help_text.split()))
            lines.append(f"- `{opts}`" + (f" — {detail}" if detail else ""))
        lines.append("")
    if isinstance(command, click.Group):
        names = command.list_commands(ctx)
        lines += ["Commands: " + ", ".join(f"[`{n}`](#{_anchor(f'{path} {n}')})" for n in names), ""]
        for name in names:
            sub = command.get_command(ctx, name)
            if sub is not None:
                lines += _command(click.Context(sub, info_name=name, parent=ctx), f"{path} {name}", sub)
    return lines


def cli_reference() -> str:
    """The whole reference: the group, then each command in the order `migplan --help` lists them."""
    root = cli.cli
    ctx = click.Context(root, info_name="migplan", **root.context_settings)
    return PROLOGUE + "\n" + "\n".join(_command(ctx, "migplan", root)).rstrip("\n") + "\n"
