"""Reading the audit trail in tests."""

from __future__ import annotations

from typing import Any

from commerce_api.audit import service as audit
from commerce_api.storage.db import Database


async def trail(db: Database, **filters: Any) -> list[dict[str, Any]]:
    """The audit rows (as the API renders them), oldest first, filtered like the list."""
    async with db.read() as conn:
        page = await audit.list_audit_events(conn, limit=100, offset=0, **filters)
    rows: list[dict[str, Any]] = page["data"]
    return rows[::-1]


def by(row: dict[str, Any]) -> tuple[str, str]:
    return row["actor"]["type"], row["actor"]["id"]


def key_actor(key_id: str) -> tuple[str, str]:
    return "key", key_id
