"""Where answered requests go: the request metrics and the request log.

``pipeline.Pipeline.observe`` reports every answer here, from the fast lane and from the routes
alike, labelled by route *template* (``/v1/products/{id}``).
"""

from __future__ import annotations

from starlette.types import Scope

from commerce_api.http.context import RequestContext
from commerce_api.observability.access import AccessLog
from commerce_api.observability.metrics import RequestMetrics


class RequestObserver:
    """Counts and logs answered requests (for ``pipeline.Pipeline``)."""

    def __init__(self, metrics: RequestMetrics | None, access_log: AccessLog) -> None:
        self.metrics = metrics
        self.access_log = access_log

    def observe(
        self, scope: Scope, ctx: RequestContext, route: str, status: int, elapsed: float
    ) -> None:
        method: str = scope["method"]
        if self.metrics is not None:
            self.metrics.observe(route, method, status, elapsed)
        if self.access_log.enabled():
            principal = ctx.principal
            self.access_log.record(
                ctx.request_id,
                getattr(principal, "account_id", None),
                getattr(principal, "key_id", None),
                route,
                method,
                status,
                elapsed,
            )
