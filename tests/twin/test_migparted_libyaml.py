"""The twin's mig-manager reads plain-ASCII mig-parted configs through libyaml (PyYAML's C parser) with the same
constructors and resolvers as its pure-Python go-yaml v2 loader: its own CPU, not what it models. Both must give the
same document, or the same error, on every input: the configs of the fixtures, YAML's corner cases (go-yaml v2
booleans, timestamps, anchors, merge keys, numbers, flow style, several documents, malformed text) and seeded random
documents and fragment soups."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.twin.operator import migparted

FIXTURES = Path(__file__).parents[1] / "fixtures" / "migparted"

CORNERS = [
    "",
    "~",
    "version: v1\nmig-configs:\n  a:\n  - devices: all\n    mig-enabled: y\n",
    "a: [y, Y, n, N, yes, No, on, OFF, true, False, 'y', \"n\"]\n",
    "t: 2001-12-14\nu: 2001-12-14t21:59:43.10-05:00\nv: '2001-12-14'\n",
    "a: &x {b: 1, c: [1, 2]}\nd: *x\ne:\n  <<: *x\n  b: 2\n",
    "n: [0x1f, 0o17, 017, 1_000, 1e3, 1.5e+3, .inf, -.Inf, .nan, +12, -0, 0b101, 190:20:30, 1:2]\n",
    "k: null\nl: Null\nm: ~\nn:\no: ''\n",
    "a: 1\na: 2\n",
    "? [1, 2]\n: complex key\n? {x: y}\n: other\n",
    "s: |\n  literal\n   text\n\nf: >-\n  folded\n  text\n",
    "q: 'it''s'\nd: \"esc \\u00e9 \\x41 \\n\"\n",
    "a: b: c\n",
    "a: [1, 2\n",
    "- a\nb: c\n",
    "key: value\n  bad: indent\n",
    "--- 1\n--- 2\n",
    "---\na: 1\n...\n",
    "%YAML 1.1\n---\na: 1\n",
    "%YAML 1.2\n---\na: 1\n",
    "a: !!str 1\nb: !!int '2'\nc: !!float 3\n",
    "a: !custom x\n",
    "a: *missing\n",
    "{a: 1, b: [c, {d: e}]}",
    "[a, b, ]\n",
    "a: 'unterminated\n",
    "@bad: 1\n",
    "a: `x`\n",
    "a:\n  - b\n  -c\n  - - d\n    - e\n",
    "x" * 1100 + ": long key\n",
    "a: 1 # comment\n# only comment\n",
    "version: v1\nmig-configs:\n  all-1g.18gb:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n"
    '        "1g.18gb": 7\n',
]


def _fixture_texts() -> list[str]:
    texts = [str(case["config"]) for case in yaml.safe_load((FIXTURES / "invalid.yaml").read_text())["cases"]]
    for path in sorted((FIXTURES / "accepted").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        texts.append(doc["data"]["config.yaml"] if doc.get("kind") == "ConfigMap" else path.read_text())
    return texts


_WORDS = ["y", "n", "yes", "off", "~", "null", "0x1f", "017", "1_0", "1e3", ".inf", "2001-12-14", "<<", "a b", "-1"]


def _value(rng: random.Random, depth: int) -> Any:
    pick = rng.random()
    if depth > 3 or pick < 0.4:
        return rng.choice([*_WORDS, 0, 1, -2, 3.5, True, None, ""])
    if pick < 0.7:
        return {rng.choice(_WORDS): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def _random_dumps(count: int) -> list[str]:
    rng = random.Random(29)
    out = []
    for _ in range(count):
        style = rng.choice([None, '"', "'", "|"])
        flow = rng.choice([None, True, False])
        doc = {str(rng.choice(_WORDS)): _value(rng, 0) for _ in range(rng.randint(1, 5))}
        out.append(yaml.dump(doc, default_style=style, default_flow_style=flow, width=rng.choice([20, 80])))
    return out


_FRAGMENTS = ["a:", " b", "- ", "[", "]", "{", "}", ", ", ": ", "\n", "\n  ", "'q'", '"d"', "&x ", "*x", "# c", "? "]


def _soups(count: int) -> list[str]:
    rng = random.Random(35)
    return ["".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 14))) for _ in range(count)]


def _outcome(load: Any, text: str) -> tuple[str, ...]:
    try:
        return ("ok", repr(load(text)))  # repr tells True from 1, 1 from 1.0, and key order
    except yaml.YAMLError as exc:
        return ("error", type(exc).__name__, str(exc))


def _pure(text: str) -> Any:
    return yaml.load(text, Loader=migparted._GoYamlV2Loader)


def _libyaml(text: str) -> Any:
    return yaml.load(text, Loader=migparted._GoYamlV2CLoader)


INPUTS = [*CORNERS, *_fixture_texts(), *_random_dumps(300), *_soups(400)]


def test_libyaml_is_there_and_plain_text_takes_it() -> None:
    assert migparted._CParser is not None  # PyYAML's wheels ship libyaml: without it this comparison proves nothing
    plain = [t for t in INPUTS if migparted._PLAIN_TEXT.fullmatch(t)]
    assert len(plain) >= len(INPUTS) - 5
    assert sum(_outcome(_pure, t)[0] == "ok" for t in plain) >= 350
    assert sum(_outcome(_pure, t)[0] == "error" for t in plain) >= 100


@pytest.mark.parametrize("index", range(len(INPUTS)))
def test_the_document_or_error_is_the_pure_loaders(index: int) -> None:
    text = INPUTS[index]
    pure = _outcome(_pure, text)
    assert _outcome(migparted._load, text) == pure
    if pure[0] == "ok" and migparted._PLAIN_TEXT.fullmatch(text):
        assert _outcome(_libyaml, text) == pure  # the fast path itself, not only its fallback


@pytest.mark.parametrize("index", range(len(INPUTS)))
def test_parse_says_what_it_said_with_the_pure_loader(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def outcome() -> tuple[str, str]:
        try:
            return ("ok", repr(migparted.parse(INPUTS[index])))
        except migparted.MigPartedError as exc:
            return ("error", str(exc))

    fast = outcome()
    monkeypatch.setattr(migparted, "_CParser", None)
    assert outcome() == fast


@pytest.mark.parametrize("text", ["a: 1\tb\n", "a: caf\u00e9\n", "a: 1\r\nb: 2\r\n", "a: \x01\n", "\ufeffa: 1\n"])
def test_other_text_is_left_to_the_pure_loader(text: str) -> None:
    assert not migparted._PLAIN_TEXT.fullmatch(text)
    assert _outcome(migparted._load, text) == _outcome(_pure, text)
