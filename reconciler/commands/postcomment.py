"""`migplan post-comment --gitlab|--github --body-file FILE`: put the plan on the merge request, once.

    migplan plan --repo . --from "$BASE" --to HEAD > plan.md
    migplan post-comment --gitlab --body-file plan.md      # in a GitLab merge request pipeline
    migplan post-comment --github --body-file plan.md      # in a GitHub pull_request workflow

The first run creates the comment; every later run (each push) updates that same comment, found by
the hidden marker `<!-- migplan:plan KEY -->` (`--key`, default `migplan`; one per cluster or job).
Where it goes comes from the CI's own variables, each overridable by a flag:
- GitLab: CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID; token in MIGPLAN_GITLAB_TOKEN
  (a project access token, role Reporter, scope `api`: GitLab's CI_JOB_TOKEN cannot write notes).
- GitHub: GITHUB_API_URL (default https://api.github.com), GITHUB_REPOSITORY, the pull request number
  from the event file (GITHUB_EVENT_PATH) ; token in GITHUB_TOKEN (the workflow's own, with
  `permissions: pull-requests: write`). MIGPLAN_GITHUB_TOKEN wins when set.
`--token-env NAME` reads the token from another variable. The token is only ever read from the
environment (a flag would show in `ps` and in the job log) and never printed.

Exit codes: 0 posted, 2 anything else (MP740 no token, MP741 token refused, MP742 API unreachable,
MP743 unusable answer, MP744 merge request unknown, MP745 body unreadable), one line on stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import orjson

from reconciler.adapters import mrcomments
from reconciler.adapters.mrcomments import Forge, ForgeClient, ForgeError, Target
from reconciler.commands.common import fail

TOKEN_VARIABLES = {
    Forge.GITLAB: ("MIGPLAN_GITLAB_TOKEN", "GITLAB_TOKEN"),
    Forge.GITHUB: ("MIGPLAN_GITHUB_TOKEN", "GITHUB_TOKEN"),
}
MAX_BODY_BYTES = 8 * 1024 * 1024
NO_TOKEN, CONTEXT, BODY = mrcomments.TOKEN_MISSING, mrcomments.MR_CONTEXT_MISSING, mrcomments.COMMENT_BODY_BAD


def _token(forge: Forge, token_env: str | None) -> str:
    names = (token_env,) if token_env else TOKEN_VARIABLES[forge]
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    raise ForgeError(f"no token: set {' or '.join(names)} (see docs/how-to/ci-merge-requests.md)", code=NO_TOKEN)


def _actions_author(forge: Forge, token_env: str | None) -> str | None:
    """On GitHub Actions with the workflow's own GITHUB_TOKEN (which may not read GET /user), the account its
    comments are written by. Any other token: None (the forge is asked, or --author says)."""
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    own_token = (token_env or "GITHUB_TOKEN") == "GITHUB_TOKEN" and not os.environ.get("MIGPLAN_GITHUB_TOKEN")
    return "github-actions[bot]" if forge is Forge.GITHUB and in_actions and own_token else None


def _number(value: str | int | None, what: str) -> int:
    text = str(value).strip() if value is not None else ""
    if not (text.isascii() and text.isdigit() and len(text) <= 10) or not 0 < int(text) < 2**31:
        raise ForgeError(f"{what} is {'missing' if not text else repr(text[:40])}: not a positive number", code=CONTEXT)
    return int(text)


def _pull_request_from_event() -> str | None:
    """`pull_request.number` (or `number`) of the GitHub event that started the workflow."""
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        with Path(path).open("rb") as f:  # size before read: at most 16 MiB of it
            data = f.read(16 * 1024 * 1024)
        event = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError):
        raise ForgeError(f"GITHUB_EVENT_PATH {path!r} cannot be read as JSON", code=CONTEXT) from None
    if not isinstance(event, dict):
        return None
    pr = event.get("pull_request")
    number = pr.get("number") if isinstance(pr, dict) else event.get("number")
    return str(number) if isinstance(number, int) and not isinstance(number, bool) else None


def target(forge: Forge, api_url: str | None, project: str | None, number: str | None) -> Target:
    """Where to post, from the flags or the CI's variables (see the module docstring)."""
    env = os.environ
    if forge is Forge.GITLAB:
        api = api_url or env.get("CI_API_V4_URL", "")
        proj = project or env.get("CI_PROJECT_ID", "")
        num = number or env.get("CI_MERGE_REQUEST_IID")
        what = "the merge request IID (--merge-request or CI_MERGE_REQUEST_IID)"
        if not proj:
            raise ForgeError("the project is unknown: --project or CI_PROJECT_ID", code=CONTEXT)
    else:
        api = api_url or env.get("GITHUB_API_URL") or "https://api.github.com"
        proj = project or env.get("GITHUB_REPOSITORY", "")
        num = number or _pull_request_from_event()
        what = "the pull request number (--pull-request or the pull_request event)"
        parts = proj.split("/")
        if len(parts) != 2 or not all(parts):
            raise ForgeError(
                f"the repository {proj!r} is not owner/name: --repository or GITHUB_REPOSITORY", code=CONTEXT
            )
    if not api:
        raise ForgeError("the API URL is unknown: --api-url or CI_API_V4_URL", code=CONTEXT)
    return Target(forge, api, proj, _number(num, what))


