"""redact's fast path (literal tests before each pattern) against the full regex pass, on generated and hostile text."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.model import redaction
from reconciler.model.redaction import MASK, redact, redact_full

# URL pieces, the characters both patterns turn on, and the Unicode that IGNORECASE folds onto ASCII letters
# (Kelvin sign, long s, dotless/dotted i): a literal test that missed them would let a credential through.
PIECES = [
    "https://",
    "ssh://",
    "git+ssh://",
    "://",
    "@",
    ":",
    "/",
    "?",
    "&",
    "#",
    ";",
    "=",
    " ",
    "\n",
    '"',
    "'",
    "user",
    "pw",
    "token",
    "TOKEN",
    "private_token",
    "access_token",
    "password",
    "passwd",
    "pwd",
    "secret",
    "api_key",
    "api-key",
    "apikey",
    "key",
    "auth",
    "sig",
    "signature",
    "credential",
    "host",
    "example.com",
    "\u212a",
    "\u017f",
    "\u0131",
    "\u0130",
    "S\u0131G",
    "\u212aEY",
    "\u017fecret",
    "x",
    "1",
]
texts = st.lists(st.sampled_from(PIECES) | st.text(max_size=3), max_size=24).map("".join) | st.text()


@settings(max_examples=2000, deadline=None)
@given(texts)
@example("see https://user:p@ss@host/x?private_token=abc#sig=1")
@example("?\u212aEY=hunter2")  # Kelvin sign: IGNORECASE reads it as K
@example("&\u017fecret=x")  # long s: IGNORECASE reads it as s
@example("clone ssh://git@host/repo failed")
def test_fast_path_equals_the_full_pass(text: str) -> None:
    assert redact(text) == redact_full(text)


def test_the_credential_cases_are_still_redacted() -> None:
    assert redact("https://user:pw@host/r") == f"https://user:{MASK}@host/r"
    assert redact("https://TOKEN@host/r") == f"https://{MASK}@host/r"
    assert redact("x https://h/r?private_token=abc&a=1") == f"x https://h/r?private_token={MASK}&a=1"
    assert redact("?\u212aey=abc") == f"?\u212aey={MASK}"


def test_text_without_the_literals_skips_the_patterns() -> None:
    calls: list[str] = []

    class Spy:
        def __init__(self, pattern: object) -> None:
            self.pattern = pattern

        def sub(self, repl: object, text: str) -> str:
            calls.append(text)
            return self.pattern.sub(repl, text)  # type: ignore[attr-defined,no-any-return]

    saved = redaction._USERINFO, redaction._SECRET_PARAM
    redaction._USERINFO, redaction._SECRET_PARAM = Spy(saved[0]), Spy(saved[1])  # type: ignore[assignment]
    try:
        plain = "skip  node/gpu-node-00001  mig.config=all-balanced; user@host\n" * 100  # no '://', no '?&#'
        assert redact(plain) is plain
        assert calls == [plain]  # '=' with ';' needs the parameter pattern; no '://' means no userinfo pass
        calls.clear()
        assert redact("a table = nothing secret") == "a table = nothing secret"
        assert calls == []
    finally:
        redaction._USERINFO, redaction._SECRET_PARAM = saved
