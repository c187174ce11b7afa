"""Where request counts live: in this process, or in Redis for several processes.

Both count in fixed windows aligned to the Unix epoch (``window_start = now - now % window``),
so every process agrees on when a window starts and resets without talking to the others.
"""

from __future__ import annotations

from typing import Protocol

from redis.asyncio import Redis


class RateLimitStore(Protocol):
    async def hit(self, key: str, window_start: int, window_seconds: int) -> int:
        """Count one request for ``key`` in the window; return the count including it."""
        ...

    async def close(self) -> None: ...


class MemoryStore:
    """Counters in this process: for the embedded default (one process)."""

    def __init__(self) -> None:
        self._window_start = -1
        self._counts: dict[str, int] = {}

    async def hit(self, key: str, window_start: int, window_seconds: int) -> int:
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


# INCR and EXPIRE in one atomic step and one round trip. The key names its window, so a
# window's counter is never shared with the next; the expiry only cleans it up.
_HIT_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then
    redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return count
"""

REDIS_TIMEOUT_SECONDS = 0.5


class RedisStore:
    """Counters in Redis, shared by every process that uses the same Redis and prefix."""

    def __init__(self, url: str, prefix: str) -> None:
        self._redis = Redis.from_url(
            url,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
        )
        self._prefix = prefix
        self._hit = self._redis.register_script(_HIT_SCRIPT)

    async def hit(self, key: str, window_start: int, window_seconds: int) -> int:
        redis_key = f"{self._prefix}ratelimit:{window_start}:{key}"
        count = await self._hit(keys=[redis_key], args=[window_seconds + 60])
        return int(count)

    async def close(self) -> None:
        await self._redis.aclose()
