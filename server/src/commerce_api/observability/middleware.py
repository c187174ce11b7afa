"""The outermost ASGI layer: times every request, counts it in the metrics and logs one line.

It sits outside the rate limiter, so a 429 is counted like any other response; the read path's
fast lane, which answers before the stack, reports its answers to the same
:class:`RequestObserver`. Requests are labelled by route *template* (``/v1/products/{id}``):
the matched FastAPI route when routing ran, else the route the path would match (a request
refused before routing: a 429, a 413), else ``unmatched``.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.observability.access import AccessLog
from commerce_api.observability.metrics import UNMATCHED_ROUTE, RequestMetrics

_FAST_LIST = "/v1/products"
_FAST_DETAIL_PREFIX = "/v1/products/"
_FAST_DETAIL = "/v1/products/{id}"


def route_template(scope: Scope) -> str:
    """The template of the route that answered (or would answer) this request."""
    route = scope.get("route")
    if route is not None:
        path: str | None = getattr(route, "path", None)
        if path is not None:
            return path
    path = scope["path"]
    if path == _FAST_LIST:
        return _FAST_LIST
    product_id = path[len(_FAST_DETAIL_PREFIX) :]
    if path.startswith(_FAST_DETAIL_PREFIX) and product_id and "/" not in product_id:
        return _FAST_DETAIL
    app = scope.get("app")
    index = getattr(getattr(app, "state", None), "method_index", None)
    template: str | None = index.template(path) if index is not None else None
    return template or UNMATCHED_ROUTE


class RequestObserver:
    """Counts and logs answered requests (the middleware below and the read path's fast lane)."""

    def __init__(self, metrics: RequestMetrics | None, access_log: AccessLog) -> None:
        self.metrics = metrics
        self.access_log = access_log

    def observe(self, scope: Scope, route: str, status: int, elapsed: float) -> None:
        method: str = scope["method"]
        if self.metrics is not None:
            self.metrics.observe(route, method, status, elapsed)
        if self.access_log.enabled():
            state: dict[str, Any] = scope.get("state", {})
            principal = state.get("principal")
            self.access_log.record(
                state.get("request_id"),
                getattr(principal, "account_id", None),
                getattr(principal, "key_id", None),
                route,
                method,
                status,
                elapsed,
            )


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp, *, observer: RequestObserver) -> None:
        self.app = app
        self.observer = observer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # if the app fails before answering, the server answers 500

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            self.observer.observe(
                scope, route_template(scope), status, time.perf_counter() - started
            )