def _body(path: str) -> str:
    try:
        data = sys.stdin.buffer.read(MAX_BODY_BYTES + 1) if path == "-" else _read(Path(path))
    except OSError as exc:
        raise ForgeError(f"cannot read the comment body {path}: {exc.strerror or exc}", code=BODY) from None
    if len(data) > MAX_BODY_BYTES:
        raise ForgeError(f"the comment body {path} is larger than {MAX_BODY_BYTES} bytes", code=BODY)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ForgeError(f"the comment body {path} is not UTF-8", code=BODY) from None


def _read(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(MAX_BODY_BYTES + 1)


@click.command("post-comment")
@click.option("--gitlab", "forge", flag_value=Forge.GITLAB.value, help="Post a note on a GitLab merge request.")
@click.option("--github", "forge", flag_value=Forge.GITHUB.value, help="Post a comment on a GitHub pull request.")
@click.option("--body-file", required=True, help="The comment (Markdown), e.g. `migplan plan`'s output; - for stdin.")
@click.option("--key", default="migplan", show_default=True, help="Which migplan comment (one per key).")
@click.option("--author", default=None, help="Only update a comment written by this account (username/login).")
@click.option("--api-url", default=None, help="API base (default: CI_API_V4_URL / GITHUB_API_URL).")
@click.option("--project", default=None, help="GitLab project id or path (default: CI_PROJECT_ID).")
@click.option("--merge-request", "merge_request", default=None, help="GitLab MR IID (default: CI_MERGE_REQUEST_IID).")
@click.option("--repository", default=None, help="GitHub owner/name (default: GITHUB_REPOSITORY).")
@click.option("--pull-request", "pull_request", default=None, help="GitHub PR number (default: from the event).")
@click.option("--token-env", default=None, help="Read the token from this environment variable instead.")
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 300),
    default=30.0,
    show_default=True,
    help="Seconds each forge call may take, to the last byte of its answer.",
)
def command(
    forge: str | None,
    body_file: str,
    key: str,
    author: str | None,
    api_url: str | None,
    project: str | None,
    merge_request: str | None,
    repository: str | None,
    pull_request: str | None,
    token_env: str | None,
    timeout: float,
) -> None:
    """Create or update migplan's one comment on the merge request (exit 0), or say why not (exit 2)."""
    if forge is None:
        raise click.UsageError("say where: --gitlab or --github")
    which = Forge(forge)
    client: ForgeClient | None = None
    try:
        mrcomments.marker(key)
        where = target(
            which,
            api_url,
            project if which is Forge.GITLAB else repository,
            merge_request if which is Forge.GITLAB else pull_request,
        )
        body = _body(body_file)
        client = ForgeClient(where, _token(which, token_env), read_timeout=timeout, answer_deadline=timeout)
        posted = mrcomments.post(client, key=key, body=body, author=author or _actions_author(which, token_env))
    except ForgeError as exc:
        fail(f"migplan post-comment: error {exc.code}: {exc.message}")
    finally:
        if client is not None:
            client.close()
    click.echo(f"migplan post-comment: {posted.action} comment {posted.comment_id} on {where.describe()} "
               f"({posted.chars} characters)")  # fmt: skip
