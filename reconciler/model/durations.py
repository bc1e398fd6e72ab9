"""Go-style durations as Kubernetes writes them (metav1.Duration): "10m", "1h30m", "90s", "0".

Pure data parsing, shared by the inventory's settings validation and the report cadence. Restricted to h/m/s and
bounded (at most 99h + 9999m + 99999s, about ten days) so no value can overflow or mean "never".
"""

from __future__ import annotations

import re

DURATION_PATTERN = r"^(0|(?=[0-9])([0-9]{1,2}h)?([0-9]{1,4}m)?([0-9]{1,5}s)?)$"
_DURATION_RE = re.compile(DURATION_PATTERN.removesuffix("$") + r"\Z")
_UNIT = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int | None:
    """Seconds of a Go-style duration ("10m", "1h30m", "90s", "0"); None when it is not one."""
    if not isinstance(text, str) or _DURATION_RE.match(text) is None:
        return None
    return sum(int(n) * _UNIT[u] for n, u in re.findall(r"([0-9]+)([hms])", text))
