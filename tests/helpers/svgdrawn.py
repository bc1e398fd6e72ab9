"""What an SVG map draws, whatever carries its attributes: the element tree with each element's effective presentation.

Issue 29 (`first5k`) moved the attributes many <text> share (font-family, sizes, anchors, inks) from every <text>
onto the <svg> element or a <g> around them. They are inherited properties in SVG 1.1 and SVG 2 (font-family,
font-size, font-weight, text-anchor, fill, stroke, stroke-width, stroke-dasharray), so what is drawn is unchanged when,
for every element, the value each property takes after inheritance is unchanged. `drawn(svg)` resolves that:

- a <g> without a <title> child that carries presentation attributes only is a *style group*: it draws nothing
  and gives nothing a tooltip, so its children take its place in its parent, with its attributes inherited;
- every other element is kept, with its own non-presentation attributes (geometry, ids, roles), its text (for
  <text>, <title>, <desc>), its children, and, for what paints (<text>, <rect>), the effective value of each
  property that applies to it: for a <rect>, fill and stroke (font and anchor properties have no effect on a
  shape); for a <text>, all of them. Unset properties take their CSS initial value, so font-weight="normal" said
  and font-weight left to its initial value are the same drawing.

Two maps with equal `drawn(...)` paint the same elements, in the same order, with the same text and the same
computed style, and give the same tooltips. A <g> carrying a property that is not inherited (geometry, rx, an id)
is not a style group: it stays in the tree and the comparison fails, as it should.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

SVG = "{http://www.w3.org/2000/svg}"
INHERITED = (
    "font-family",
    "font-size",
    "font-weight",
    "text-anchor",
    "fill",
    "stroke",
    "stroke-width",
    "stroke-dasharray",
)
INITIAL = {
    "font-family": "",  # the viewer's default font
    "font-size": "medium",
    "font-weight": "normal",
    "text-anchor": "start",
    "fill": "black",
    "stroke": "none",
    "stroke-width": "1",
    "stroke-dasharray": "none",
}
APPLIES = {"text": INHERITED, "rect": ("fill", "stroke", "stroke-width", "stroke-dasharray")}
TEXT_OF = ("text", "title", "desc")


def drawn(svg: bytes) -> tuple[Any, ...]:
    """The map as (tag, own attributes, effective presentation, text, children) with style groups dissolved."""
    root = ET.fromstring(svg)
    out = _element(root, dict(INITIAL))
    assert isinstance(out, tuple)
    return out


def _tag(element: ET.Element) -> str:
    assert element.tag.startswith(SVG), element.tag
    return element.tag[len(SVG) :]


def _is_style_group(element: ET.Element) -> bool:
    return (
        _tag(element) == "g"
        and element.find(f"{SVG}title") is None
        and all(name in INHERITED for name in element.attrib)
    )


def _children(element: ET.Element, inherited: dict[str, str]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for child in element:
        if _is_style_group(child):
            assert not (child.text or "").strip(), "a style group holds elements, not text"
            out.extend(_children(child, {**inherited, **child.attrib}))
        else:
            out.append(_element(child, inherited))
        assert not (child.tail or "").strip(), "no text between elements"
    return out


def _element(element: ET.Element, inherited: dict[str, str]) -> tuple[Any, ...]:
    tag = _tag(element)
    effective = {**inherited, **{k: v for k, v in element.attrib.items() if k in INHERITED}}
    own = tuple(sorted((k, v) for k, v in element.attrib.items() if k not in INHERITED))
    paint = tuple((name, effective[name]) for name in APPLIES.get(tag, ()))
    text = element.text if tag in TEXT_OF else None
    return (tag, own, paint, text, tuple(_children(element, effective)))
