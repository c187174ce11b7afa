"""The ``idempotency_keys`` table: every statement on it outside the order batch's (which
claims, locks and stores its keys with its orders: ``orders/placement_repository.py``,
``orders/batch_repository.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage.bulk import dialect_insert
from commerce_api.storage.tables import idempotency_keys as keys


async def find(conn: AsyncConnection, scope: str, key: str, *, lock: bool = False) -> Any:
    """The key's row, or None (``lock``: locked until the transaction ends)."""
    query = select(keys).where(keys.c.scope == scope, keys.c.key == key)
    if lock:
        query = query.with_for_update()
    return (await conn.execute(query)).first()


async def insert_new(conn: AsyncConnection, values: Mapping[str, Any]) -> bool:
    """Insert the key's row unless the key has one (``ON CONFLICT DO NOTHING``: on PostgreSQL
    it waits for the commit of a transaction that inserted it); whether it was inserted."""
    inserted = await conn.execute(
        dialect_insert(conn)(keys)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["scope", "key"])
        .returning(keys.c.key)
    )
    return inserted.first() is not None


async def overwrite(conn: AsyncConnection, scope: str, key: str, values: Mapping[str, Any]) -> None:
    """Set the key's row to ``values``."""
    await conn.execute(
        update(keys).where(keys.c.scope == scope, keys.c.key == key).values(**values)
    )


async def replace_if_unchanged(conn: AsyncConnection, row: Any, values: Mapping[str, Any]) -> bool:
    """Set the key's row to ``values`` if it is still as ``row`` read it (its state and times);
    whether it was."""
    result = await conn.execute(
        update(keys)
        .where(
            keys.c.scope == row.scope,
            keys.c.key == row.key,
            keys.c.state == row.state,
            keys.c.locked_at == row.locked_at,
            keys.c.created_at == row.created_at,
        )
        .values(**values)
        .returning(keys.c.key)
    )
    return result.first() is not None


async def finish_claim(
    conn: AsyncConnection, scope: str, key: str, locked_at: datetime, values: Mapping[str, Any]
) -> None:
    """Store ``values`` in the key's row if it is still the in-flight claim made at
    ``locked_at``."""
    await conn.execute(
        update(keys)
        .where(
            keys.c.scope == scope,
            keys.c.key == key,
            keys.c.state == "in_flight",
            keys.c.locked_at == locked_at,
        )
        .values(**values)
    )


async def delete_created_before(conn: AsyncConnection, cutoff: datetime) -> int:
    """Delete the keys created before ``cutoff``; how many."""
    result = await conn.execute(delete(keys).where(keys.c.created_at < cutoff))
    return result.rowcount or 0
