"""The one redaction of secrets that travel inside URLs: every output channel goes through it.

Pure (text in, text out). A repository URL may carry a credential in three places, and a URL ends up
in messages, logs, `-o json`, Events, reports and the outbox; `redact()` removes all three wherever
a URL appears in a text:

- userinfo with a password, any scheme: `https://user:pw@host`, `ssh://user:pw@host` -> `user:***@`;
- userinfo alone, any scheme: `https://TOKEN@host` (GitHub/GitLab accept a token there) -> `***@`,
  since a lone user part cannot be told from a token (`ssh://git@host` becomes `ssh://***@host`);
- query or fragment parameters whose name says secret (`?private_token=`, `&access_token=`,
  `#password=`, `?sig=`, ...) -> `name=***`.

The authority ends at the first `/`, `?`, `#` or whitespace, and the userinfo at its *last* `@`
(RFC 3986 §3.2; an unescaped `@` in a password is how people get this wrong), so a password holding
`@` or `:` is removed whole. Applying `redact` twice changes nothing (tests rely on it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

# scheme://userinfo@ — greedy up to the last '@' inside the authority.
# Characters RFC 3986 never allows raw in a URL (`"`, `<`, `>`, `\`, `{`, `}`, `|`, `^`, backtick)
# end it too, so a match never runs across the quotes of a JSON document or a repr.
_AUTHORITY_CHAR = r"[^/?#\s@\"<>\\{}|^`]"
_USERINFO = re.compile(
    rf"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>{_AUTHORITY_CHAR}*(?:@{_AUTHORITY_CHAR}*)*)@"
)
# ?name=value / &name=value / #name=value / ;name=value where the name looks like a credential.
_SECRET_PARAM = re.compile(
    r"(?P<head>[?&#;](?:[A-Za-z0-9_.-]*?)"
    r"(?:token|password|passwd|pwd|secret|api[_-]?key|apikey|key|auth|sig|signature|credential)"
    r"[A-Za-z0-9_.-]*=)(?P<value>[^&#;\s\"'<>]*)",
    re.IGNORECASE,
)


def _userinfo(match: re.Match[str]) -> str:
    user, colon, _ = match.group("userinfo").partition(":")
    if user == MASK or not match.group("userinfo"):
        return match.group(0)
    return f"{match.group('scheme')}{user}:{MASK}@" if colon else f"{match.group('scheme')}{MASK}@"


def _param(match: re.Match[str]) -> str:
    return match.group("head") + MASK


def redact(text: str) -> str:
    """`text` with every URL credential replaced by `***` (see the module docstring).

    Each pattern runs only where the literal characters that any of its matches holds are all in the text: a
    substring test is a fast scan of the text, the regex tries a match at every word (a report file of
    thousands of lines, the whole text `reconcile --once` prints). Case plays no part in these characters
    (`://`, `@`, `=` and one of `?&#;`), so no case folding can make a match the tests miss. The same result
    as `redact_full` on every text (tests/unit/model/test_redaction_fastpath.py)."""
    if "@" in text and "://" in text:  # a userinfo match is `scheme://...@`
        text = _USERINFO.sub(_userinfo, text)
    if "=" in text and ("?" in text or "&" in text or "#" in text or ";" in text):  # a parameter: `[?&#;]name=`
        text = _SECRET_PARAM.sub(_param, text)
    return text


def redact_full(text: str) -> str:
    """Both patterns over the whole text, with no shortcut: the reference `redact` is tested against."""
    return _SECRET_PARAM.sub(_param, _USERINFO.sub(_userinfo, text))


def redact_value(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with `redact` applied to every string, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


def redact_bytes(data: bytes) -> bytes:
    """UTF-8 text with `redact` applied; bytes that are not UTF-8 are returned as they are."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    cleaned = redact(text)
    return data if cleaned == text else cleaned.encode("utf-8")
