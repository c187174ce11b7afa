"""When to retry a request, and how long to wait first.

Retried: connection failures and timeouts, 429, 5xx, and the 409 that means "a request with this
``Idempotency-Key`` is still in flight" (the first attempt is still running; once it finishes,
the retry gets its stored response). Every other 409 (out of stock, illegal status change) and
every other 4xx would fail the same way again, so they are raised at once.

A request is retried only when repeating it cannot apply it twice: GET, PATCH, DELETE, and a
POST that carries an ``Idempotency-Key`` (the client gives every POST one, reused across the
retries of one call).
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Final

import httpx

from commerce_client._errors import is_idempotency_in_flight, parse_retry_after

DEFAULT_MAX_RETRIES: Final = 2
INITIAL_RETRY_DELAY: Final = 0.5
"""Seconds before the first retry (before jitter); doubled for each further retry."""
MAX_RETRY_DELAY: Final = 8.0
"""Upper bound of the exponential backoff, in seconds."""
JITTER: Final = 0.25
"""Each backoff delay is reduced by a random fraction up to this, so clients that failed
together do not retry together."""
MAX_RETRY_AFTER: Final = 60.0
"""A ``Retry-After`` longer than this is not waited for: the error is raised at once, with its
``retry_after``, so the caller decides (a spent hourly quota can mean an hour)."""

# PATCH is not idempotent in general; ours sets fields to given values, so repeating it is.
_REPEATABLE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})


def sleep(seconds: float) -> None:
    """The pause between attempts (a seam for tests)."""
    time.sleep(seconds)


async def async_sleep(seconds: float) -> None:
    """The pause between attempts of :class:`~commerce_client.AsyncClient` (a test seam)."""
    await asyncio.sleep(seconds)


def backoff_delay(retries_done: int) -> float:
    """Seconds to wait before retry number ``retries_done + 1``: exponential, capped, with
    jitter: within ``[base * (1 - JITTER), base]`` where ``base = min(INITIAL * 2**n, MAX)``."""
    base: float = min(INITIAL_RETRY_DELAY * 2.0**retries_done, MAX_RETRY_DELAY)
    return base * (1 - JITTER * random.random())


def is_repeatable(request: httpx.Request) -> bool:
    return request.method in _REPEATABLE_METHODS or "idempotency-key" in request.headers


def is_retryable_exception(exc: httpx.TransportError) -> bool:
    """Transient transport failures; not e.g. an unsupported URL scheme."""
    return isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError)


def delay_for_response(response: httpx.Response, retries_done: int) -> float | None:
    """Seconds to wait before retrying after ``response``, or None not to retry it."""
    status = response.status_code
    if not (status == 429 or status >= 500 or is_idempotency_in_flight(response)):
        return None
    retry_after = parse_retry_after(response.headers)
    if retry_after is None:
        return backoff_delay(retries_done)
    if retry_after > MAX_RETRY_AFTER:
        return None
    return retry_after
