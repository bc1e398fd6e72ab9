"""Log setup for the long-running commands: human text or one JSON object per line.

JSON lines carry the standard fields (time, level, logger, message) plus every `extra=` field a call
site gives — the controller passes `revision`, `node`, `code` (finding code), `trigger` — so a log
pipeline can filter on them. Secrets never reach a log line: Settings hold them as `Secret`, and
every formatted line (text or JSON, exception text included) goes through the one redaction
(reconciler.model.redaction), so a credential inside a URL is masked whoever logged it.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from reconciler.model.redaction import redact
from reconciler.settings import LogFormat

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return redact(orjson.dumps(doc, default=str).decode())


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = [f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")]
        return redact(f"{base} {' '.join(extras)}" if extras else base)


def setup_logging(fmt: LogFormat, level: str = "INFO", stream: Any = None) -> logging.Handler:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt is LogFormat.JSON else TextFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_migplan", False):
            root.removeHandler(h)
    handler._migplan = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The kubernetes client and urllib3 are chatty at INFO about every retry; keep them to warnings.
    for noisy in ("urllib3", "kubernetes", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler
