"""Taking over an abandoned ``Idempotency-Key`` claim (``idempotency.claim``) must never run a
request a second time.

The race found in review: a retry reads the key's row as in flight with its lease expired, and
before its take-over UPDATE the first request finishes and records its response. The UPDATE
matched on scope, key, ``locked_at`` and ``created_at`` — none of which recording changes — so it
reset the finished row and the retry ran the request again (a second order, a second endpoint).
The take-over now also matches the state it read, and a retry that loses the race replays the
response the first request stored.

On SQLite the claim's transaction holds the write lock from its read to its update, so the race
cannot happen there; the row-level test runs on both backends, the race itself on PostgreSQL,
where another connection can finish the first request in between.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from commerce_api.core.timestamps import utcnow
from commerce_api.idempotency import service as idempotency
from commerce_api.idempotency.service import StoredResponse
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.tables import idempotency_keys as keys
from tests.http.test_idempotency import insert_key_row

SCOPE, KEY, PRINT = "acct_race", "race", "f" * 64
BOX = SecretBox("a test key for the idempotency race, long enough")
FIRST_BODY = b'{"placed_by": "the first request"}'


async def abandoned_claim(db: Database) -> None:
    """An in-flight claim whose lease has run out (its request looks dead)."""
    await insert_key_row(db, SCOPE, KEY, PRINT, age=idempotency.LEASE + timedelta(seconds=5))


async def finish_first_request(db: Database) -> None:
    """What the first request's ``idempotency.record`` does when it commits at last."""
    async with db.write() as conn:
        await conn.execute(
            update(keys)
            .where(keys.c.scope == SCOPE, keys.c.key == KEY)
            .values(
                **idempotency.stored_values(
                    201, {"content-type": "application/json"}, FIRST_BODY, BOX
                )
            )
        )


async def the_row(db: Database) -> Any:
    async with db.read() as conn:
        return (await conn.execute(select(keys))).one()


async def test_a_take_over_does_not_reset_a_row_that_finished_since_it_was_read(
    db: Database,
) -> None:
    await abandoned_claim(db)
    stale_read = await the_row(db)
    await finish_first_request(db)
    async with db.write() as conn:
        taken = await idempotency._take_over(conn, stale_read, PRINT, utcnow(), reset=False)
    assert not taken
    row = await the_row(db)
    assert (row.state, row.response_status) == ("done", 201)
    assert BOX.decrypt_bytes(row.response_body) == FIRST_BODY


async def test_a_retry_that_loses_the_race_to_the_first_request_replays_it(
    postgresql_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database(postgresql_database_url)
    try:
        await abandoned_claim(db)
        original_take_over = idempotency._take_over
        raced = False

        async def first_request_commits_before_the_take_over(*args: Any, **kwargs: Any) -> bool:
            nonlocal raced
            if not raced:  # between the retry's read of the row and its take-over
                raced = True
                await finish_first_request(db)
            return await original_take_over(*args, **kwargs)

        monkeypatch.setattr(idempotency, "_take_over", first_request_commits_before_the_take_over)
        keyed = idempotency.KeyedRequest(SCOPE, KEY, PRINT)
        outcome = await idempotency.claim(db, BOX, keyed)
        assert raced
        assert isinstance(outcome, StoredResponse), "the retry must not run the request again"
        assert outcome.body == FIRST_BODY
        assert outcome.headers[idempotency.REPLAYED_HEADER.lower()] == "true"
        row = await the_row(db)
        assert (row.state, row.response_status) == ("done", 201)
    finally:
        await db.dispose()
