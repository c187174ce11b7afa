"""The rate limiter on its own: a fake clock, the in-process store, and a store that fails.

Windows are fixed and aligned to the Unix epoch (``window_start = now - now % window``), so
every process computes the same reset time without talking to the others.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import types

import pytest
from redis.asyncio import Redis

from commerce_api.ratelimit import limiter as limiter_module
from commerce_api.ratelimit import redis_store as stores_module
from commerce_api.ratelimit.limiter import STORE_RETRY_SECONDS, Decision, MemoryStore, RateLimiter
from commerce_api.ratelimit.redis_store import MAX_LEASE, REDIS_TIMEOUT_SECONDS, RedisStore
from commerce_api.settings import Settings
from tests.conftest import make_settings
from tests.round_trips import counting_relay

HOUR = 3600
# Some time in the middle of an hour-long window (not on a boundary), with a fraction.
WINDOW_START = 1_700_000_000 - 1_700_000_000 % HOUR
NOW = WINDOW_START + 1234.25


class FakeClock:
    """A settable Unix time for ``RateLimiter.clock``."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def limiter_settings(**overrides: object) -> Settings:
    values: dict[str, object] = {
        "rate_limit_development": 3,
        "rate_limit_production": 5,
        "rate_limit_window_seconds": HOUR,
    }
    values.update(overrides)
    return make_settings("sqlite:///unused.db", **values)


def make_limiter(clock: FakeClock, **overrides: object) -> RateLimiter:
    return RateLimiter(limiter_settings(**overrides), MemoryStore(), clock=clock)


# --- decisions -----------------------------------------------------------------------------------


async def test_an_admitted_request_gets_limit_remaining_and_the_aligned_reset() -> None:
    limiter = make_limiter(FakeClock())
    decision = await limiter.check("acct_a", "development")
    assert decision == Decision(limit=3, remaining=2, reset=WINDOW_START + HOUR, retry_after=None)
    assert decision.allowed


async def test_remaining_counts_down_to_zero_then_requests_are_refused() -> None:
    limiter = make_limiter(FakeClock())
    decisions = [await limiter.check("acct_a", "development") for _ in range(5)]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0, 0]
    assert [d.allowed for d in decisions] == [True, True, True, False, False]
    assert all(d.limit == 3 for d in decisions)
    assert {d.reset for d in decisions} == {WINDOW_START + HOUR}


@pytest.mark.parametrize("offset", [0.0, 0.25, 1234.25, 3598.0, 3599.2, 3599.999])
async def test_a_refusal_says_when_to_retry_in_whole_seconds(offset: float) -> None:
    clock = FakeClock(WINDOW_START + offset)
    limiter = make_limiter(clock, rate_limit_development=1)
    assert (await limiter.check("acct_a", "development")).allowed
    refused = await limiter.check("acct_a", "development")
    assert not refused.allowed
    assert refused.remaining == 0
    assert refused.reset == WINDOW_START + HOUR
    assert refused.retry_after == math.ceil(WINDOW_START + HOUR - clock.now)
    assert refused.retry_after is not None
    assert refused.retry_after >= 1


async def test_the_next_window_admits_again_with_a_full_quota() -> None:
    clock = FakeClock()
    limiter = make_limiter(clock)
    for _ in range(4):
        await limiter.check("acct_a", "development")
    assert not (await limiter.check("acct_a", "development")).allowed

    clock.now = WINDOW_START + HOUR  # exactly the reset time: a new window
    decision = await limiter.check("acct_a", "development")
    assert decision == Decision(3, 2, WINDOW_START + 2 * HOUR, None)


async def test_keys_have_independent_quotas() -> None:
    limiter = make_limiter(FakeClock())
    for _ in range(3):
        assert (await limiter.check("acct_a", "development")).allowed
    assert not (await limiter.check("acct_a", "development")).allowed
    assert (await limiter.check("acct_b", "development")).remaining == 2
    assert (await limiter.check("ip:10.0.0.1", "development")).remaining == 2
    assert not (await limiter.check("acct_a", "development")).allowed


async def test_each_tier_gets_its_limit_from_the_settings() -> None:
    limiter = make_limiter(FakeClock(), rate_limit_development=3, rate_limit_production=5)
    development = [await limiter.check("acct_dev", "development") for _ in range(4)]
    production = [await limiter.check("acct_prod", "production") for _ in range(6)]
    assert [d.limit for d in development] == [3] * 4
    assert [d.remaining for d in development] == [2, 1, 0, 0]
    assert [d.allowed for d in development] == [True] * 3 + [False]
    assert [d.limit for d in production] == [5] * 6
    assert [d.remaining for d in production] == [4, 3, 2, 1, 0, 0]
    assert [d.allowed for d in production] == [True] * 5 + [False]


