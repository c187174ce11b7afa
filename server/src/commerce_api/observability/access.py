"""The request log: one line per request, in the same shape as every other log line.

Written here rather than through ``logging``: a ``LogRecord``, the redaction filter, the
formatter and an unbuffered write to stderr cost ~60 µs a request, more than the rest of a
catalogue read together. The request observer (``http.pipeline.RequestObserver``) notes each
request, stamped with its time, in the batch it shares with the request metrics and hands the
batch here (:meth:`AccessLog.write_many`): when ``RequestObserver.BATCH_SIZE`` are waiting,
``RequestObserver.FLUSH_SECONDS`` after the first of them, and at shutdown. This writer renders
the lines itself (orjson, the same fields and order as
:class:`~commerce_api.observability.logging.JsonFormatter`, or the text layout of
:class:`~commerce_api.observability.logging.TextFormatter`). Rendering a batch at once rather
than a line per request keeps its code and data hot in the CPU's caches. Each write is at most
:data:`MAX_WRITE_BYTES` and ends on a line, so lines of several workers sharing one pipe never
interleave.

It logs nothing a key or secret could be in: ids, the route *template* (never the raw path),
the method, the status and the duration, so the redaction filter has nothing to do here.
Whether a request is logged follows the ``commerce_api.access`` logger's level when it is
answered (:attr:`AccessLog.logger`, which the observer asks).
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime

import orjson

from commerce_api.observability import AnsweredRequest
from commerce_api.observability.metrics import KNOWN_METHODS

LOGGER_NAME = "commerce_api.access"
MAX_TEMPLATES = 4096  # JSON line templates kept (by caller, route, method, status)
MAX_WRITE_BYTES = 4096  # PIPE_BUF on Linux: a write this size to a pipe is atomic


class AccessLog:
    # Requests answered while this logger is enabled for INFO are logged.
    logger = logging.getLogger(LOGGER_NAME)

    def __init__(self, log_format: str) -> None:
        self._json = log_format == "json"
        self._second: tuple[int, str, str] = (-1, "", "")
        self._stamp: tuple[tuple[int, int, bool], str] = ((-1, -1, False), "")
        self._pieces: dict[tuple[str | None, str | None, str, str, int], tuple[str, str]] = {}

    def _line(self, now: float, answer: AnsweredRequest) -> str:
        route, method, status, seconds, _, request_id, account_id, key_id = answer
        if self._json:
            pieces = self._pieces.get((account_id, key_id, route, method, status))
            if pieces is None:
                pieces = self._json_pieces(account_id, key_id, route, method, status)
            if pieces is not None:
                # The line is a template (see _json_pieces). ``duration_ms`` is the duration
                # rounded to two decimals: formatting with two decimals rounds as ``round``
                # does, and the rounded value's shortest form (what orjson and repr write) is
                # that text less trailing zeros, so one float conversion serves both.
                milliseconds = seconds * 1000
                two = f"{milliseconds:.2f}"
                short = two.rstrip("0") if milliseconds < 1e9 else repr(round(milliseconds, 2))
                if short[-1] == ".":
                    short += "0"
                return (
                    f'{{"time":"{self._time(now, True)}{pieces[0]}{two}ms","request_id":'
                    f"{_json_id(request_id)}{pieces[1]}{short}}}"
                )
        duration_ms = round(seconds * 1000, 2)
        message = f"{method} {route} {status} {duration_ms:.2f}ms"
        if self._json:
            return orjson.dumps(
                {
                    "time": self._time(now, True),
                    "level": "info",
                    "logger": LOGGER_NAME,
                    "message": message,
                    "request_id": request_id,
                    "account_id": account_id,
                    "key_id": key_id,
                    "route": route,
                    "method": method,
                    "status": status,
                    "duration_ms": duration_ms,
                }
            ).decode()
        return (
            f"{self._time(now, False)} INFO    {LOGGER_NAME}: {message} request_id={request_id} "
            f"account_id={account_id} key_id={key_id} route={route} method={method} "
            f"status={status} duration_ms={duration_ms}"
        )

    def _json_pieces(
        self, account_id: str | None, key_id: str | None, route: str, method: str, status: int
    ) -> tuple[str, str] | None:
        """A JSON line's text around its time, duration and request id, for requests of this
        caller, route, method and status (memoised: a handful of them carry the load). None
        when a value is not JSON-safe as it is; then orjson renders the line.

        Every value here is JSON-safe as it is (ids are base62, routes are our templates or
        "unmatched", the method is a known one), so the line is a template: a fraction of the
        cost of a dict through orjson. The tests hold it to JsonFormatter's output."""
        if method not in KNOWN_METHODS or not route.isascii():
            return None
        pieces = (
            f'","level":"info","logger":"{LOGGER_NAME}","message":"{method} {route} {status} ',
            f',"account_id":{_json_id(account_id)},"key_id":{_json_id(key_id)},'
            f'"route":"{route}","method":"{method}","status":{status},"duration_ms":',
        )
        if len(self._pieces) >= MAX_TEMPLATES:
            self._pieces.clear()
        self._pieces[account_id, key_id, route, method, status] = pieces
        return pieces

    def _time(self, now: float, iso: bool) -> str:
        """``2026-11-21T08:12:41.123Z`` (JSON) or ``2026-11-21 08:12:41,123`` (text, local
        time, as ``logging`` writes ``asctime``); the part up to the second is cached, and the
        whole stamp of the last millisecond (a busy process logs several per millisecond)."""
        whole = int(now)
        millis = int((now - whole) * 1000)
        stamp = (whole, millis, iso)
        if stamp == self._stamp[0]:
            return self._stamp[1]
        if self._second[0] != whole:
            utc = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
            local = time.strftime("%Y-%m-%d %H:%M:%S,", time.localtime(whole))
            self._second = (whole, utc, local)
        text = f"{self._second[1]}{millis:03d}Z" if iso else f"{self._second[2]}{millis:03d}"
        self._stamp = (stamp, text)
        return text

    def write_many(self, answered: list[AnsweredRequest]) -> None:
        """Write the lines of the requests answered while the log was on (those with a time)."""
        lines = [self._line(now, answer) for answer in answered if (now := answer[4]) is not None]
        if not lines:
            return
        stream = sys.stderr
        try:
            chunk: list[str] = []
            size = 0
            for line in lines:
                # Bytes are what PIPE_BUF counts (an ASCII line's are its characters).
                length = (len(line) if line.isascii() else len(line.encode())) + 1
                if chunk and size + length > MAX_WRITE_BYTES:
                    stream.write("".join(chunk))
                    chunk, size = [], 0
                chunk.append(line + "\n")
                size += length
            stream.write("".join(chunk))
            stream.flush()
        except (OSError, ValueError):
            pass  # stderr closed or gone: as logging does, never fail the request for a log


def _json_id(value: str | None) -> str:
    """An id (base62 with a prefix) as JSON; anything else through orjson."""
    if value is None:
        return "null"
    if value.isascii() and value.isidentifier():  # letters, digits and "_": JSON-safe as is
        return f'"{value}"'
    return orjson.dumps(value).decode()
