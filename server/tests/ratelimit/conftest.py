"""The rate-limit tests' shared fixtures: a real Redis and a key prefix of the test's own, and
the store a test runs on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.ratelimit.test_rate_limits import (
    delete_redis_prefix,
    redis_test_url,
    unique_redis_prefix,
)


@pytest.fixture
async def redis_prefix() -> AsyncIterator[tuple[str, str]]:
    """``(url, prefix)`` of the test Redis; the prefix's keys are deleted after the test."""
    url = await redis_test_url()
    prefix = unique_redis_prefix()
    try:
        yield url, prefix
    finally:
        await delete_redis_prefix(url, prefix)


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[dict[str, str]]:
    """Settings overrides for the rate-limit store: in this process, or a real Redis."""
    if request.param == "memory":
        yield {}
        return
    url = await redis_test_url()
    prefix = unique_redis_prefix()
    try:
        yield {"redis_url": url, "redis_key_prefix": prefix}
    finally:
        await delete_redis_prefix(url, prefix)
