"""The finding-code legend of node pages and the README is drawn once per set of codes (issue 29, fleet-wide
report): every legend must equal the table drawn afresh from FINDING_CODES, byte for byte, whatever the set, its
order, unknown codes in it, and whether the memo is cold or warm."""

from __future__ import annotations

import itertools

from tabulate import tabulate

from reconciler.logic.drift.drift import FINDING_CODES
from reconciler.logic.reports import nodepages


def _drawn_afresh(codes: set[str]) -> str:
    rows = [[c, FINDING_CODES[c][0].value, FINDING_CODES[c][1]] for c in sorted(codes) if c in FINDING_CODES]
    return tabulate(rows, headers=["code", "severity", "meaning"], tablefmt="github")


def _code_sets() -> list[set[str]]:
    known = sorted(FINDING_CODES)
    sets = [set(), {"MP999"}, {"not a code", known[0]}, set(known)]
    sets += [set(pair) for pair in itertools.combinations(known[:8], 2)]
    sets += [set(known[i::3]) | {"MP000"} for i in range(3)]
    return sets


def test_there_are_codes_with_meanings() -> None:
    assert len(FINDING_CODES) >= 3


def test_legend_equals_the_table_drawn_afresh_cold_and_warm() -> None:
    sets = _code_sets()
    nodepages._legend_of.cache_clear()
    cold = [nodepages.legend(codes) for codes in sets]
    warm = [nodepages.legend(set(reversed(sorted(codes)))) for codes in reversed(sets)][::-1]
    assert cold == warm == [_drawn_afresh(codes) for codes in sets]
    assert nodepages._legend_of.cache_info().hits > 0  # the warm pass came from the memo


def test_unknown_codes_share_the_entry_of_the_known_ones() -> None:
    known = sorted(FINDING_CODES)[:2]
    assert nodepages.legend({*known, "MP000"}) == nodepages.legend(set(known)) == _drawn_afresh(set(known))
    assert nodepages.legend({"MP000"}) == _drawn_afresh(set())
