"""Request counts in Redis, for several processes (``MemoryStore``, in ``limiter.py``, is the
embedded default's).

It counts in fixed windows aligned to the Unix epoch (``window_start = now - now % window``),
as the in-process store does, so every process agrees on when a window starts and resets
without talking to the others.
"""

from __future__ import annotations

import asyncio
import math
import time

from commerce_api.core.coalescing import Rounds

# INCRBY and EXPIRE in one atomic step per key, for a whole round of leases in one round
# trip. A key names its window, so a window's counter is never shared with the next; the
# expiry only cleans it up.
_LEASE_SCRIPT = """
local totals = {}
for i, key in ipairs(KEYS) do
    local units = tonumber(ARGV[2 * i - 1])
    local total = redis.call('INCRBY', key, units)
    if total == units then
        redis.call('EXPIRE', key, ARGV[2 * i])
    end
    totals[i] = total
end
return totals
"""

REDIS_TIMEOUT_SECONDS = 0.5
# A lease takes at most this many units of a key's quota, and at most 1/LEASE_SHARE of what was
# left of it when the last lease was taken: so near the end of a quota, leases shrink to one
# unit (one round trip per request, as without leases) and little is left stranded in a lease.
MAX_LEASE = 1024
LEASE_SHARE = 16
# Leases are sized to the key's request rate in this process: one doubles while a block lasts
# less than LEASE_FAST_SECONDS and halves when one lasted more than LEASE_SLOW_SECONDS. So a
# block holds about a tenth of a second of requests: a busy key goes to Redis once per hundreds
# of requests, a quiet one leases one place at a time (exact, as without leases).
LEASE_FAST_SECONDS = 0.1
LEASE_SLOW_SECONDS = 1.0


