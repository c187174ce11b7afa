"""The console's first page: the shop at a glance, read from the database — orders and revenue
per hour (last 24 hours) and per day (last 30 days) as charts and tables, pending orders,
low-stock products, endpoints failing now, the webhook outbox's backlog — and two figures of
``/metrics`` (rate-limit rejections and 5xx responses, since the service started).

Hours and days are UTC. Every order placed counts in the orders; the revenue sums the totals
of orders not canceled (pending and fulfilled) in the shop's currency (``COMMERCE_CURRENCY``;
orders placed under another one, before a change of it, are counted but not summed). Each
query is bounded and on an index; the orders' is one range scan over at most 30 days, grouped
by hour in SQL, the days summed from the hours here (docs/performance.md, "Console overview").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from fastapi import Request
from prometheus_client.parser import text_string_to_metric_families
from starlette.responses import Response

from commerce_api.console import repository
from commerce_api.console.charts import Bar, bar_chart
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import render
from commerce_api.core.money import MINOR_PER_MAJOR
from commerce_api.core.timestamps import utcnow
from commerce_api.http.dependencies import ServicesDep
from commerce_api.observability import metrics
from commerce_api.settings import Settings
from commerce_api.storage.db import Database

HOURS = 24
DAYS = 30
LIST_SIZE = 10  # low-stock products and failing endpoints shown (and how many in all)


def _metric_sums(text: str) -> dict[str, float]:
    """What the overview shows of the ``/metrics`` text."""
    sums = {"rejected_key": 0.0, "rejected_ip": 0.0, "server_errors": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "commerce_rate_limit_rejections_total":
                sums[f"rejected_{sample.labels.get('caller')}"] = sample.value
            elif sample.name == "commerce_http_requests_total" and sample.labels.get(
                "status", ""
            ).startswith("5"):
                sums["server_errors"] += sample.value
    return sums


def _hour(value: object) -> datetime:
    """A group's hour as the backend gives it: PostgreSQL's ``timestamp`` (UTC, no zone), or
    SQLite's ``YYYY-MM-DD HH`` text (a ``T`` there would do as well)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    text = str(value)
    return datetime(int(text[:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), tzinfo=UTC)


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


def _series(rows: list[Any], now: datetime) -> tuple[list[Point], list[Point]]:
    by_hour = {_hour(row.hour): (int(row.orders), int(row.revenue_minor or 0)) for row in rows}
    this_hour = now.replace(minute=0, second=0, microsecond=0)
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


async def overview_figures(db: Database, settings: Settings, now: datetime) -> Figures:
    """Every figure of the overview from the database, in one read transaction (what
    ``bench/overview.py`` times)."""
    first_day = (now - timedelta(days=DAYS - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    next_hour = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    async with db.read() as conn:
        rows = await repository.orders_per_hour(conn, first_day, next_hour, settings.currency)
        pending = await repository.count_pending_orders(conn)
        low, low_total = await repository.low_stock(conn, settings.low_stock_threshold, LIST_SIZE)
        failing, failing_total = await repository.failing_endpoints(conn, LIST_SIZE)
        backlog, oldest_due = await repository.outbox_backlog(conn)
    hours, days = _series(rows, now)
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


def money(minor: float, currency: str) -> str:
    return f"{Decimal(int(minor)) / MINOR_PER_MAJOR:,.2f} {currency}"


def _charts(points: list[Point], noun: str, currency: str) -> dict[str, str]:
    def count(value: float) -> str:
        return f"{int(value):,} orders" if value != 1 else "1 order"

    def amount(value: float) -> str:
        return money(value, currency)

    orders = [Bar(point.label, point.tick, point.orders) for point in points]
    revenue = [Bar(point.label, point.tick, point.revenue_minor) for point in points]
    return {
        "orders": bar_chart(f"Orders per {noun}", orders, count, css_class="orders"),
        "revenue": bar_chart(f"Revenue per {noun}", revenue, amount, css_class="revenue"),
    }


async def overview(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    settings = services.settings
    figures = await overview_figures(services.db, settings, utcnow())
    counters = _metric_sums((await metrics.render(services.db)).decode())
    return render(
        request,
        "overview.html",
        {
            "nav": "overview",
            "figures": figures,
            "hour_charts": _charts(figures.hours, "hour", settings.currency),
            "day_charts": _charts(figures.days, "day", settings.currency),
            "money": lambda minor: money(minor, settings.currency),
            "threshold": settings.low_stock_threshold,
            "counters": counters,
            "metrics_on": settings.metrics == "on",
            "list_size": LIST_SIZE,
        },
    )
