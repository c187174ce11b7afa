"""The statements a batch of orders runs (``placement.py`` decides): the stock it reads and
takes, the ``Idempotency-Key`` rows it reads and stores, the orders it writes, the savepoint it
may roll back to. SQLite runs only these; PostgreSQL most of its writes as the one or two
statements of ``batch_repository``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Row

from commerce_api.storage import freshness
from commerce_api.storage.bulk import execute_many, insert_rows
from commerce_api.storage.db import Executor
from commerce_api.storage.tables import audit_events, order_items, orders, products
from commerce_api.storage.tables import idempotency_keys as keys


async def insert_orders(
    conn: Executor,
    new_orders: Sequence[Mapping[str, Any]],
    lines: Sequence[Mapping[str, Any]],
    trail: Sequence[Mapping[str, Any]] = (),
) -> None:
    """New orders, their lines and their audit rows, one statement each however many."""
    await insert_rows(conn, orders, new_orders)
    await insert_rows(conn, order_items, lines)
    await insert_rows(conn, audit_events, trail)


# The batch's reads, built once (a select built per batch costs more than running it).
_STOCK = (
    select(products.c.id, products.c.inventory_count, products.c.name, products.c.price_minor)
    .where(products.c.id.in_(bindparam("ids", expanding=True)), products.c.archived_at.is_(None))
    .order_by(products.c.id)
)
# FOR NO KEY UPDATE, the lock the stock's UPDATE takes: unlike FOR UPDATE, it does not wait for
# the key-share locks other batches' order lines take on the product (their foreign key), which
# would make two batches wait on each other in a cycle.
_STOCK_LOCKED = _STOCK.with_for_update(key_share=True)


async def stock_of(conn: Executor, product_ids: set[str], *, lock: bool) -> list[Row[Any]]:
    """The stock, name and price of the active products among ``product_ids``, in id order
    (``lock``: locked until the commit — PostgreSQL; SQLite's write transaction already
    excludes every other writer)."""
    if not product_ids:
        return []
    query = _STOCK_LOCKED if lock else _STOCK
    return list((await conn.execute(query, {"ids": sorted(product_ids)})).all())


_TAKE_STOCK = (
    update(products)
    .where(products.c.id == bindparam("product"))
    .values(inventory_count=products.c.inventory_count - bindparam("units"))
)


async def take_stock(conn: Executor, taken: Sequence[tuple[str, int]]) -> None:
    """Take ``(product_id, units)`` from stock: one decrement per product, in one executemany
    (the rows locked already)."""
    await execute_many(conn, _TAKE_STOCK, [{"product": pid, "units": n} for pid, n in taken])
    if taken:
        await freshness.touch(conn, freshness.STOCK)


# Two plain IN lists: cheaper to run than a list of pairs; the pairs are sifted.
_KEY_ROWS = (
    select(keys)
    .where(
        keys.c.scope.in_(bindparam("scopes", expanding=True)),
        keys.c.key.in_(bindparam("keys", expanding=True)),
    )
    .order_by(keys.c.scope, keys.c.key)
)
_KEY_ROWS_LOCKED = _KEY_ROWS.with_for_update()


async def key_rows(
    conn: Executor, wanted: set[tuple[str, str]], *, lock: bool
) -> dict[tuple[str, str], Any]:
    """The ``Idempotency-Key`` rows of these ``(scope, key)`` pairs that exist, by pair
    (``lock``: locked until the commit, in key order)."""
    if not wanted:
        return {}
    lists = {
        "scopes": sorted({scope for scope, _ in wanted}),
        "keys": sorted({key for _, key in wanted}),
    }
    rows = (await conn.execute(_KEY_ROWS_LOCKED if lock else _KEY_ROWS, lists)).all()
    return {(row.scope, row.key): row for row in rows if (row.scope, row.key) in wanted}


KEY_OUTCOME = (
    *("fingerprint", "state", "locked_at", "created_at"),
    *("response_status", "response_headers", "response_body"),
)
_STORE_OUTCOME = (
    update(keys)
    .where(keys.c.scope == bindparam("match_scope"), keys.c.key == bindparam("match_key"))
    .values({name: bindparam(f"new_{name}") for name in KEY_OUTCOME})
)


async def store_key_outcomes(
    conn: Executor, outcomes: Sequence[Mapping[str, Any]], with_row: set[tuple[str, str]]
) -> None:
    """The keys' rows with their outcomes: updated where one exists (``with_row``: claimed by
    the batch, or found), inserted where none does (a new key on SQLite)."""
    changed = [
        {
            **{f"new_{name}": row[name] for name in KEY_OUTCOME},
            "match_scope": row["scope"],
            "match_key": row["key"],
        }
        for row in outcomes
        if (row["scope"], row["key"]) in with_row
    ]
    await execute_many(conn, _STORE_OUTCOME, changed)
    new = [row for row in outcomes if (row["scope"], row["key"]) not in with_row]
    await insert_rows(conn, keys, new)


# The batch's savepoint (PostgreSQL): its decisions are undone if the locked rows differ.
async def begin_savepoint(conn: Executor) -> None:
    await conn.exec_driver_sql("SAVEPOINT placement")


async def rollback_to_savepoint(conn: Executor) -> None:
    await conn.exec_driver_sql("ROLLBACK TO SAVEPOINT placement")
