"""parse_strict remembers the texts that parsed (a cycle parses the same ConfigMap up to four times): the same text is
loaded once, each caller gets its own outer mapping, a text that fails raises every time and is never remembered,
and the memo stays bounded."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from reconciler.logic.codecs import migparted

TEXT = """version: v1
mig-configs:
  all-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
  whole:
    - devices: [0, 1]
      mig-enabled: false
"""


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text yaml.load is asked to read (the memo cleared first)."""
    seen: list[str] = []
    real = yaml.load

    def counting(stream: Any, Loader: Any) -> Any:
        seen.append(stream)
        return real(stream, Loader=Loader)

    migparted._PARSED.clear()
    monkeypatch.setattr(yaml, "load", counting)
    return seen


def test_the_same_text_is_loaded_once_and_reads_the_same(loads: list[str]) -> None:
    first = migparted.parse_strict(TEXT)
    again = migparted.parse_strict("".join(TEXT))  # an equal text, not the same object
    assert loads == [TEXT]
    assert first == again
    assert first["all-1g"][0].mig_devices == {"1g.18gb": 7} and first["whole"][0].devices == (0, 1)
    assert first is not again  # each caller its own outer mapping: changing one leaves the next caller's alone
    del first["whole"]  # type: ignore[attr-defined]
    assert set(migparted.parse_strict(TEXT)) == {"all-1g", "whole"}


def test_a_bad_text_raises_every_time_and_is_not_remembered(loads: list[str]) -> None:
    bad = TEXT.replace("version: v1", "version: v2")
    for _ in range(2):
        with pytest.raises(migparted.MigPartedFormatError, match="unknown version"):
            migparted.parse_strict(bad)
    assert loads == [bad, bad]
    assert bad not in migparted._PARSED


def test_the_memo_is_bounded(loads: list[str]) -> None:
    texts = [TEXT.replace("all-1g", f"all-1g-{i}") for i in range(3 * migparted._PARSED_LIMIT)]
    for t in texts:
        assert f"all-1g-{texts.index(t)}" in migparted.parse_strict(t)
    assert len(migparted._PARSED) <= migparted._PARSED_LIMIT
    assert loads == texts


def test_a_caller_cannot_change_what_the_next_caller_reads(loads: list[str]) -> None:
    """The entries are shared between callers of the same text: their profile counts are read-only."""
    first = migparted.parse_strict(TEXT)
    counts = first["all-1g"][0].mig_devices
    with pytest.raises(TypeError):
        counts["1g.18gb"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        del counts["1g.18gb"]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        counts.clear()  # type: ignore[attr-defined]
    again = migparted.parse_strict(TEXT)
    assert loads == [TEXT]  # the remembered entries, not a fresh parse
    assert again["all-1g"][0].mig_devices == {"1g.18gb": 7}
    assert dict(again["all-1g"][0].mig_devices) == {"1g.18gb": 7}
    # Still read as before: equal to a plain mapping and rendered the same.
    assert migparted.layouts_of(again["all-1g"], [0])[0].devices == (("1g.18gb", 7),)  # type: ignore[index]
