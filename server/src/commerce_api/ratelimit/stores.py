"""Where request counts live: in this process, or in Redis for several processes.

Both count in fixed windows aligned to the Unix epoch (``window_start = now - now % window``),
so every process agrees on when a window starts and resets without talking to the others.
"""

from __future__ import annotations

from typing import Protocol

from commerce_api.rounds import Rounds


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


# INCRBY and EXPIRE in one atomic step per key, for a whole round of requests in one round
# trip. A key names its window, so a window's counter is never shared with the next; the
# expiry only cleans it up.
_HIT_SCRIPT = """
local counts = {}
for i, key in ipairs(KEYS) do
    local hits = tonumber(ARGV[2 * i - 1])
    local count = redis.call('INCRBY', key, hits)
    if count == hits then
        redis.call('EXPIRE', key, ARGV[2 * i])
    end
    counts[i] = count
end
return counts
"""

REDIS_TIMEOUT_SECONDS = 0.5


class RedisStore:
    """Counters in Redis, shared by every process that uses the same Redis and prefix.

    Requests are counted in rounds (``rounds.Rounds``): the hits waiting at the same moment go
    in one script call, one INCRBY per key, and each request gets its own place in the count
    (the counter before the round plus its position), exactly as one INCR each would have
    given — with one round trip for all of them.
    """

    def __init__(self, url: str, prefix: str) -> None:
        # Imported here: redis.asyncio costs ~11 MB, which the embedded default never needs.
        from redis.asyncio import Redis

        self._redis = Redis.from_url(
            url,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
        )
        self._prefix = prefix
        self._hit = self._redis.register_script(_HIT_SCRIPT)
        self._rounds: Rounds[tuple[str, int], list[int]] = Rounds(self._hit_round)

    async def hit(self, key: str, window_start: int, window_seconds: int) -> int:
        redis_key = f"{self._prefix}ratelimit:{window_start}:{key}"
        counts, index = await self._rounds.join((redis_key, window_seconds + 60))
        return counts[index]

    async def _hit_round(self, hits: list[tuple[str, int]]) -> list[int]:
        """One script call for the round; each hit's count, in the order they came."""
        per_key: dict[str, int] = {}
        expiry: dict[str, int] = {}
        for redis_key, ttl in hits:
            per_key[redis_key] = per_key.get(redis_key, 0) + 1
            expiry[redis_key] = ttl
        keys = list(per_key)
        args: list[int] = []
        for redis_key in keys:
            args += [per_key[redis_key], expiry[redis_key]]
        totals = dict(zip(keys, await self._hit(keys=keys, args=args), strict=True))
        # Within the round, the callers of a key take the counts before the total in order.
        counts = []
        seen: dict[str, int] = {}
        for redis_key, _ in hits:
            seen[redis_key] = seen.get(redis_key, 0) + 1
            counts.append(int(totals[redis_key]) - per_key[redis_key] + seen[redis_key])
        return counts

    async def close(self) -> None:
        await self._redis.aclose()
