"""The console's first page: pending orders and the figures of ``/metrics``."""

from __future__ import annotations

from fastapi import Request
from prometheus_client.parser import text_string_to_metric_families
from starlette.responses import Response

from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import render
from commerce_api.http.dependencies import ServicesDep
from commerce_api.observability import metrics
from commerce_api.orders import service as orders


def _metric_sums(text: str) -> dict[str, float]:
    """What the overview shows of the ``/metrics`` text."""
    sums = {"rejected_key": 0.0, "rejected_ip": 0.0, "server_errors": 0.0}
    sums.update(outbox_pending=0.0, outbox_oldest=0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "commerce_rate_limit_rejections_total":
                sums[f"rejected_{sample.labels.get('caller')}"] = sample.value
            elif sample.name == "commerce_http_requests_total" and sample.labels.get(
                "status", ""
            ).startswith("5"):
                sums["server_errors"] += sample.value
            elif sample.name == "commerce_webhook_outbox_pending":
                sums["outbox_pending"] = sample.value
            elif sample.name == "commerce_webhook_outbox_oldest_due_age_seconds":
                sums["outbox_oldest"] = sample.value
    return sums


async def overview(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.read() as conn:
        pending = await orders.list_orders(
            conn, session.principal, status="pending", customer_id=None, limit=1, offset=0
        )
    figures = _metric_sums((await metrics.render(services.db)).decode())
    return render(
        request,
        "overview.html",
        {
            "nav": "overview",
            "pending_orders": pending["pagination"]["total"],
            "figures": figures,
            "metrics_on": services.settings.metrics == "on",
        },
    )
