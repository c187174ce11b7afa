"""The overview's figures, read from the database: orders and revenue per hour (last 24 hours)
and per day (last 30 days), pending orders, low-stock products, endpoints failing now, the
webhook outbox's backlog.

Hours and days are UTC. Every order placed counts in the orders; the revenue sums the totals
of orders not canceled (pending and fulfilled) in the shop's currency (``COMMERCE_CURRENCY``;
orders placed under another one, before a change of it, are counted but not summed).

Every query is bounded and on an index. The orders' figures come from two places: the closed
hours from ``order_hour_figures`` (a rollup, at most 720 rows), the rest from one range scan of
``ix_orders_created_figures`` grouped by hour in SQL; the days are summed from the hours here.
An hour is closed once it ended over an hour ago (no order being placed can still land in it)
and no order in it is pending: fulfilled and canceled are final and orders are never deleted
nor moved, so its figures never change again. The first overview that finds hours newly closed
scans them once and keeps them (a write, about once an hour); with pending orders expiring
after a day (``COMMERCE_PENDING_ORDER_TTL_SECONDS``), the scan covers about the last day
(docs/performance.md, "Console overview").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.console.repository import overview
from commerce_api.settings import Settings
from commerce_api.storage.db import Database

HOURS = 24
DAYS = 30
LIST_SIZE = 10  # low-stock products and failing endpoints shown (and how many in all)
SETTLING = timedelta(hours=1)  # an hour closes no sooner than this after its end


@dataclass(frozen=True, slots=True)
class Point:
    start: datetime
    label: str
    tick: str
    orders: int
    revenue_minor: int


@dataclass(frozen=True, slots=True)
class Figures:
    """Everything the overview reads from the database."""

    now: datetime
    hours: list[Point]  # the last 24 hours, oldest first, this hour last
    days: list[Point]  # the last 30 days, oldest first, today last
    pending_orders: int
    low_stock: list[Any]
    low_stock_total: int
    failing_endpoints: list[Any]
    failing_total: int
    outbox_pending: int
    outbox_oldest_due: datetime | None

    @property
    def outbox_oldest_due_seconds(self) -> float:
        """How long the most overdue pending delivery has been due; 0 when none is due yet."""
        if self.outbox_oldest_due is None:
            return 0.0
        return max(0.0, (self.now - self.outbox_oldest_due).total_seconds())


def _hour(value: object) -> datetime:
    """A group's hour as the backend gives it: a datetime (PostgreSQL's ``date_trunc``, or the
    rollup's column), or SQLite's ``YYYY-MM-DD HH`` text."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    text = str(value)
    return datetime(int(text[:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), tzinfo=UTC)


def _floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _series(rows: Iterable[Any], now: datetime, currency: str) -> tuple[list[Point], list[Point]]:
    """The hours and days of the figures, from rows ``(hour, currency, orders, revenue_minor)``."""
    by_hour: dict[datetime, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        figures = by_hour[_hour(row.hour)]
        figures[0] += int(row.orders)
        if row.currency == currency:
            figures[1] += int(row.revenue_minor or 0)
    this_hour = _floor_hour(now)
    hours = []
    for back in range(HOURS - 1, -1, -1):
        start = this_hour - timedelta(hours=back)
        orders, revenue = by_hour.get(start, (0, 0))
        tick = f"{start:%H}h" if start.hour % 6 == 0 else ""
        hours.append(Point(start, f"{start:%Y-%m-%d %H}:00 UTC", tick, orders, revenue))
    by_day: dict[datetime, list[int]] = defaultdict(lambda: [0, 0])
    for start, (orders, revenue) in by_hour.items():
        day = by_day[start.replace(hour=0)]
        day[0] += orders
        day[1] += revenue
    today = this_hour.replace(hour=0)
    days = []
    for back in range(DAYS - 1, -1, -1):
        start = today - timedelta(days=back)
        orders, revenue = by_day.get(start, (0, 0))
        tick = f"{start:%d %b}" if back % 7 == 0 else ""
        days.append(Point(start, f"{start:%Y-%m-%d} (UTC)", tick, orders, revenue))
    return hours, days


def _to_close(
    until: datetime | None, oldest_pending: datetime | None, now: datetime, first_day: datetime
) -> tuple[datetime, datetime] | None:
    """The hours closed since the rollup was last extended, ``[start, end)``; None if none."""
    closed = _floor_hour(now) - SETTLING
    if oldest_pending is not None:
        closed = min(closed, _floor_hour(oldest_pending))  # a pending order holds its hour open
    start = first_day if until is None else max(until, first_day)
    return None if start >= closed else (start, closed)


async def _close(db: Database, start: datetime, end: datetime, first_day: datetime) -> None:
    """Keep the figures of the hours ``[start, end)``, now closed, in the rollup."""
    async with db.read() as conn:
        rows = await overview.orders_per_hour(conn, start, end)
    new = [
        {
            "hour": _hour(row.hour),
            "currency": row.currency,
            "orders": int(row.orders),
            "revenue_minor": int(row.revenue_minor or 0),
        }
        for row in rows
    ]
    async with db.write() as conn:
        await overview.close_hours(conn, new, end, first_day - timedelta(days=1))


async def _hour_rows(
    conn: AsyncConnection, until: datetime | None, first_day: datetime, next_hour: datetime
) -> list[Any]:
    """The rows of the 30 days' hours: the closed ones from the rollup, the rest scanned."""
    live_from = first_day if until is None else min(max(until, first_day), next_hour)
    closed = await overview.closed_hours(conn, first_day, live_from)
    return [*closed, *await overview.orders_per_hour(conn, live_from, next_hour)]


async def overview_figures(db: Database, settings: Settings, now: datetime) -> Figures:
    """Every figure of the overview (what ``bench/overview.py`` times): one read transaction,
    and when hours have closed since the rollup was extended, that first and one more."""
    this_hour = _floor_hour(now)
    first_day = (this_hour - timedelta(days=DAYS - 1)).replace(hour=0)
    next_hour = this_hour + timedelta(hours=1)
    async with db.read() as conn:
        until = await overview.closed_hours_until(conn)
        oldest_pending = await overview.oldest_pending_order(conn)
        closing = _to_close(until, oldest_pending, now, first_day)
        rows = [] if closing else await _hour_rows(conn, until, first_day, next_hour)
        pending = await overview.count_pending_orders(conn)
        low, low_total = await overview.low_stock(conn, settings.low_stock_threshold, LIST_SIZE)
        failing, failing_total = await overview.failing_endpoints(conn, LIST_SIZE)
        backlog, oldest_due = await overview.outbox_backlog(conn)
    if closing is not None:
        await _close(db, *closing, first_day)
        async with db.read() as conn:
            rows = await _hour_rows(conn, closing[1], first_day, next_hour)
    hours, days = _series(rows, now, settings.currency)
    return Figures(
        now=now,
        hours=hours,
        days=days,
        pending_orders=pending,
        low_stock=low,
        low_stock_total=low_total,
        failing_endpoints=failing,
        failing_total=failing_total,
        outbox_pending=backlog,
        outbox_oldest_due=oldest_due,
    )
