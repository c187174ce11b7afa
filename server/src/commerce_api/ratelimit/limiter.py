"""The limiter: which quota a request counts against, and the answer it gets; and where the
counts live, behind ``RateLimitStore``: this process's (``MemoryStore``, the embedded default) or
Redis's for several processes (``redis_store.py``).

Both count in fixed windows aligned to the Unix epoch (``window_start = now - now % window``),
so every process agrees on when a window starts and resets without talking to the others.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Literal, NamedTuple, Protocol, get_args

from commerce_api.observability.metrics import RATE_LIMIT_STORE_ERRORS
from commerce_api.settings import Settings, Tier

logger = logging.getLogger("commerce_api.ratelimit")


class RateLimitStore(Protocol):
    async def hit(self, key: str, window_start: int, window_seconds: int, limit: int) -> int:
        """Count one request for ``key`` in the window; return its place in the window's count
        (admitted when it is at most ``limit``)."""
        ...

    async def close(self) -> None: ...


class MemoryStore:
    """Counters in this process: for the embedded default (one process)."""

    def __init__(self) -> None:
        self._window_start = -1
        self._counts: dict[str, int] = {}

    async def hit(self, key: str, window_start: int, window_seconds: int, limit: int) -> int:
        # No await between read and write: atomic under asyncio.
        if window_start > self._window_start:
            self._window_start = window_start
            self._counts = {}  # every key's window ends together, so drop them all
        # A clock that stepped back lands in an older window: count it in the newest one.
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        return count

    async def close(self) -> None:
        return None


# After the shared store fails, count in this process for a while instead of paying a timeout
# on every request.
STORE_RETRY_SECONDS = 5.0


LimitName = Literal["quota", "publishable_key", "publishable_client"]
"""Which limit a decision is about: the account's quota (or a client IP's, without a valid
key), or one of a publishable key's own two (docs/design.md, "Rate limits")."""


# Each limit as a 429 names it: in its message, and in ``details``.
_LIMITS: dict[LimitName, tuple[str, str]] = {
    "quota": ("for this account (or, without a valid key, this address)", "X-RateLimit-Limit"),
    "publishable_key": ("for this publishable key", "publishable_key"),
    "publishable_client": ("for this publishable key from this address", "publishable_client"),
}


class Decision(NamedTuple):
    """The limiter's answer for one request (a tuple: one is made per request); the HTTP layer
    renders it as headers (``http.pipeline.rate_limit_headers``)."""

    limit: int
    remaining: int
    reset: int  # Unix time, seconds, when the window resets
    retry_after: int | None  # seconds; set when the request is refused
    limit_name: LimitName = "quota"

    @property
    def allowed(self) -> bool:
        return self.retry_after is None

    def refusal(self) -> tuple[str, str]:
        """A refused request's 429 message and ``details``, naming the limit it met."""
        which, details = _LIMITS[self.limit_name]
        message = (
            f"Rate limit of {self.limit} requests per window {which} exceeded. Retry after "
            f"{self.retry_after} seconds (see the Retry-After header)."
        )
        return message, details


class RateLimiter:
    def __init__(
        self,
        settings: Settings,
        store: RateLimitStore,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._window = settings.rate_limit_window_seconds
        self._limits = {tier: settings.rate_limit_for(tier) for tier in get_args(Tier)}
        self._publishable_per_key = settings.rate_limit_publishable_per_key
        self._publishable_per_client = settings.rate_limit_publishable_per_client
        self.store = store
        self.clock = clock
        self.store_errors = 0
        self._fallback = MemoryStore()
        self._fallback_until = 0.0

    async def check(self, key: str, tier: Tier) -> Decision:
        """Count one request for ``key`` (``acct_…``, ``key_…`` or ``ip:…``) and decide."""
        return await self._count(key, self._limits[tier], "quota")

    async def check_publishable(self, key_id: str, client: str) -> Decision:
        """Count one request with the publishable key ``key_id`` from the address ``client``,
        apart from any account's quota: against the key's bucket from that address, then (if
        admitted there) the key's own bucket. The answer is the refusing one, else the one
        with fewer requests left."""
        per_client = await self._count(
            f"pk:{key_id}:ip:{client}", self._publishable_per_client, "publishable_client"
        )
        if not per_client.allowed:
            return per_client  # a flooding address never drains the key's own bucket
        per_key = await self._count(f"pk:{key_id}", self._publishable_per_key, "publishable_key")
        if not per_key.allowed or per_key.remaining < per_client.remaining:
            return per_key
        return per_client

    async def _count(self, key: str, limit: int, name: LimitName) -> Decision:
        window = self._window
        now = self.clock()
        window_start = int(now) - int(now) % window
        reset = window_start + window
        if time.monotonic() >= self._fallback_until:
            try:
                count = await self.store.hit(key, window_start, window, limit)
            except Exception as exc:
                self._store_failed(exc)
                count = await self._fallback.hit(key, window_start, window, limit)
        else:
            self.store_errors += 1
            RATE_LIMIT_STORE_ERRORS.inc()
            count = await self._fallback.hit(key, window_start, window, limit)
        if count > limit:
            return Decision(limit, 0, reset, max(1, math.ceil(reset - now)), name)
        return Decision(limit, limit - count, reset, None, name)

    def _store_failed(self, exc: Exception) -> None:
        """Count in this process for a while instead of paying a timeout on every request."""
        self.store_errors += 1
        RATE_LIMIT_STORE_ERRORS.inc()
        self._fallback_until = time.monotonic() + STORE_RETRY_SECONDS
        logger.warning(
            "rate-limit store unavailable (%s); counting in this process for %.0f s",
            type(exc).__name__,
            STORE_RETRY_SECONDS,
        )

    async def close(self) -> None:
        await self.store.close()
