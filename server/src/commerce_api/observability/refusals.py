"""Requests refused at the edge of the app, on record: each counted in ``/metrics``
(``commerce_http_refusals_total{reason}``) and noted in the request log, where a flood of them
from one address is one line a second.

The refusals are those the app gives before or instead of a route's answer: ``server_busy``
(503, a client over its in-flight cap), ``request_timeout`` (408, a body that did not arrive in
time), ``payload_too_large`` (413), ``header_too_large`` (431: a head too large, or with too
many header lines) and ``malformed_request`` (400: a body cut short, or a ``Host`` header
missing or repeated). A line is written for the
first refusal of an address and reason in a second; those after it in the same second are
counted, and the next line for that address and reason says how many refusals it stands for
(``count``, itself included). The counter is exact either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, Literal, get_args

from commerce_api.observability.metrics import HTTP_REFUSALS

RefusalReason = Literal[
    "server_busy", "request_timeout", "payload_too_large", "header_too_large", "malformed_request"
]

_COUNTERS = {reason: HTTP_REFUSALS.labels(reason) for reason in get_args(RefusalReason)}
# Past this many addresses and reasons remembered, all but this second's are forgotten (their
# refusals since their last line stay counted in the metric only).
MAX_REMEMBERED: Final = 10_000

logger = logging.getLogger("commerce_api.access")


class RefusalLog:
    """Counts refusals and writes their rate-limited lines (one per process)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        # (address, reason) -> (the second of its last line, refusals since that line)
        self._last: dict[tuple[str, str], tuple[int, int]] = {}

    def refused(self, reason: RefusalReason, status: int, address: str) -> None:
        _COUNTERS[reason].inc()
        second = int(self.clock())
        key = (address, reason)
        logged, unlogged = self._last.get(key, (-1, 0))
        if logged == second:
            self._last[key] = (second, unlogged + 1)
            return
        if len(self._last) >= MAX_REMEMBERED:
            self._forget_before(second)
        self._last[key] = (second, 0)
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                "refused %d %s from %s (%d since the last line)",
                status,
                reason,
                address or "-",
                unlogged + 1,
                extra={
                    "status": status,
                    "reason": reason,
                    "client": address,
                    "count": unlogged + 1,
                },
            )

    def _forget_before(self, second: int) -> None:
        self._last = {key: seen for key, seen in self._last.items() if seen[0] >= second}


REFUSALS = RefusalLog()
"""The process's refusal log (the server guard and the error guard note theirs here)."""
