"""Issue 32 item 3: a process whose listening connection is cut off silently (packets dropped,
nothing closed) stops serving its cached keys and stock within 2 s of the cut, and caches again
once the link is back.

The listening connection goes through a relay (``tests.round_trips``) that the test cuts
silently; the rest of the process's connections (the read pool, the engine) go straight to
PostgreSQL, so after the cut the only thing wrong is that notifications no longer arrive. The
changes are made by a connection of the test's own, as another process would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import orjson
import pytest
from sqlalchemy.engine import make_url

from commerce_api.core.errors import APIError
from commerce_api.readpath.service import ReadPath
from commerce_api.storage import freshness, heartbeat
from commerce_api.storage.db import Database
from commerce_api.storage.deadlines import Deadlines
from tests import factories
from tests.round_trips import Relay, counting_relay

pytestmark = pytest.mark.postgresql

BOUND_SECONDS = 2.0  # the promise: cached data stops being served within 2 s of a cut
RESUME_SECONDS = 5.0  # caching again after the link is back


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@dataclass
class Request:
    versions: freshness.Versions | None = None
    versions_read: bool = False


@dataclass
class Cuttable:
    read_path: ReadPath
    db: Database
    relay: Relay
    outsider: asyncpg.Connection

    @property
    def tracker(self) -> freshness.PostgresTracker:
        assert isinstance(self.read_path.tracker, freshness.PostgresTracker)
        return self.read_path.tracker


@pytest.fixture
async def cuttable(postgresql_database_url: str) -> AsyncIterator[Cuttable]:
    """A read path (the service's deadlines) whose listening connection goes through a relay."""
    async with counting_relay(postgresql_database_url) as relay:
        db = Database(postgresql_database_url, deadlines=Deadlines())
        db.listen_dsn = _dsn(relay.url_for(postgresql_database_url))
        read_path = await ReadPath.open(db, "sandbox")
        outsider = await asyncpg.connect(_dsn(postgresql_database_url))
        try:
            yield Cuttable(read_path, db, relay, outsider)
        finally:
            relay.heal()
            await outsider.close()
            await read_path.close()
            await db.dispose()


async def is_accepted(read_path: ReadPath, secret: str) -> bool:
    try:
        await read_path.authenticate(secret, Request())
    except APIError as exc:
        refused = exc
    else:
        return True
    assert refused.status == 401
    return False


async def stock_served(read_path: ReadPath, product_id: str) -> int:
    body = await read_path.product_body(Request(), product_id)
    assert body is not None
    stock = orjson.loads(body)["inventory_count"]
    assert isinstance(stock, int)
    return stock


async def revoke_and_restock(outsider: asyncpg.Connection, key_id: str, product_id: str) -> None:
    """What another process's revocation and stock change commit (notifications included)."""
    async with outsider.transaction():
        await outsider.execute("UPDATE api_keys SET revoked_at = now() WHERE id = $1", key_id)
        await outsider.execute(
            "UPDATE instance_values SET value = 'revoked-in-the-cut' WHERE name = $1",
            freshness.AUTH,
        )
        await outsider.execute("UPDATE products SET inventory_count = 7 WHERE id = $1", product_id)
        for name in (freshness.AUTH, freshness.STOCK):
            await outsider.execute("SELECT pg_notify($1, $2)", freshness.CHANNEL, name)


async def test_a_silent_cut_of_the_listener_stops_the_caches_within_two_seconds(
    cuttable: Cuttable,
) -> None:
    read_path, tracker = cuttable.read_path, cuttable.tracker
    customer = await factories.new_customer(cuttable.db)
    product_id = await factories.new_product(cuttable.db, stock=3)
    assert tracker.listening
    assert await is_accepted(read_path, customer.secret)
    assert await stock_served(read_path, product_id) == 3
    assert tracker.known() is not None  # served from the caches from here on

    await cuttable.relay.cut(silent=True)
    cut = time.monotonic()
    await revoke_and_restock(cuttable.outsider, customer.key.id, product_id)

    while await is_accepted(read_path, customer.secret):
        assert time.monotonic() - cut < BOUND_SECONDS, "a revoked key was accepted for 2 s"
        await asyncio.sleep(0.02)
    assert await stock_served(read_path, product_id) == 7
    assert not tracker.listening
    assert tracker.known() is None
    versions = await tracker.current()
    assert versions is not None
    assert versions.data_version is None  # read for every request: no cache trusts it
    assert time.monotonic() - cut < BOUND_SECONDS


async def test_caching_resumes_once_the_link_is_back(cuttable: Cuttable) -> None:
    tracker = cuttable.tracker
    await cuttable.relay.cut(silent=True)
    cut = time.monotonic()
    while tracker.listening:
        assert time.monotonic() - cut < BOUND_SECONDS, "the silent cut went unnoticed"
        await asyncio.sleep(0.02)

    # Still cut after a few heartbeats' time: still down (reconnecting through the cut fails).
    await asyncio.sleep(3 * heartbeat.HEARTBEAT_SECONDS)
    assert not tracker.listening

    cuttable.relay.heal()
    healed = time.monotonic()
    while not tracker.listening:
        assert time.monotonic() - healed < RESUME_SECONDS, "not listening again after 5 s"
        await asyncio.sleep(0.02)
    first = await tracker.current()
    assert first is not None
    assert first.data_version is not None
    # Cached again: a change nobody announces is not seen (the notification is what tells).
    await cuttable.outsider.execute(
        "UPDATE instance_values SET value = 'unannounced' WHERE name = $1", freshness.AUTH
    )
    assert await tracker.current() == first
    # And the heartbeat runs on the new connection: it stays up.
    await asyncio.sleep(3 * heartbeat.HEARTBEAT_SECONDS)
    assert tracker.listening


async def test_heartbeats_are_not_changes(cuttable: Cuttable) -> None:
    """The heartbeat's notifications go to a channel of the connection's own: the caches stay
    valid while it beats."""
    tracker = cuttable.tracker
    before = await tracker.current()
    assert before is not None
    await asyncio.sleep(4 * heartbeat.HEARTBEAT_SECONDS)
    assert tracker.listening
    assert tracker.known() == before
