"""UTCDateTime: timezone-aware UTC in Python on both backends, exact to the microsecond."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select
from sqlalchemy.exc import StatementError

from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.storage.db import Database
from commerce_api.storage.tables import accounts


async def _store(db: Database, created_at: datetime) -> str:
    account_id = new_id("acct")
    async with db.write() as conn:
        await conn.execute(
            accounts.insert().values(
                id=account_id, name="Clock", tier="development", created_at=created_at
            )
        )
    return account_id


async def _load(db: Database, account_id: str) -> datetime:
    async with db.read() as conn:
        value = await conn.scalar(select(accounts.c.created_at).where(accounts.c.id == account_id))
    assert isinstance(value, datetime)
    return value


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 21, 8, 12, 41, 123456, tzinfo=UTC),
        datetime(2026, 11, 21, 8, 12, 41, 1, tzinfo=UTC),
        datetime(2026, 11, 21, 8, 12, 41, 999999, tzinfo=UTC),
        datetime(2026, 11, 21, 8, 12, 41, tzinfo=UTC),
        datetime(2000, 2, 29, 23, 59, 59, 500000, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
    ],
)
async def test_aware_utc_datetime_round_trips_exactly(db: Database, moment: datetime) -> None:
    loaded = await _load(db, await _store(db, moment))
    assert loaded == moment
    assert loaded.microsecond == moment.microsecond
    assert loaded.tzinfo is not None
    assert loaded.utcoffset() == timedelta(0)


async def test_other_zones_are_stored_as_the_same_instant_in_utc(db: Database) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    moment = datetime(2026, 11, 21, 13, 42, 41, 654321, tzinfo=india)
    loaded = await _load(db, await _store(db, moment))
    assert loaded == moment
    assert loaded.utcoffset() == timedelta(0)
    assert loaded.replace(tzinfo=None) == datetime(2026, 11, 21, 8, 12, 41, 654321)


async def test_utcnow_round_trips(db: Database) -> None:
    moment = utcnow()
    loaded = await _load(db, await _store(db, moment))
    assert loaded == moment
    assert format_timestamp(loaded) == format_timestamp(moment)


async def test_naive_datetime_is_refused(db: Database) -> None:
    with pytest.raises(StatementError, match="naive datetime") as info:
        await _store(db, datetime(2026, 11, 21, 8, 12, 41))
    assert isinstance(info.value.orig, ValueError)
    async with db.read() as conn:
        assert (await conn.execute(select(accounts.c.id))).first() is None


async def test_database_order_is_time_order(db: Database) -> None:
    base = datetime(2026, 11, 21, 8, 0, 0, tzinfo=UTC)
    moments = [
        base + timedelta(microseconds=1),
        base,
        base + timedelta(seconds=1),
        base + timedelta(microseconds=999_999),
        base - timedelta(days=400),
        base + timedelta(microseconds=10),
    ]
    for moment in moments:
        await _store(db, moment)
    async with db.read() as conn:
        stored: list[datetime] = list(
            (await conn.execute(select(accounts.c.created_at).order_by(accounts.c.created_at)))
            .scalars()
            .all()
        )
    assert stored == sorted(moments)


def test_format_timestamp() -> None:
    moment = datetime(2026, 11, 21, 8, 12, 41, 123999, tzinfo=UTC)
    assert format_timestamp(moment) == "2026-11-21T08:12:41.123Z"
    india = timezone(timedelta(hours=5, minutes=30))
    assert format_timestamp(moment.astimezone(india)) == "2026-11-21T08:12:41.123Z"
    assert format_timestamp(moment.replace(microsecond=0)) == "2026-11-21T08:12:41.000Z"
