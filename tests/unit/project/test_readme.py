"""The README is the front door: at most 12 KB, the sections a newcomer needs, and a Quickstart of exactly two
commands; everything else lives under docs/, whose index lists every page and whose relative links all resolve."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```+|~~~+).*?^\1", flags=re.M | re.S)


def test_the_readme_is_at_most_12_kb_with_the_sections_a_newcomer_needs() -> None:
    assert len(README.encode("utf-8")) <= 12 * 1024
    headings = re.findall(r"^## (.+)$", README, flags=re.M)
    for needed in ("Quickstart", "Try it on your own inventory", "Install in a cluster", "The review workflow"):
        assert needed in headings, needed
    assert "What it does not do" in README
    assert "(docs/README.md)" in README


def test_quickstart_is_two_commands_and_ci_runs_the_second() -> None:
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", quickstart, flags=re.S)
    assert len(blocks) == 2
    assert all(len(b.strip().splitlines()) == 1 for b in blocks)
    assert "migplan demo" in blocks[0]
    assert blocks[1].strip() == "bash .ci/run"


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if p.name != "README.md" or p.parent != DOCS)


def test_the_docs_index_lists_every_page() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = {(DOCS / target).resolve() for target in LINK.findall(index) if not target.startswith(("http", "#"))}
    pages = _pages()
    assert len(pages) >= 20
    missing = [str(p.relative_to(ROOT)) for p in pages if p.resolve() not in listed]
    assert not missing, f"pages missing from docs/README.md: {missing}"
    for folder in ("tutorial", "how-to", "reference", "explanation"):
        assert any(p.parent.name == folder for p in pages), folder


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    for title in re.findall(r"^#{1,6} +(.+?) *$", FENCE.sub("", markdown), flags=re.M):
        kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
        out.add(kept.replace(" ", "-"))
    return out


def broken_links(path: Path) -> list[str]:
    """Relative links of one Markdown file (outside code blocks) whose file, or heading, does not exist."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not dest.exists():
            broken.append(target)
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text(encoding="utf-8")):
            broken.append(target)
    return broken


def test_every_relative_link_of_the_readme_and_the_docs_resolves() -> None:
    files = [ROOT / "README.md", DOCS / "README.md", *_pages()]
    broken = {str(p.relative_to(ROOT)): b for p in files if (b := broken_links(p))}
    assert not broken, broken


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Real heading\n", encoding="utf-8")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md) [ok](b.md#real-heading) [gone](c.md) [bad](b.md#nowhere) [gone](d.md#x) [web](https://x.invalid/y)\n"
        "```\n[in code](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["c.md", "b.md#nowhere", "d.md#x"]