async def test_the_default_quotas_are_those_of_the_design() -> None:
    settings = make_settings("sqlite:///unused.db")
    limiter = RateLimiter(settings, MemoryStore(), clock=FakeClock())
    assert (await limiter.check("a", "development")).limit == 1000
    assert (await limiter.check("b", "production")).limit == 10000
    assert (await limiter.check("c", "development")).reset == WINDOW_START + HOUR


# --- window alignment ----------------------------------------------------------------------------


@pytest.mark.parametrize("window", [1, 60, 3600, 86400])
@pytest.mark.parametrize("now", [1_700_000_000.0, 1_700_000_123.75, 1_700_003_599.5])
async def test_windows_are_aligned_to_the_epoch(window: int, now: float) -> None:
    limiter = RateLimiter(
        limiter_settings(rate_limit_window_seconds=window), MemoryStore(), clock=FakeClock(now)
    )
    decision = await limiter.check("acct_a", "development")
    assert decision.reset % window == 0
    assert decision.reset - window <= now < decision.reset


async def test_two_processes_agree_on_the_reset_without_sharing_anything() -> None:
    """Limiters started at different times, with their own stores, report the same reset."""
    first = make_limiter(FakeClock(WINDOW_START + 5.5))
    second = make_limiter(FakeClock(WINDOW_START + 3000.0))
    a = await first.check("acct_a", "development")
    b = await second.check("acct_a", "development")
    assert a.reset == b.reset == WINDOW_START + HOUR


async def test_two_processes_on_redis_share_one_count_and_one_reset(
    redis_prefix: tuple[str, str],
) -> None:
    url, prefix = redis_prefix
    stores = [RedisStore(url, prefix), RedisStore(url, prefix)]
    try:
        first = RateLimiter(limiter_settings(), stores[0], clock=FakeClock(WINDOW_START + 1.0))
        second = RateLimiter(limiter_settings(), stores[1], clock=FakeClock(WINDOW_START + 2000.0))
        decisions = [
            await first.check("acct_a", "development"),
            await second.check("acct_a", "development"),
            await first.check("acct_a", "development"),
            await second.check("acct_a", "development"),
        ]
        assert [d.remaining for d in decisions] == [2, 1, 0, 0]
        assert [d.allowed for d in decisions] == [True, True, True, False]
        assert {d.reset for d in decisions} == {WINDOW_START + HOUR}
        assert (await second.check("acct_b", "development")).remaining == 2
        assert first.store_errors == second.store_errors == 0
    finally:
        for store in stores:
            await store.close()


# --- a failing store -----------------------------------------------------------------------------


class FlakyStore:
    """A store that raises while ``failing``; otherwise counts in memory. Counts its calls."""

    def __init__(self) -> None:
        self.failing = True
        self.calls = 0
        self._counts = MemoryStore()

    async def hit(self, key: str, window_start: int, window_seconds: int, limit: int) -> int:
        self.calls += 1
        if self.failing:
            raise ConnectionError("store is down")
        return await self._counts.hit(key, window_start, window_seconds, limit)

    async def close(self) -> None:
        return None


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def monotonic(monkeypatch: pytest.MonkeyPatch) -> FakeMonotonic:
    """``time.monotonic`` as the limiter sees it (only there: asyncio needs the real one)."""
    fake = FakeMonotonic()
    patched = types.SimpleNamespace(monotonic=fake, time=time.time)
    monkeypatch.setattr(limiter_module, "time", patched)
    return fake


