"""`migplan post-comment`: one comment per merge request, created once and updated on every push,
against fake GitLab and GitHub APIs on loopback that answer as the real ones do (tests/integration/forgeapis.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from forgeapis import FakeForge, serve

from reconciler.adapters import mrcomments
from reconciler.adapters.mrcomments import Forge, ForgeClient, ForgeError, Target
from reconciler.cli import cli

TOKEN = "glpat-SECRET-abc123"
GH_TOKEN = "ghs_SECRETxyz789"
MARK = "<!-- migplan:plan migplan -->"


def _run(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    base = {k: "" for k in ("MIGPLAN_GITLAB_TOKEN", "GITLAB_TOKEN", "MIGPLAN_GITHUB_TOKEN", "GITHUB_TOKEN",
                            "CI_API_V4_URL", "CI_PROJECT_ID", "CI_MERGE_REQUEST_IID", "GITHUB_API_URL",
                            "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH", "GITHUB_ACTIONS")}  # fmt: skip
    result = CliRunner().invoke(cli, ["post-comment", *args], env=base | env)
    return result.exit_code, result.stdout, result.stderr


def _gitlab_env(forge: FakeForge, token: str = TOKEN) -> dict[str, str]:
    return {"CI_API_V4_URL": forge.api_url, "CI_PROJECT_ID": "grp/gpu-inventory", "CI_MERGE_REQUEST_IID": "7",
            "MIGPLAN_GITLAB_TOKEN": token}  # fmt: skip


def _github_env(forge: FakeForge, tmp_path: Path, token: str = GH_TOKEN) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "number": 12, "pull_request": {"number": 12}}))
    return {"GITHUB_API_URL": forge.api_url, "GITHUB_REPOSITORY": "acme/gpu-inventory",
            "GITHUB_EVENT_PATH": str(event), "GITHUB_TOKEN": token, "GITHUB_ACTIONS": "true"}  # fmt: skip


def _body(tmp_path: Path, text: str) -> str:
    path = tmp_path / "plan.md"
    path.write_text(text)
    return str(path)


def _gitlab() -> FakeForge:
    forge = FakeForge("gitlab", tokens={TOKEN: "migplan-bot"}, projects={"grp/gpu-inventory": 7})
    # 230 notes before ours: the plan comment is found on page 3 (100 per page)
    for i in range(230):
        forge.add(f"review note {i}", "alice", system=i % 3 == 0)
    forge.add(f"quoting it: {MARK} is not ours", "alice")  # the marker not at the start: never touched
    return forge


def test_gitlab_creates_then_updates_the_same_note(tmp_path: Path) -> None:
    with serve(_gitlab()) as forge:
        code, out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "plan v1\n")], _gitlab_env(forge))
        assert code == 0, err
        assert "created comment" in out and "merge request !7" in out
        ours = [c for c in forge.comments.values() if c["body"].startswith(MARK)]
        assert len(ours) == 1 and ours[0]["body"] == f"{MARK}\nplan v1\n" and ours[0]["author"] == "migplan-bot"
        first_id = ours[0]["id"]
        before = len(forge.comments)
        forge.requests.clear()
        code, out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "plan v2\n")], _gitlab_env(forge))
        assert code == 0, err
        assert f"updated comment {first_id}" in out
        assert len(forge.comments) == before and forge.comments[first_id]["body"] == f"{MARK}\nplan v2\n"
        gets = [r.path for r in forge.requests if r.method == "GET"]
        puts = [r for r in forge.requests if r.method == "PUT"]
        # who the token is, then 232 notes at 100 per page: every page read, by the Link header
        assert gets == ["/api/v4/user"] + ["/api/v4/projects/grp%2Fgpu-inventory/merge_requests/7/notes"] * 3
        assert [r.path for r in puts] == [f"/api/v4/projects/grp%2Fgpu-inventory/merge_requests/7/notes/{first_id}"]
        assert all("PRIVATE-TOKEN" in r.header_names for r in forge.requests)
        assert "quoting it" in forge.comments[first_id - 1]["body"]
    assert TOKEN not in out + err


def test_github_creates_then_updates_the_same_comment_across_pages(tmp_path: Path) -> None:
    forge = FakeForge("github", tokens={GH_TOKEN: "github-actions[bot]"}, projects={"acme/gpu-inventory": 12})
    for i in range(150):
        forge.add(f"LGTM {i}", "bob")
    with serve(forge):
        env = _github_env(forge, tmp_path)
        code, out, err = _run(["--github", "--body-file", _body(tmp_path, "| a |\n")], env)
        assert code == 0, err
        assert "pull request #12 of acme/gpu-inventory" in out
        (cid,) = [c["id"] for c in forge.comments.values() if c["body"].startswith(MARK)]
        forge.requests.clear()
        code, out, err = _run(["--github", "--body-file", _body(tmp_path, "| b |\n")], env)
        assert code == 0, err
        assert f"updated comment {cid}" in out and forge.comments[cid]["body"] == f"{MARK}\n| b |\n"
        assert sum(1 for c in forge.comments.values() if c["body"].startswith(MARK)) == 1
        # GET /user is refused to an Actions token (403): on Actions its comments are github-actions[bot]'s, so
        # it is not even asked
        assert [(r.method, r.path.rsplit("/", 1)[-1]) for r in forge.requests] == [
            ("GET", "comments"), ("GET", "comments"), ("PATCH", str(cid))
        ]  # fmt: skip
        assert forge.requests[-1].path == f"/repos/acme/gpu-inventory/issues/comments/{cid}"
        assert all(f"Bearer {GH_TOKEN}" in r.raw_headers for r in forge.requests)
    assert GH_TOKEN not in out + err


def test_one_comment_per_key(tmp_path: Path) -> None:
    with serve(_gitlab()) as forge:
        for key in ("cluster-a", "cluster-b", "cluster-a"):
            code, _out, err = _run(["--gitlab", "--key", key, "--body-file", _body(tmp_path, key)], _gitlab_env(forge))
            assert code == 0, err
        marked = sorted(c["body"].split("\n")[0] for c in forge.comments.values() if c["body"].startswith("<!-- mig"))
        assert marked == ["<!-- migplan:plan cluster-a -->", "<!-- migplan:plan cluster-b -->"]


def test_missing_token_is_mp740_exit_2(tmp_path: Path) -> None:
    with serve(_gitlab()) as forge:
        code, out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "x")], _gitlab_env(forge, token=""))
        assert code == 2 and "MP740" in err and "MIGPLAN_GITLAB_TOKEN" in err and not out
        assert forge.requests == []  # nothing sent without a token


@pytest.mark.parametrize("forge_kind", ["gitlab", "github"])
def test_refused_token_is_mp741_exit_2_without_the_token(forge_kind: str, tmp_path: Path) -> None:
    wrong = "glpat-WRONG-000" if forge_kind == "gitlab" else "ghp_WRONG000"
    forge = _gitlab() if forge_kind == "gitlab" else FakeForge("github", projects={"acme/gpu-inventory": 12})
    with serve(forge):
        env = _gitlab_env(forge, token=wrong) if forge_kind == "gitlab" else _github_env(forge, tmp_path, wrong)
        code, out, err = _run([f"--{forge_kind}", "--body-file", _body(tmp_path, "x")], env)
        assert code == 2 and "MP741" in err and "HTTP 401" in err, err
        assert wrong not in out + err and "Traceback" not in out + err
        assert len(forge.requests) == 1  # a refused token is not retried


def test_token_that_may_read_but_not_write_is_mp741(tmp_path: Path) -> None:
    forge = FakeForge("github", readonly_tokens={GH_TOKEN}, projects={"acme/gpu-inventory": 12})
    with serve(forge):
        code, _out, err = _run(["--github", "--body-file", _body(tmp_path, "x")], _github_env(forge, tmp_path))
    assert code == 2 and "MP741" in err and "HTTP 403" in err and "pull-requests: write" in err
    assert GH_TOKEN not in err


def test_unknown_merge_request_is_mp743(tmp_path: Path) -> None:
    with serve(_gitlab()) as forge:
        env = _gitlab_env(forge) | {"CI_MERGE_REQUEST_IID": "99"}
        code, _out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "x")], env)
    assert code == 2 and "MP743" in err and "HTTP 404" in err


def test_no_merge_request_context_is_mp744(tmp_path: Path) -> None:
    code, _out, err = _run(["--github", "--body-file", _body(tmp_path, "x")], {"GITHUB_TOKEN": GH_TOKEN,
                           "GITHUB_REPOSITORY": "acme/inv"})  # fmt: skip
    assert code == 2 and "MP744" in err and "pull request number" in err
    gitlab = {"MIGPLAN_GITLAB_TOKEN": TOKEN, "CI_PROJECT_ID": "1", "CI_API_V4_URL": "http://x"}
    code, _out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "x"), "--merge-request", "-3"], gitlab)
    assert code == 2 and "MP744" in err
    code, _out, err = _run(["--gitlab", "--body-file", str(tmp_path / "none.md")], {"MIGPLAN_GITLAB_TOKEN": TOKEN,
                           "CI_PROJECT_ID": "1", "CI_API_V4_URL": "http://x", "CI_MERGE_REQUEST_IID": "1"})  # fmt: skip
    assert code == 2 and "MP745" in err


def test_transient_failures_are_retried_then_reported(tmp_path: Path) -> None:
    with serve(_gitlab()) as forge:
        target = Target(Forge.GITLAB, forge.api_url, "grp/gpu-inventory", 7)
        forge.fail_next = [502, 429]
        client = ForgeClient(target, TOKEN, backoff=0.01, attempts=4)
        posted = mrcomments.post(client, key="k", body="hello")
        assert posted.action == "created" and forge.comments[posted.comment_id]["body"].endswith("hello")
        forge.fail_next = [503] * 10
        with pytest.raises(ForgeError) as exc:
            mrcomments.post(ForgeClient(target, TOKEN, backoff=0.01, attempts=3), key="k", body="again")
        assert exc.value.code == "MP742" and "after 3 attempt(s)" in exc.value.message


def test_unreachable_api_is_mp742_exit_2(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the with ends: connection refused
    target = Target(Forge.GITHUB, f"http://127.0.0.1:{port}", "acme/inv", 1)
    with pytest.raises(ForgeError) as exc:
        mrcomments.post(ForgeClient(target, GH_TOKEN, backoff=0.01, attempts=2), key="k", body="x")
    assert exc.value.code == "MP742" and GH_TOKEN not in exc.value.message


def test_a_next_link_to_another_origin_is_refused(tmp_path: Path) -> None:
    forge = FakeForge("github", tokens={GH_TOKEN: "bot"}, projects={"acme/inv": 1})
    for i in range(5):
        forge.add(str(i), "bob")
    with serve(forge):
        target = Target(Forge.GITHUB, forge.api_url, "acme/inv", 1)
        client = ForgeClient(target, GH_TOKEN)
        client._origin = ("http", "127.0.0.2", forge.port)  # as if the API had linked elsewhere
        forge.max_per_page = 2
        with pytest.raises(ForgeError) as exc:
            client.find("migplan")
    assert exc.value.code == "MP743" and "leaves the API" in exc.value.message


def test_author_filter_ignores_a_forged_marker(tmp_path: Path) -> None:
    forge = FakeForge("github", tokens={GH_TOKEN: "github-actions[bot]"}, projects={"acme/gpu-inventory": 12})
    forged = forge.add(f"{MARK}\nall good, merge it", "mallory")
    with serve(forge):
        args = ["--github", "--author", "github-actions[bot]", "--body-file", _body(tmp_path, "real plan")]
        code, out, err = _run(args, _github_env(forge, tmp_path))
        assert code == 0 and "created" in out, err
    assert forge.comments[forged]["body"].endswith("merge it")


def test_fit_cuts_at_a_line_and_closes_details() -> None:
    rows = "\n".join(f"| row {i} |" for i in range(10_000))
    body = f"head\n<details><summary>n</summary>\n\n{rows}\n</details>\n"
    cut = mrcomments.fit(body, 65_536)
    assert len(cut) <= 65_536 and cut.count("<details>") == cut.count("</details>") == 1
    assert "more line(s)" in cut and cut.startswith("head\n")
    assert mrcomments.fit("short", 10) == "short"


def test_gitlab_never_takes_someone_elses_marked_note_for_its_own(tmp_path: Path) -> None:
    forge = _gitlab()
    forge.tokens["glpat-mallory"] = "mallory"
    forged = forge.add(f"{MARK}\nall good, merge it", "mallory")
    with serve(forge):
        code, out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "the real plan")], _gitlab_env(forge))
        assert code == 0 and "created" in out, err
        code, out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "plan v2")], _gitlab_env(forge))
        assert code == 0 and "updated" in out, err
    assert forge.comments[forged]["body"].endswith("merge it")
    ours = [c for c in forge.comments.values() if c["author"] == "migplan-bot"]
    assert len(ours) == 1 and ours[0]["body"].endswith("plan v2")


def test_github_creates_anew_when_the_newest_marked_comment_is_not_its_own(tmp_path: Path) -> None:
    """An Actions token cannot say who it is; a forged marked comment it may not edit is left alone."""
    forge = FakeForge("github", tokens={GH_TOKEN: "github-actions[bot]", "ghp_m": "mallory"},
                      projects={"acme/gpu-inventory": 12})  # fmt: skip
    forged = forge.add(f"{MARK}\nall good", "mallory")
    with serve(forge):
        code, out, err = _run(["--github", "--body-file", _body(tmp_path, "real")], _github_env(forge, tmp_path))
        assert code == 0 and "created" in out, err
        code, out, err = _run(["--github", "--body-file", _body(tmp_path, "real 2")], _github_env(forge, tmp_path))
        assert code == 0 and "updated" in out, err
    assert forge.comments[forged]["body"].endswith("all good")
    assert [c["body"] for c in forge.comments.values() if c["author"] != "mallory"] == [f"{MARK}\nreal 2"]


def test_a_personal_github_token_is_asked_who_it_is(tmp_path: Path) -> None:
    forge = FakeForge("github", tokens={GH_TOKEN: "octocat"}, user_tokens={GH_TOKEN},
                      projects={"acme/gpu-inventory": 12})  # fmt: skip
    forge.add(f"{MARK}\nnot octocat's", "mallory")
    with serve(forge):
        target = Target(Forge.GITHUB, forge.api_url, "acme/gpu-inventory", 12)
        client = ForgeClient(target, GH_TOKEN)
        assert client.whoami() == "octocat"
        assert mrcomments.post(client, key="migplan", body="x").action == "created"


def test_fit_counts_utf8_bytes_for_gitlab() -> None:
    body = "\n".join("| → row —… |" for _ in range(100_000))
    cut = mrcomments.fit(body, 1_000_000, mrcomments.MEASURE[Forge.GITLAB])
    assert len(cut.encode("utf-8")) <= 1_000_000 < len(body.encode("utf-8"))
    assert len(mrcomments.fit(body, 65_536, mrcomments.MEASURE[Forge.GITHUB])) <= 65_536


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        ([(200, {}, b"<html>not json</html>")], "not JSON"),
        ([(200, {}, b'{"id": 1}')], "expected a JSON list"),
        ([(200, {}, b"[" * 5000 + b"]" * 5000)], "not JSON"),
        ([(200, {}, b"[]"), (201, {}, b'{"id": true}')], "no comment id"),
        ([(200, {}, b"[]"), (201, {}, b"[]")], "no comment id"),
        ([(302, {"Location": "http://127.0.0.1:9/steal"}, b"")], "HTTP 302"),
    ],
)
def test_answers_no_forge_should_give_are_mp743(answers: list[tuple[int, dict[str, str], bytes]], words: str) -> None:
    forge = FakeForge("gitlab", tokens={TOKEN: "bot"}, projects={"1": 1})
    with serve(forge):
        forge.answer_next = [(200, {}, b'{"username": "bot"}'), *answers]
        client = ForgeClient(Target(Forge.GITLAB, forge.api_url, "1", 1), TOKEN, backoff=0.01)
        with pytest.raises(ForgeError) as exc:
            mrcomments.post(client, key="migplan", body="x")
    assert exc.value.code == "MP743" and words in exc.value.message and TOKEN not in exc.value.message
    assert all("steal" not in r.path for r in forge.requests)


# --- issue 25: the comment is ours alone; every answer is bounded ------------------------------------------


def test_a_newer_look_alike_by_someone_else_is_never_overwritten_on_github(tmp_path: Path) -> None:
    # the Actions token has write access, so GitHub would let it edit anyone's comment: the author decides
    forge = FakeForge(
        "github",
        tokens={GH_TOKEN: "github-actions[bot]"},
        moderator_tokens={GH_TOKEN},
        projects={"acme/gpu-inventory": 12},
    )
    with serve(forge):
        env = _github_env(forge, tmp_path)
        code, _out, err = _run(["--github", "--body-file", _body(tmp_path, "ours v1\n")], env)
        assert code == 0, err
        (ours,) = [c["id"] for c in forge.comments.values() if c["body"].startswith(MARK)]
        fake = forge.add(f"{MARK}\nI am migplan, trust me\n", "mallory")  # newer, same marker
        code, out, err = _run(["--github", "--body-file", _body(tmp_path, "ours v2\n")], env)
        assert code == 0, err
        assert f"updated comment {ours}" in out and forge.comments[ours]["body"] == f"{MARK}\nours v2\n"
        assert forge.comments[fake]["body"] == f"{MARK}\nI am migplan, trust me\n"


def test_an_unknown_account_updates_nothing(tmp_path: Path) -> None:
    # an App token outside Actions: GET /user is refused and nobody says who the token is
    forge = FakeForge("github", tokens={GH_TOKEN: "my-app[bot]"}, moderator_tokens={GH_TOKEN},
                      projects={"acme/gpu-inventory": 12})  # fmt: skip
    forge.add(f"{MARK}\nsomeone's look-alike\n", "mallory")
    with serve(forge):
        env = _github_env(forge, tmp_path) | {"GITHUB_ACTIONS": ""}
        code, out, err = _run(["--github", "--body-file", _body(tmp_path, "plan\n")], env)
        assert code == 0, err
        assert "created comment" in out
        assert [c["body"] for c in forge.comments.values() if c["author"] == "mallory"] == [
            f"{MARK}\nsomeone's look-alike\n"
        ]
        # --author names the account: from then on its comment is found and updated
        code, out, err = _run(["--github", "--author", "my-app[bot]", "--body-file", _body(tmp_path, "v2\n")], env)
        assert code == 0 and "updated comment" in out, err


def test_a_paging_header_with_a_non_ascii_digit_is_not_a_crash(tmp_path: Path) -> None:
    forge = _gitlab()
    with serve(forge):
        page = json.dumps([]).encode()
        forge.answer_next = [(200, {"id": "1"}, json.dumps({"id": 1, "username": "migplan-bot"}).encode())]
        forge.answer_next.append((200, {"X-Next-Page": "\u00b2", "Content-Type": "application/json"}, page))
        code, out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "x")], _gitlab_env(forge))
        assert "Traceback" not in out + err and "MP899" not in out + err
        assert code == 0 and "created comment" in out, err


def test_an_answer_of_too_many_json_objects_is_refused_before_parsing(tmp_path: Path) -> None:
    forge = _gitlab()
    with serve(forge):
        flood = b"[" + b",".join([b"{}"] * 300_000) + b"]"  # 900 KB, far under the size cap
        forge.answer_next = [(200, {}, json.dumps({"id": 1, "username": "migplan-bot"}).encode()), (200, {}, flood)]
        code, _out, err = _run(["--gitlab", "--body-file", _body(tmp_path, "x")], _gitlab_env(forge))
        assert code == 2 and "MP743" in err and "JSON objects or arrays" in err


def test_a_trickling_forge_is_bounded_by_timeout(tmp_path: Path) -> None:
    # An answer sent a byte at a time: each byte resets a socket read timeout, so only a whole-answer deadline
    # ends it. The server would need 300 s to finish; migplan must give up long before, with MP742.
    import http.server
    import threading
    import time

    finished = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "1500")
            self.end_headers()
            try:
                for _ in range(1500):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
                finished.set()
            except OSError:
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = ForgeClient(
            Target(Forge.GITLAB, f"http://127.0.0.1:{server.server_address[1]}/api/v4", "grp/p", 7),
            TOKEN,
            read_timeout=1.0,
            answer_deadline=1.0,
            attempts=2,
            backoff=0.01,
        )
        with pytest.raises(ForgeError) as err:
            client.whoami()
        assert err.value.code == "MP742" and "no whole answer within 1 s" in err.value.message
        assert not finished.is_set()  # given up while the server was still trickling
    finally:
        server.shutdown()
        server.server_close()
