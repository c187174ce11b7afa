"""Queries of webhook endpoints: their settings, their secrets, their health, and which of
them an event goes to."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, bindparam, func, select, update
from sqlalchemy.engine import Row

from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import webhook_endpoints

endpoints = webhook_endpoints


def _live_endpoint(account_id: str) -> list[ColumnElement[bool]]:
    return [endpoints.c.account_id == account_id, endpoints.c.deleted_at.is_(None)]


async def insert_endpoint(conn: Executor, values: Mapping[str, Any]) -> None:
    await conn.execute(endpoints.insert().values(**values))


async def get_endpoint(conn: Executor, account_id: str, endpoint_id: str) -> Row[Any] | None:
    result = await conn.execute(
        select(endpoints).where(endpoints.c.id == endpoint_id, *_live_endpoint(account_id))
    )
    return result.first()


async def count_endpoints(conn: Executor, account_id: str) -> int:
    query = select(func.count()).select_from(endpoints).where(*_live_endpoint(account_id))
    return int(await conn.scalar(query) or 0)


async def page_endpoints(
    conn: Executor, account_id: str, limit: int, offset: int
) -> list[Row[Any]]:
    result = await conn.execute(
        select(endpoints)
        .where(*_live_endpoint(account_id))
        .order_by(endpoints.c.created_at, endpoints.c.id)
        .limit(limit)
        .offset(offset)
    )
    return list(result.all())


async def update_endpoint(
    conn: Executor, account_id: str, endpoint_id: str, values: Mapping[str, Any]
) -> bool:
    result = await conn.execute(
        update(endpoints)
        .where(endpoints.c.id == endpoint_id, *_live_endpoint(account_id))
        .values(**values)
        .returning(endpoints.c.id)
    )
    return result.first() is not None


async def mark_failing(conn: Executor, endpoint_id: str, now: datetime) -> datetime:
    """Note a failed attempt: the endpoint is failing since ``now`` unless it already was.
    Returns since when (read under the row's lock, so concurrent attempts agree)."""
    result = await conn.execute(
        update(endpoints)
        .where(endpoints.c.id == endpoint_id)
        .values(failing_since=func.coalesce(endpoints.c.failing_since, now))
        .returning(endpoints.c.failing_since)
    )
    since: datetime = result.scalar_one()
    return since


async def mark_healthy(conn: Executor, endpoint_id: str) -> None:
    """Note a successful attempt: the endpoint is no longer failing."""
    await conn.execute(
        update(endpoints)
        .where(endpoints.c.id == endpoint_id, endpoints.c.failing_since.is_not(None))
        .values(failing_since=None)
    )


async def disable_endpoint(conn: Executor, endpoint_id: str, reason: str) -> None:
    """Disable the endpoint. Its pending deliveries stay pending (no dispatcher claims them
    meanwhile) and resume when it is re-enabled; this touches no delivery row, so it never
    waits on one an attempt holds."""
    await conn.execute(
        update(endpoints)
        .where(endpoints.c.id == endpoint_id, endpoints.c.enabled.is_(True))
        .values(enabled=False, disabled_reason=reason)
    )


async def stored_secrets(conn: Executor) -> list[Row[Any]]:
    """Every endpoint's encrypted secrets (deleted endpoints' included)."""
    query = select(
        endpoints.c.id, endpoints.c.secret_encrypted, endpoints.c.previous_secret_encrypted
    )
    return list((await conn.execute(query)).all())


async def replace_secret(conn: Executor, endpoint_id: str, column: str, old: str, new: str) -> None:
    """Write ``new`` in ``column`` only if it still holds ``old`` (a rotation since wins)."""
    await conn.execute(
        update(endpoints)
        .where(endpoints.c.id == endpoint_id, endpoints.c[column] == old)
        .values({column: new})
    )


async def subscribed_endpoints(conn: Executor, account_id: str, event_type: str) -> list[str]:
    """Enabled endpoints of the account that want this event type."""
    return (await subscribers(conn, [account_id], event_type)).get(account_id, [])


_SUBSCRIBERS = select(endpoints.c.id, endpoints.c.account_id, endpoints.c.event_types).where(
    endpoints.c.account_id.in_(bindparam("accounts", expanding=True)),
    endpoints.c.deleted_at.is_(None),
    endpoints.c.enabled.is_(True),
)


async def subscribers(
    conn: Executor, account_ids: Collection[str], event_type: str
) -> dict[str, list[str]]:
    """Per account, its enabled endpoints that want this event type (one query for all)."""
    result = await conn.execute(_SUBSCRIBERS, {"accounts": sorted(account_ids)})
    found: dict[str, list[str]] = {}
    for row in result:
        if subscribes(row.event_types, event_type):
            found.setdefault(row.account_id, []).append(row.id)
    return found


def subscribes(event_types: list[str] | None, event_type: str) -> bool:
    """Whether an endpoint with these event types wants ``event_type`` ([] means every type)."""
    return not event_types or event_type in event_types
