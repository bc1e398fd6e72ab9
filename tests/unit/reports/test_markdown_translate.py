"""markdown.text() escapes through one str.translate table (issue 29, fleet-wide report): every output must equal
what the per-character escape it replaced wrote, byte for byte, for any string (the report pages must not change).

`_per_character` below is that earlier escape, kept here as the reference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.logic.reports import markdown

_SPECIAL = "\\`*_[]|~$<>&@#-.:/w \r\n\v\f\x85\u2028\u2029\u200b"


def _per_character(value: object) -> str:
    s = markdown._LINE_BREAKS.sub(" ", str(value))
    s = s.replace("://", f":{markdown.ZWSP}//").replace("www.", f"www{markdown.ZWSP}.")
    out: list[str] = []
    for i, ch in enumerate(s):
        if ch in {"<": 1, ">": 1, "&": 1}:
            out.append({"<": "&lt;", ">": "&gt;", "&": "&amp;"}[ch])
        elif ch in "\\`*_[]|~$" or (i == 0 and ch in "-.>"):
            out.append("\\" + ch)
        elif ch in ("@", "#"):
            out.append(ch + markdown.ZWSP)
        else:
            out.append(ch)
    return "".join(out)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(_SPECIAL + "ab9é"), max_size=40) | st.text(max_size=40))
def test_text_equals_the_per_character_escape(value: str) -> None:
    assert markdown.text(value) == _per_character(value)


def test_each_rule_on_hand_picked_values() -> None:
    cases = {
        "": "",
        "-x": "\\-x",
        ".x": "\\.x",
        ">x": "&gt;x",
        "a-b.c>d": "a-b.c&gt;d",
        "-": "\\-",
        "--": "\\--",
        "a|b\nc": "a\\|b c",
        "@team #12": f"@{markdown.ZWSP}team #{markdown.ZWSP}12",
        "https://x www.y": f"https:{markdown.ZWSP}//x www{markdown.ZWSP}.y",
        "\\`*_[]|~$": "\\\\\\`\\*\\_\\[\\]\\|\\~\\$",
        "gpu-h200-01": "gpu-h200-01",
    }
    for value, expected in cases.items():
        assert markdown.text(value) == expected == _per_character(value), value
    assert markdown.text(12) == "12"  # not a string: str() first, as before
