"""The console's first page: the shop at a glance — the figures of ``console.figures``, read
from the database (orders and revenue per hour and per day as charts and tables, pending orders,
low-stock products, endpoints failing now, the webhook outbox's backlog) — and two figures of
``/metrics`` (rate-limit rejections and 5xx responses, since the service started)."""

from __future__ import annotations

from decimal import Decimal

from fastapi import Request
from prometheus_client.parser import text_string_to_metric_families
from starlette.responses import Response

from commerce_api.console.charts import Bar, bar_chart
from commerce_api.console.figures import LIST_SIZE, Point, overview_figures
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import render
from commerce_api.core.money import MINOR_PER_MAJOR
from commerce_api.core.timestamps import utcnow
from commerce_api.http.dependencies import ServicesDep
from commerce_api.observability import metrics


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
