"""A refused observation annotation is refused with a ONE-line reason, whatever the document's keys hold: the
reason goes into log lines, `migplan import` warnings and findings, where a newline would forge a line."""

from __future__ import annotations

import pytest

from reconciler.logic.codecs import observedcodec
from reconciler.model import strict


@pytest.mark.parametrize("key", ["\n", "podResources\nMP000: forged", "\r\u2028x"])
def test_a_hostile_source_name_stays_inside_a_one_line_reason(key: str) -> None:
    doc = '{"version": "v2", "gpus": [], "sources": {' + f'"{key.encode("unicode_escape").decode()}": null' + "}}"
    with pytest.raises(strict.StrictValueError) as caught:
        observedcodec.decode(doc)
    reason = str(caught.value)
    assert len(reason.splitlines()) == 1 and reason.isprintable(), reason
    assert "must be a string, not None" in reason
