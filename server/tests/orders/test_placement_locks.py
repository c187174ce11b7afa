"""A PostgreSQL batch whose unlocked read turned out stale decides again under the locks.

Rolling back to a savepoint gives up the row locks taken after it, so the batch must lock its
products again before it plans anew: otherwise another process may take the stock between the
new plan and its write (the check constraint would then fail the whole batch).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from commerce_api.orders import repository
from commerce_api.orders.placement import OrderRequest, PlacementResult, place_batch
from commerce_api.storage.db import Database, Executor
from tests import factories

pytestmark = pytest.mark.postgresql


async def test_a_batch_that_decides_again_holds_its_products_locked_until_it_writes(
    postgresql_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with factories.opened(postgresql_database_url) as db:
        customer = await factories.new_customer(db, "Relock")
        product_id = await factories.new_product(db, stock=10)
        real_stock_of = repository.stock_of
        real_finish = repository.finish_placed
        locked_at_finish: list[bool] = []

        async def stale_unlocked_read(
            conn: Executor, product_ids: set[str], *, lock: bool
        ) -> list[Any]:
            rows = await real_stock_of(conn, product_ids, lock=lock)
            if lock:
                return rows
            # A price another request changed since: the locked read will differ.
            return [
                SimpleNamespace(**{**row._asdict(), "price_minor": row.price_minor + 1})
                for row in rows
            ]

        async def finish_while_checking_the_lock(conn: Executor, *args: Any) -> None:
            locked_at_finish.append(await _locked_elsewhere(db, product_id))
            await real_finish(conn, *args)

        monkeypatch.setattr(repository, "stock_of", stale_unlocked_read)
        monkeypatch.setattr(repository, "finish_placed", finish_while_checking_the_lock)

        async with db.write_batch() as conn:
            [result] = await place_batch(
                conn,
                [OrderRequest(customer.principal, factories.order_create((product_id, 3)))],
                currency="USD",
                secret_box=None,
            )

        assert isinstance(result, PlacementResult)
        assert result.status == 201
        assert locked_at_finish == [True]
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