async def test_a_failing_store_falls_back_to_counting_in_this_process(
    monotonic: FakeMonotonic, caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore()
    limiter = RateLimiter(limiter_settings(), store, clock=FakeClock())
    with caplog.at_level(logging.WARNING, logger="commerce_api.ratelimit"):
        decisions = [await limiter.check("acct_a", "development") for _ in range(5)]

    # Still decided, and the quota still holds (counted in this process).
    assert [d.remaining for d in decisions] == [2, 1, 0, 0, 0]
    assert [d.allowed for d in decisions] == [True, True, True, False, False]
    assert {d.reset for d in decisions} == {WINDOW_START + HOUR}
    assert limiter.store_errors > 0
    # The store was tried once; then the limiter stopped paying for it until the retry time.
    assert store.calls == 1
    warnings = [
        record
        for record in caplog.records
        if record.name == "commerce_api.ratelimit" and record.levelno == logging.WARNING
    ]
    assert len(warnings) == 1, [record.getMessage() for record in caplog.records]
    assert "ConnectionError" in warnings[0].getMessage()


async def test_the_store_is_tried_again_after_the_retry_interval(
    monotonic: FakeMonotonic, caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore()
    limiter = RateLimiter(limiter_settings(), store, clock=FakeClock())
    with caplog.at_level(logging.WARNING, logger="commerce_api.ratelimit"):
        await limiter.check("acct_a", "development")
        assert store.calls == 1

        monotonic.now += STORE_RETRY_SECONDS - 0.1
        await limiter.check("acct_a", "development")
        assert store.calls == 1, "not retried before STORE_RETRY_SECONDS"

        monotonic.now += 0.1
        await limiter.check("acct_a", "development")
        assert store.calls == 2, "retried once STORE_RETRY_SECONDS have passed"
        # Still down: another warning, another pause.
        errors_while_down = limiter.store_errors
        assert errors_while_down >= 2

        monotonic.now += STORE_RETRY_SECONDS
        store.failing = False
        decision = await limiter.check("acct_a", "development")

    assert store.calls == 3
    # The store is back: its count is used again and no new error is recorded.
    assert decision.allowed
    assert decision.remaining == 2
    assert limiter.store_errors == errors_while_down
    warnings = [r for r in caplog.records if r.name == "commerce_api.ratelimit"]
    assert len(warnings) == 2
    second = await limiter.check("acct_a", "development")
    assert second.remaining == 1
    assert store.calls == 4


async def test_a_clock_that_steps_back_still_counts_in_the_newest_window() -> None:
    store = MemoryStore()
    assert await store.hit("acct_a", 7200, 3600, LIMIT) == 1
    assert await store.hit("acct_a", 7200, 3600, LIMIT) == 2
    # The clock stepped back into the previous window: the request is not a free one.
    assert await store.hit("acct_a", 3600, 3600, LIMIT) == 3


LIMIT = 10**6


Lease = tuple[str, int, int]  # (Redis key, expiry seconds, units)


def recorded_rounds(store: RedisStore) -> list[list[Lease]]:
    """The leases of each round trip ``store`` makes to Redis, as they are made."""
    rounds: list[list[Lease]] = []
    send = store._rounds._send

    async def recording(leases: list[Lease]) -> list[int]:
        rounds.append(list(leases))
        return await send(leases)

    store._rounds._send = recording  # the bound method the rounds were built with
    return rounds


def lease_sizes(rounds: list[list[Lease]]) -> list[int]:
    return [units for leases in rounds for _, _, units in leases]


async def test_concurrent_hits_on_redis_share_round_trips_and_count_exactly(
    redis_prefix: tuple[str, str],
) -> None:
    url, prefix = redis_prefix
    store = RedisStore(url, prefix)
    try:
        sent = recorded_rounds(store)
        hits = [store.hit(f"acct_{i % 3}", WINDOW_START, HOUR, LIMIT) for i in range(60)]
        counts = await asyncio.gather(*hits)
        for account in range(3):
            mine = sorted(counts[i] for i in range(60) if i % 3 == account)
            assert mine == list(range(1, 21))  # each hit its own place, none shared or lost
        assert len(sent) < 60  # round trips were shared, and places leased in blocks
        assert await store.hit("acct_0", WINDOW_START, HOUR, LIMIT) == 21
        redis = Redis.from_url(url)
        try:
            key = f"{prefix}ratelimit:{WINDOW_START}:acct_1"
            # what was leased: what the hits took, the rest of a block, and one block ahead
            assert 20 <= int(await redis.get(key)) <= 20 + 2 * MAX_LEASE
            assert 0 < await redis.ttl(key) <= HOUR + 60
        finally:
            await redis.aclose()
    finally:
        await store.close()


async def test_processes_leasing_from_redis_never_admit_more_than_the_limit(
    redis_prefix: tuple[str, str],
) -> None:
    """Two stores (two processes' worth) on one counter, 3,000 requests at a quota of 1,000:
    at most 1,000 admitted, at most two leases each fewer (the block in use and the one leased
    ahead), each with its own place, and far fewer round trips than requests."""
    url, prefix = redis_prefix
    stores = [RedisStore(url, prefix), RedisStore(url, prefix)]
    limit, requests = 1000, 3000
    try:
        sent = [recorded_rounds(store) for store in stores]

        async def client(store: RedisStore) -> list[int]:
            places = []
            for _ in range(requests // 2 // 25):
                places += await asyncio.gather(
                    *(store.hit("acct_a", WINDOW_START, HOUR, limit) for _ in range(25))
                )
            return places

        places = [place for found in await asyncio.gather(*map(client, stores)) for place in found]
        admitted = [place for place in places if place <= limit]
        assert limit - 2 * 2 * MAX_LEASE <= len(admitted) <= limit
        assert len(set(admitted)) == len(admitted)
        round_trips = sum(len(rounds) for rounds in sent)
        assert round_trips <= requests // 10, round_trips
        # Once the quota is gone, a process refuses without asking Redis again.
        before = round_trips
        assert await stores[0].hit("acct_a", WINDOW_START, HOUR, limit) > limit
        assert sum(len(rounds) for rounds in sent) == before
    finally:
        for store in stores:
            await store.close()


async def test_requests_waiting_on_a_frozen_redis_all_fail_within_one_timeout() -> None:
    """A Redis that accepts connections and never answers: the requests waiting on one lease
    fail together when it times out, not one timeout after another."""
    frozen: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frozen.append(writer)  # never answers

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = RedisStore(f"redis://127.0.0.1:{port}/0", "frozen:")
    try:
        started = time.monotonic()
        results = await asyncio.gather(
            *(store.hit("acct_a", WINDOW_START, HOUR, LIMIT) for _ in range(20)),
            return_exceptions=True,
        )
        elapsed = time.monotonic() - started
        assert all(isinstance(result, Exception) for result in results), results
        assert elapsed < 3 * REDIS_TIMEOUT_SECONDS, elapsed
    finally:
        await store.close()
        for writer in frozen:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_redis_cut_off_silently_mid_use_costs_one_timeout_then_counts_here(
    redis_prefix: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis's link cut silently after it served (packets dropped, nothing closed): the request
    waiting on it is decided (in this process) within one socket timeout, the next ones at
    once, and Redis counts again once the link is back (issue 32 item 3)."""
    monkeypatch.setattr(limiter_module, "STORE_RETRY_SECONDS", 0.5)
    url, prefix = redis_prefix
    async with counting_relay(url) as relay:
        store = RedisStore(relay.url_for(url), prefix)
        limiter = RateLimiter(limiter_settings(), store, clock=FakeClock())
        try:
            assert (await limiter.check("acct_a", "development")).remaining == 2
            await relay.cut(silent=True)
            for attempt in range(3):
                started = time.monotonic()
                decision = await limiter.check("acct_a", "development")
                elapsed = time.monotonic() - started
                assert decision.allowed
                bound = 2 * REDIS_TIMEOUT_SECONDS if attempt == 0 else 0.1
                assert elapsed < bound, (attempt, elapsed)
            assert limiter.store_errors == 3
            relay.heal()
            await asyncio.sleep(0.5)  # past the limiter's pause
            errors = limiter.store_errors
            await limiter.check("acct_a", "development")
            assert limiter.store_errors == errors  # counted in Redis again
        finally:
            await store.close()


async def test_a_steady_stream_of_requests_never_waits_for_redis(
    redis_prefix: tuple[str, str],
) -> None:
    """The next block is leased while half a lease is left, so requests arriving faster than
    one per round trip but slower than half a lease per round trip never wait for one."""
    url, prefix = redis_prefix
    store = RedisStore(url, prefix)
    send = store._rounds._send

    async def slow_round_trip(leases: list[tuple[str, int, int]]) -> list[int]:
        await asyncio.sleep(0.03)
        return await send(leases)

    store._rounds._send = slow_round_trip
    try:
        waited = []
        for expected in range(1, 601):
            started = time.monotonic()
            assert await store.hit("acct_a", WINDOW_START, HOUR, LIMIT) == expected
            waited.append(time.monotonic() - started)
            # ~400 requests/s: a lease grows to ~0.1 s of them, so half a lease outlasts a
            # round trip
            await asyncio.sleep(0.002)
        assert max(waited[200:]) < 0.02, "a request waited for a round trip"
    finally:
        await store.close()


async def test_leases_follow_the_request_rate(
    redis_prefix: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key requested once every two seconds leases one place at a time (Redis counts exactly
    what was admitted); a busy one grows its leases up to MAX_LEASE, and they shrink again
    when it quiets down."""
    url, prefix = redis_prefix
    clock = FakeClock(0.0)  # the stores' monotonic time
    monkeypatch.setattr(stores_module, "time", types.SimpleNamespace(monotonic=clock))
    store = RedisStore(url, prefix)
    rounds = recorded_rounds(store)
    try:
        for expected in range(1, 11):
            clock.now += 2.0
            assert await store.hit("acct_quiet", WINDOW_START, HOUR, LIMIT) == expected
        assert set(lease_sizes(rounds)) == {1}
        rounds.clear()
        for _ in range(4 * MAX_LEASE):  # a burst: no time passes between requests
            await store.hit("acct_busy", WINDOW_START, HOUR, LIMIT)
        sizes = lease_sizes(rounds)
        assert max(sizes) == MAX_LEASE
        assert sizes == sorted(sizes)  # doubling while each block lasts under 0.1 s
        rounds.clear()
        for _ in range(2 * MAX_LEASE):  # quiet again: a request every 0.5 s
            clock.now += 0.5
            await store.hit("acct_busy", WINDOW_START, HOUR, LIMIT)
        assert lease_sizes(rounds)[-1] < MAX_LEASE // 4
        redis = Redis.from_url(url)
        try:
            assert int(await redis.get(f"{prefix}ratelimit:{WINDOW_START}:acct_quiet")) == 10
        finally:
            await redis.aclose()
    finally:
        await store.close()
