"""The limiter: which quota a request counts against, and the answer it gets."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import NamedTuple, get_args

from commerce_api.observability.metrics import RATE_LIMIT_STORE_ERRORS
from commerce_api.ratelimit.stores import MemoryStore, RateLimitStore
from commerce_api.settings import Settings, Tier

logger = logging.getLogger("commerce_api.ratelimit")

# After the shared store fails, count in this process for a while instead of paying a timeout
# on every request.
STORE_RETRY_SECONDS = 5.0


class Decision(NamedTuple):
    """The limiter's answer for one request (a tuple: one is made per request)."""

    limit: int
    remaining: int
    reset: int  # Unix time, seconds, when the window resets
    retry_after: int | None  # seconds; set when the request is refused

    @property
    def allowed(self) -> bool:
        return self.retry_after is None

    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"x-ratelimit-limit", str(self.limit).encode()),
            (b"x-ratelimit-remaining", str(self.remaining).encode()),
            (b"x-ratelimit-reset", str(self.reset).encode()),
        ]
        if self.retry_after is not None:
            headers.append((b"retry-after", str(self.retry_after).encode()))
        return headers


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
        self.store = store
        self.clock = clock
        self.store_errors = 0
        self._fallback = MemoryStore()
        self._fallback_until = 0.0

    async def check(self, key: str, tier: Tier) -> Decision:
        """Count one request for ``key`` (``acct_…``, ``key_…`` or ``ip:…``) and decide."""
        window = self._window
        limit = self._limits[tier]
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
            return Decision(limit, 0, reset, retry_after=max(1, math.ceil(reset - now)))
        return Decision(limit, limit - count, reset, retry_after=None)

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
