"""Queries of the console's sessions: one row per signed-in browser, for an admin key."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.storage.tables import api_keys, console_sessions


async def insert_session(
    conn: AsyncConnection, *, token_hash: str, key_id: str, now: datetime
) -> None:
    await conn.execute(
        console_sessions.insert().values(
            token_hash=token_hash, key_id=key_id, created_at=now, last_seen_at=now
        )
    )


async def session_with_key(conn: AsyncConnection, token_hash: str) -> Row[Any] | None:
    """The session and the current state of its key (role, account, revocation)."""
    result = await conn.execute(
        select(
            console_sessions.c.key_id,
            console_sessions.c.last_seen_at,
            api_keys.c.account_id,
            api_keys.c.role,
            api_keys.c.revoked_at,
        )
        .join(api_keys, api_keys.c.id == console_sessions.c.key_id)
        .where(console_sessions.c.token_hash == token_hash)
    )
    return result.first()


async def touch_session(conn: AsyncConnection, token_hash: str, now: datetime) -> None:
    await conn.execute(
        update(console_sessions)
        .where(console_sessions.c.token_hash == token_hash)
        .values(last_seen_at=now)
    )


async def delete_session(conn: AsyncConnection, token_hash: str) -> None:
    await conn.execute(delete(console_sessions).where(console_sessions.c.token_hash == token_hash))


async def delete_idle_sessions(conn: AsyncConnection, seen_before: datetime) -> int:
    result = await conn.execute(
        delete(console_sessions).where(console_sessions.c.last_seen_at < seen_before)
    )
    return int(result.rowcount or 0)
