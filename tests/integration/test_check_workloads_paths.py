"""`migplan check-workloads` on trees nobody should have to trust: links that lead nowhere or in a loop,
file names that are not UTF-8 or hold a newline, a FIFO, thousands of nested directories. Each is a
diagnostic or an MP620 error naming the path — never an internal error (MP899), never a broken line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.commands.checkworkloads import MAX_DIR_DEPTH, shown_path

CORPUS = Path(__file__).resolve().parents[1] / "corpus-workloads"
BAD = (CORPUS / "mp606-profile-not-offered.yaml").read_bytes()


def _run(*args: str) -> tuple[int, str, str]:
    p = subprocess.run(
        [sys.executable, "-m", "reconciler", "check-workloads", "--example", *args],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def test_dangling_links_and_link_loops_are_unreadable_files_not_internal_errors(tmp_path: Path) -> None:
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop1.yaml").symlink_to("loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to("loop1.yaml")
    (tmp_path / "up").symlink_to("..")  # a link to a directory: not followed
    for args in ([str(tmp_path)], [str(tmp_path / "dangling.yaml")], [str(tmp_path / "loop1.yaml")]):
        code, out, err = _run("-o", "json", *args)
        assert code == 1, (args, out, err)
        assert "MP899" not in err and "Traceback" not in err
        doc = json.loads(out)
        assert {e["code"] for e in doc["errors"]} == {"MP600"}, doc
    code, out, _ = _run("-o", "json", str(tmp_path))
    assert sorted(Path(e["file"]).name for e in json.loads(out)["errors"]) == [
        "dangling.yaml",
        "loop1.yaml",
        "loop2.yaml",
    ]


def test_file_names_that_are_not_utf8_or_hold_a_newline_are_shown_escaped(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/\xff\xfe-bad.yaml"
    with open(raw, "wb") as f:
        f.write(BAD)
    (tmp_path / "a\nb::error file=x::.yaml").write_bytes(BAD)
    code, out, err = _run("-o", "json", str(tmp_path))
    assert code == 1 and "MP899" not in err, err
    files = sorted(Path(e["file"]).name for e in json.loads(out)["errors"])
    assert files == ["\\xff\\xfe-bad.yaml", "a\\nb::error file=x::.yaml"], files
    # One line per finding in text, and a GitHub annotation cannot be forged by a file name.
    code, out, _ = _run(str(tmp_path))
    assert code == 1
    assert sum(1 for line in out.splitlines() if "MP606" in line) == 2, out
    code, out, _ = _run("-o", "github", str(tmp_path))
    assert all(line.startswith("::error file=") for line in out.splitlines()), out
    assert shown_path(Path("a\u202eb")) == "a\\u202eb"


def test_a_fifo_named_or_found_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.yaml")
    for target in (tmp_path, tmp_path / "fifo.yaml"):
        code, out, err = _run("-o", "json", str(target))
        assert code == 1, err
        assert [e["code"] for e in json.loads(out)["errors"]] == ["MP600"]


def _remove_deep(root: Path, depth: int) -> None:
    os.chdir(root)
    for _ in range(depth):
        os.chdir("d")
    os.unlink("p.yaml")
    for _ in range(depth):
        os.chdir("..")
        os.rmdir("d")


def test_a_tree_thousands_of_directories_deep_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for _ in range(2000):  # relative steps: an absolute path this deep is longer than PATH_MAX
        os.mkdir("d")
        os.chdir("d")
    Path("p.yaml").write_bytes(BAD)
    monkeypatch.chdir(tmp_path)
    try:
        code, out, err = _run(str(tmp_path))
    finally:
        _remove_deep(tmp_path, 2000)  # shutil.rmtree (pytest's cleanup) recurses and fails this deep
    assert code == 2, (out, err)
    assert "MP620" in err and f"more than {MAX_DIR_DEPTH} nested directories" in err and "MP899" not in err
    # Within the limit the manifest is found.
    shallow = tmp_path / "shallow"
    deep = shallow.joinpath(*["d"] * (MAX_DIR_DEPTH - 1))
    deep.mkdir(parents=True)
    (deep / "p.yaml").write_bytes(BAD)
    code, out, err = _run(str(shallow))
    assert code == 1 and "MP606" in out, (out, err)
