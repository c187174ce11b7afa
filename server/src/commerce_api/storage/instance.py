"""Instance-wide values the service keeps for itself (``instance_values``): the sandbox's
secret-encryption key and the read path's version stamps."""

from __future__ import annotations

from sqlalchemy import select

from commerce_api.core.timestamps import utcnow
from commerce_api.storage.bulk import dialect_insert
from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import instance_values


async def ensure_value(conn: Executor, name: str, value: str) -> str:
    """``name``'s value, set to ``value`` first if it has none (safe against a concurrent
    first writer: whoever inserts first wins, and everyone reads that)."""
    await conn.execute(
        dialect_insert(conn)(instance_values)
        .values(name=name, value=value, created_at=utcnow())
        .on_conflict_do_nothing(index_elements=["name"])
    )
    stored = await conn.scalar(
        select(instance_values.c.value).where(instance_values.c.name == name)
    )
    assert stored is not None
    return str(stored)


async def set_value(conn: Executor, name: str, value: str) -> None:
    await conn.execute(
        dialect_insert(conn)(instance_values)
        .values(name=name, value=value, created_at=utcnow())
        .on_conflict_do_update(index_elements=["name"], set_={"value": value})
    )
