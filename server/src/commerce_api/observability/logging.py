"""Logs: JSON lines for machines, readable text on a terminal, and never a secret.

Standard-library ``logging`` throughout (granian, SQLAlchemy and httpx log through it already;
structlog would add a dependency without changing what lands on stderr). Fields passed with
``extra=`` become JSON keys (or ``key=value`` in text). :class:`RedactingFilter` sits on the
one handler, so every record of every library is scrubbed of API keys, webhook secrets and
signatures before it is formatted — a safety net: the code does not log them on purpose.
"""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from commerce_api.settings import Settings

REDACTED = "[REDACTED]"
# API keys (sk_live_…, sk_sandbox_…), webhook secrets (whsec_…) and Standard Webhooks
# signatures (v1,<base64 HMAC>); a prefix alone is redacted too (a truncated key is still one).
_SECRET = re.compile(
    r"(?P<prefix>sk_live_|sk_sandbox_|whsec_)[A-Za-z0-9+/=_\-]*|v1,[A-Za-z0-9+/]{8,}={0,2}"
)
# The attributes every LogRecord has; anything else came from ``extra=``.
_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_HIDDEN_FIELDS = frozenset({"color_message"})  # a coloured duplicate of the message (uvicorn's)


def _mask(match: re.Match[str]) -> str:
    return (match.group("prefix") or "v1,") + REDACTED


def redact(text: str) -> str:
    """``text`` with every key, webhook secret and signature replaced by ``[REDACTED]``."""
    if "sk_" not in text and "whsec_" not in text and "v1," not in text:
        return text  # the common case, without running the pattern
    return _SECRET.sub(_mask, text)


def _redact_value(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    text = str(value)
    cleaned = redact(text)
    return value if cleaned == text else cleaned


class RedactingFilter(logging.Filter):
    """Scrubs the message, its arguments, ``extra`` fields and tracebacks of a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        fields = record.__dict__
        for name in fields.keys() - _RECORD_FIELDS:
            fields[name] = _redact_value(fields[name])
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = record.__dict__
    # Iterating the dict (not the set difference) keeps the order the fields were given in.
    return {name: fields[name] for name in fields if name not in _NOT_EXTRA}


_NOT_EXTRA = _RECORD_FIELDS | _HIDDEN_FIELDS
_second: tuple[int, str] = (-1, "")


def _timestamp(record: logging.LogRecord) -> str:
    """``2026-11-21T08:12:41.123Z``; the part up to the second is formatted once a second."""
    global _second
    whole = int(record.created)
    if _second[0] != whole:
        moment = datetime.fromtimestamp(whole, UTC)
        _second = (whole, moment.strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{_second[1]}{int((record.created - whole) * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then the ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **extra_fields(record),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value …`` for a person at a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = extra_fields(record)
        if not fields:
            return line
        head, newline, rest = line.partition("\n")  # keep a traceback below the fields
        pairs = " ".join(f"{name}={value}" for name, value in fields.items())
        return f"{head} {pairs}{newline}{rest}"


def resolved_format(settings: Settings, stream: IO[str] | None = None) -> str:
    """``json`` or ``text``: ``auto`` picks text only when the stream is a terminal."""
    if settings.log_format != "auto":
        return settings.log_format
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def logging_config(settings: Settings) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig` for serve (granian applies it in its main process
    and in every worker) and worker: one stderr handler on the root logger, which every other
    logger (granian's included) propagates to. Its ``loggers`` replace granian's own, so its
    server log comes here too; its access log is off (``serve`` does not enable it: the request
    line comes from ``observability.access``)."""
    formatter = JsonFormatter if resolved_format(settings) == "json" else TextFormatter
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"redact": {"()": f"{__name__}.RedactingFilter"}},
        "formatters": {"default": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "default",
                "filters": ["redact"],
            }
        },
        "root": {"level": settings.log_level.upper(), "handlers": ["stderr"]},
        "loggers": {},
    }
