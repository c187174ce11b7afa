"""``insert_returning``: one multi-row INSERT … ON CONFLICT DO NOTHING RETURNING, on both
backends, its values converted by the columns' own types."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from commerce_api.storage.bulk import insert_returning, insert_rows
from commerce_api.storage.db import Database
from commerce_api.storage.tables import idempotency_keys as keys

WHEN = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)


def claim(key: str, minutes: int = 0) -> dict[str, object]:
    at = WHEN + timedelta(minutes=minutes)
    return {
        "scope": "acct_insert",
        "key": key,
        "fingerprint": "f" * 64,
        "state": "in_flight",
        "locked_at": at,
        "created_at": at,
    }


async def claim_all(db: Database, rows: list[dict[str, object]]) -> set[tuple[str, str]]:
    async with db.write_batch() as conn:
        inserted = await insert_returning(
            conn, keys, rows, conflict=["scope", "key"], returning=["scope", "key"]
        )
    return {(scope, key) for scope, key in inserted}


async def test_returns_the_rows_inserted_and_skips_the_conflicting_ones(db: Database) -> None:
    assert await claim_all(db, []) == set()
    first = await claim_all(db, [claim("a", 1), claim("b", 2), claim("c", 3)])
    assert first == {("acct_insert", "a"), ("acct_insert", "b"), ("acct_insert", "c")}
    # same row count (the cached statement) and another (a statement of its own)
    assert await claim_all(db, [claim("b"), claim("d", 4), claim("a")]) == {("acct_insert", "d")}
    assert await claim_all(db, [claim("e", 5), claim("c")]) == {("acct_insert", "e")}
    async with db.read() as conn:
        stored = (await conn.execute(select(keys.c.key, keys.c.locked_at))).all()
    # each value in its own row and column, converted by the column's type
    assert sorted(stored) == [
        (key, WHEN + timedelta(minutes=minutes))
        for key, minutes in (("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5))
    ]


async def test_a_shared_timestamp_and_its_neighbours_each_keep_their_own_value(
    db: Database,
) -> None:
    """A timestamp column's processor remembers the object it converted last (a batch's rows
    share one ``now``): rows alternating between one shared object, equal copies of it and
    other instants each store their own value, in both bulk writers."""
    shared = WHEN
    instants = [shared, shared, WHEN + timedelta(seconds=1), shared, WHEN.replace(), shared]
    rows = [
        {**claim(f"t{index}"), "locked_at": at, "created_at": at}
        for index, at in enumerate(instants)
    ]
    await claim_all(db, rows[:3])
    async with db.write_batch() as conn:
        await insert_rows(conn, keys, rows[3:])
    async with db.read() as conn:
        found = (await conn.execute(select(keys.c.key, keys.c.created_at))).all()
    stored = {row.key: row.created_at for row in found}
    assert stored == {f"t{index}": at for index, at in enumerate(instants)}
