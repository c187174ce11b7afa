"""A PostgreSQL batch whose unlocked read turned out stale decides again under the locks.

The usual batch locks its products, checks them and writes in one statement
(``batch_repository.place_and_finish``), which writes nothing when the locked rows differ from
the read: the batch then decides again on the rows it got back, still locked. A batch that
found key rows writes under a savepoint first, and rolling back to it gives up the row locks
taken after it, so it must lock its products again before it plans anew: otherwise another
process may take the stock between the new plan and its write (the check constraint would
then fail the whole batch). The stock's notification is sent by the statement that takes the
stock for good.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import APIError
from commerce_api.idempotency.service import KeyedRequest
from commerce_api.orders import batch_repository, placement_repository
from commerce_api.orders.batch_plan import OrderRequest, PlacementResult, Result
from commerce_api.orders.placement import place_batch
from commerce_api.storage import freshness
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database, Executor
from tests import factories

pytestmark = pytest.mark.postgresql


@pytest.mark.parametrize("found_key", [False, True], ids=["usual batch", "a key row found"])
async def test_a_batch_that_decides_again_holds_its_products_locked_until_it_writes(
    postgresql_database_url: str, monkeypatch: pytest.MonkeyPatch, found_key: bool
) -> None:
    box = SecretBox("placement locks test key")
    async with factories.opened(postgresql_database_url) as db:
        customer = await factories.new_customer(db, "Relock")
        account_id = customer.principal.account_id
        assert account_id is not None
        product_id = await factories.new_product(db, stock=10)
        batch = [OrderRequest(customer.principal, factories.order_create((product_id, 3)))]
        if found_key:  # a retry of a keyed order placed before: its row is found, replayed
            retry = OrderRequest(
                customer.principal,
                factories.order_create((product_id, 1)),
                KeyedRequest(account_id, "placed-before", "print"),
            )
            async with db.write_batch() as conn:
                await place_batch(conn, [retry], currency="USD", secret_box=box)
            batch.append(retry)
        real_finish = batch_repository.finish_placed
        locked_at_finish: list[bool] = []

        async def finish_while_checking_the_lock(conn: Executor, *args: Any) -> None:
            locked_at_finish.append(await _locked_elsewhere(db, product_id))
            await real_finish(conn, *args)

        stale_read(monkeypatch, price_minor=1)  # a price changed since: the locked read differs
        monkeypatch.setattr(batch_repository, "finish_placed", finish_while_checking_the_lock)

        async with db.write_batch() as conn:
            results = await place_batch(conn, batch, currency="USD", secret_box=box)

        assert [getattr(result, "status", None) for result in results] == [201] * len(batch)
        assert locked_at_finish == [True]
        assert await _stock(db, product_id) == 7 - found_key


async def place_one(db: Database, principal: Principal, product_id: str, units: int) -> Result:
    """One order placed as a batch of its own."""
    async with db.write_batch() as conn:
        [result] = await place_batch(
            conn,
            [OrderRequest(principal, factories.order_create((product_id, units)))],
            currency="USD",
            secret_box=None,
        )
    return result


def stale_read(monkeypatch: pytest.MonkeyPatch, **changes: int) -> None:
    """The batch's unlocked read of the products sees ``changes`` added to their columns (as if
    another request changed them since); its locked reads see the truth."""
    real_stock_of = placement_repository.stock_of

    async def stale(conn: Executor, product_ids: set[str], *, lock: bool) -> list[Any]:
        rows = await real_stock_of(conn, product_ids, lock=lock)
        if lock:
            return rows
        return [
            SimpleNamespace(
                **{
                    **row._asdict(),
                    **{name: getattr(row, name) + n for name, n in changes.items()},
                }
            )
            for row in rows
        ]

    monkeypatch.setattr(placement_repository, "stock_of", stale)


@pytest.mark.parametrize(
    ("read_more", "units", "status", "left"),
    [
        (5, 3, 409, 2),  # read 7 while 2 are left: none taken, the order refused ("2 available")
        (-1, 2, 201, 0),  # read 1 while 2 are there: refused on the read, placed on the rows
    ],
    ids=["sold meanwhile", "restocked meanwhile"],
)
async def test_an_order_decided_on_a_stale_count_is_decided_again_on_the_locked_one(
    postgresql_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    read_more: int,
    units: int,
    status: int,
    left: int,
) -> None:
    async with factories.opened(postgresql_database_url) as db:
        customer = await factories.new_customer(db, "Stale count")
        product_id = await factories.new_product(db, stock=2)
        stale_read(monkeypatch, inventory_count=read_more)

        result = await place_one(db, customer.principal, product_id, units)

        assert result.status == status
        if isinstance(result, APIError):
            assert "2 available" in result.message
        assert await _stock(db, product_id) == left
        async with db.read() as conn:
            assert await conn.scalar(text("SELECT count(*) FROM orders")) == (status == 201)


async def test_the_stock_notification_of_a_batch_decided_again_is_sent_at_the_commit(
    postgresql_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with factories.opened(postgresql_database_url) as db:
        customer = await factories.new_customer(db, "Told")
        product_id = await factories.new_product(db, stock=10)
        stale_read(monkeypatch, price_minor=1)
        heard: asyncio.Queue[str] = asyncio.Queue()
        async with db.engine.connect() as listening:
            raw = (await listening.get_raw_connection()).driver_connection
            assert raw is not None
            await raw.add_listener(freshness.CHANNEL, lambda *args: heard.put_nowait(args[-1]))
            result = await place_one(db, customer.principal, product_id, 3)
            assert isinstance(result, PlacementResult)
            assert result.status == 201
            assert await asyncio.wait_for(heard.get(), timeout=5) == freshness.STOCK
        assert await _stock(db, product_id) == 7


async def _locked_elsewhere(db: Database, product_id: str) -> bool:
    """Whether another connection finds the product's row locked as for a stock change (the
    lines' foreign keys hold only a key-share lock, which this does not wait for)."""
    async with db.engine.connect() as other:
        try:
            await other.execute(
                text("SELECT id FROM products WHERE id = :id FOR NO KEY UPDATE NOWAIT"),
                {"id": product_id},
            )
        except DBAPIError as exc:
            return "could not obtain lock" in str(exc)
        finally:
            await other.rollback()
        return False


async def _stock(db: Database, product_id: str) -> int:
    async with db.read() as conn:
        count = await conn.scalar(
            text("SELECT inventory_count FROM products WHERE id = :id"), {"id": product_id}
        )
    return int(count)
