"""Queries for the audit trail (``audit_events``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.engine import Row

from commerce_api.core.pagination import NewestFirst
from commerce_api.storage import keyset
from commerce_api.storage.bulk import copy_rows, insert_rows
from commerce_api.storage.executor import Executor

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection
from commerce_api.storage.tables import audit_events


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which audit rows a list shows: of a target, by an actor, of an action, in a window."""

    target_id: str | None
    actor_id: str | None
    action: str | None
    chosen: NewestFirst

    def conditions(self) -> list[ColumnElement[bool]]:
        conditions = keyset.window(audit_events, self.chosen)
        if self.target_id is not None:
            conditions.append(audit_events.c.target_id == self.target_id)
        if self.actor_id is not None:
            conditions.append(audit_events.c.actor_id == self.actor_id)
        if self.action is not None:
            conditions.append(audit_events.c.action == self.action)
        return conditions


async def insert(conn: Executor, rows: Sequence[Mapping[str, Any]]) -> None:
    """Audit rows (dicts with the same keys), one executemany however many."""
    await insert_rows(conn, audit_events, rows)


async def copy_in(conn: Executor, rows: Sequence[Mapping[str, Any]]) -> None:
    """Many audit rows in bulk: ``COPY`` on PostgreSQL, one executemany on SQLite."""
    await copy_rows(conn, audit_events, rows)


async def get(conn: AsyncConnection, audit_id: str) -> Row[Any] | None:
    query = select(audit_events).where(audit_events.c.id == audit_id)
    return (await conn.execute(query)).first()


async def count(conn: AsyncConnection, wanted: AuditFilter) -> int:
    query = select(func.count()).select_from(audit_events).where(*wanted.conditions())
    return int(await conn.scalar(query) or 0)


async def page(
    conn: AsyncConnection, wanted: AuditFilter, limit: int, offset: int
) -> list[Row[Any]]:
    """A page of the audit rows, newest first (the indexes ``ix_audit_events_*_order``)."""
    result = await conn.execute(
        select(audit_events)
        .where(*wanted.conditions())
        .order_by(*keyset.newest_first(audit_events))
        .limit(limit)
        .offset(offset)
    )
    return list(result.all())


async def of_target(conn: AsyncConnection, target_id: str, limit: int) -> list[Row[Any]]:
    """A target's audit rows, oldest first (at most ``limit``, the newest ones)."""
    rows = await page(conn, AuditFilter(target_id, None, None, NewestFirst()), limit, 0)
    return rows[::-1]


async def delete_before(conn: AsyncConnection, cutoff: datetime) -> int:
    """Delete the audit rows created before ``cutoff``; how many."""
    result = await conn.execute(delete(audit_events).where(audit_events.c.created_at < cutoff))
    return result.rowcount or 0