class _Lease:
    """This process's leased places in one key's count for one window, handed to one request
    each, in order: the places left (``next..last``) and, leased ahead of need, the block that
    follows them (``ahead``)."""

    __slots__ = (
        "ahead",
        "cap",
        "exhausted",
        "last",
        "leased_at",
        "next",
        "redis_key",
        "refill",
        "size",
    )

    def __init__(self, redis_key: str) -> None:
        self.redis_key = redis_key
        self.leased_at = -math.inf  # when the last block was asked for (monotonic seconds)
        self.next, self.last = 1, 0  # the places left: next..last, all within the limit
        self.ahead: tuple[int, int] | None = None  # the next block, leased before it is needed
        self.size = 1  # units the next lease asks for (follows the request rate)
        self.cap = MAX_LEASE  # what the quota left allows a lease (LEASE_SHARE)
        self.exhausted = False  # the count passed the limit: no place is left to lease
        # A lease on its way; it resolves to the error that lease met, if any.
        self.refill: asyncio.Future[Exception | None] | None = None

    def take(self) -> int | None:
        place = self.next
        if place > self.last:
            if self.ahead is None:
                return None
            place, self.last = self.ahead
            self.ahead = None
        self.next = place + 1
        return place

    def wants_more(self) -> bool:
        """Whether to lease the next block now, before the requests run out of places: when
        no more than half a lease is left and none is on its way."""
        return (
            self.refill is None
            and self.ahead is None
            and not self.exhausted
            and self.last - self.next < self.size // 2
        )

    def asked(self) -> int:
        """The size of the block to ask for now, by how long the last one lasted."""
        now = time.monotonic()
        lasted, self.leased_at = now - self.leased_at, now
        if lasted < LEASE_FAST_SECONDS:
            self.size *= 2
        elif lasted > LEASE_SLOW_SECONDS:
            self.size //= 2
        self.size = max(1, min(self.size, self.cap))
        return self.size

    def leased(self, last: int, size: int, limit: int) -> int:
        """Take in the block of ``size`` places ending at ``last``; its first place."""
        if last >= limit:
            self.exhausted = True
        self.cap = max(1, min(MAX_LEASE, (limit - last) // LEASE_SHARE))
        self.size = max(1, min(self.size, self.cap))
        return last - size + 1


class RedisStore:
    """Counters in Redis, shared by every process that uses the same Redis and prefix.

    A process does not go to Redis for every request: it *leases* places in a key's count — a
    block of consecutive places, taken with one INCRBY — and hands them to its requests one by
    one. Redis's counter is the sum of every process's leases, and a place is handed out at
    most once, so across all processes no more than the limit is ever admitted in a window. The
    price: places a process leased but did not use before the window ended are lost, so the
    processes together may admit up to one lease each fewer than the limit, and a request's
    ``X-RateLimit-Remaining`` (the limit minus its place) does not count places other processes
    have leased but not yet used. Leases start at one unit in each window, follow the key's
    request rate (about a tenth of a second of requests each, ``LEASE_FAST_SECONDS``), and
    shrink near the limit (``MAX_LEASE``, ``LEASE_SHARE``). When no more than
    half a lease's places are left, the next block is leased in the background, so requests
    rarely wait for Redis: a process holds at most two blocks of a key (what it has left and
    the one ahead). One lease per key is on its way at a time; the leases wanted at the same
    moment share one round trip (``coalescing.Rounds``).
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
        self._lease_script = self._redis.register_script(_LEASE_SCRIPT)
        self._rounds: Rounds[tuple[str, int, int], list[int]] = Rounds(self._lease_round)
        self._window_start = -1
        self._leases: dict[str, _Lease] = {}
        self._background: set[asyncio.Task[None]] = set()

    async def hit(self, key: str, window_start: int, window_seconds: int, limit: int) -> int:
        if window_start > self._window_start:
            self._window_start = window_start
            self._leases = {}  # every key's window ends together
        lease = self._leases.get(key)
        if lease is None:
            # A clock that stepped back lands in an older window: count it in the newest one.
            redis_key = f"{self._prefix}ratelimit:{self._window_start}:{key}"
            lease = self._leases[key] = _Lease(redis_key)
        place = lease.next
        if lease.last - place > lease.size // 2:  # the common case: more than half a lease left
            lease.next = place + 1
            return place
        redis_key, ttl = lease.redis_key, window_seconds + 60
        while True:
            taken = lease.take()
            if taken is not None:
                if lease.wants_more():
                    self._lease_ahead(lease, redis_key, ttl, limit)
                return taken
            if lease.exhausted:
                return limit + 1
            if lease.refill is None:
                return await self._refill(lease, redis_key, ttl, limit)
            error = await asyncio.shield(lease.refill)  # then take from what it brought
            if error is not None:
                # The store failed for this round: every request waiting on it fails at once
                # (the limiter then counts in this process), none tries again in turn.
                raise error

    async def _refill(self, lease: _Lease, redis_key: str, ttl: int, limit: int) -> int:
        """Lease another block now (no place is left); this request takes its first place."""
        refill = lease.refill = asyncio.get_running_loop().create_future()
        size = lease.asked()
        error: Exception | None = None
        try:
            totals, index = await self._rounds.join((redis_key, ttl, size))
        except Exception as exc:
            error = exc
            raise
        finally:
            lease.refill = None
            # The waiters look again (on a cancellation of this request, one leases instead).
            refill.set_result(error)
        last = totals[index]
        first = lease.leased(last, size, limit)
        lease.next, lease.last = first + 1, min(last, limit)
        return first

    def _lease_ahead(self, lease: _Lease, redis_key: str, ttl: int, limit: int) -> None:
        """Lease the next block in the background while places are left, so that requests
        rarely wait for a round trip (each waiting one costs a wake-up besides)."""
        refill = lease.refill = asyncio.get_running_loop().create_future()
        size = lease.asked()

        async def lease_block() -> None:
            error: Exception | None = None
            try:
                totals, index = await self._rounds.join((redis_key, ttl, size))
                last = totals[index]
                first = lease.leased(last, size, limit)
                if first <= limit:
                    lease.ahead = (first, min(last, limit))
            except Exception as exc:  # the requests waiting on it fail; the next one retries
                error = exc
            finally:
                lease.refill = None
                refill.set_result(error)

        task = asyncio.create_task(lease_block())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _lease_round(self, leases: list[tuple[str, int, int]]) -> list[int]:
        """One script call for the round; for each lease, the last place of its block."""
        per_key: dict[str, int] = {}
        expiry: dict[str, int] = {}
        for redis_key, ttl, units in leases:
            per_key[redis_key] = per_key.get(redis_key, 0) + units
            expiry[redis_key] = ttl
        keys = list(per_key)
        args: list[int] = []
        for redis_key in keys:
            args += [per_key[redis_key], expiry[redis_key]]
        totals = dict(zip(keys, await self._lease_script(keys=keys, args=args), strict=True))
        # Within the round, the leases of a key take the blocks before the total in order.
        lasts = []
        taken: dict[str, int] = {}
        for redis_key, _, units in leases:
            taken[redis_key] = taken.get(redis_key, 0) + units
            lasts.append(int(totals[redis_key]) - per_key[redis_key] + taken[redis_key])
        return lasts

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._redis.aclose()
