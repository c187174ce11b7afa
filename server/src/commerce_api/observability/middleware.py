"""The outermost ASGI layer: times every request, counts it in the metrics and logs one line.

It sits outside the rate limiter and the read-path fast path, so a 429 or a fast-path answer is
counted like any other response. Requests are labelled by route *template*
(``/v1/products/{id}``): the matched FastAPI route when routing ran, else the route the path
would match (a fast-path answer, or a request refused before routing: a 429, a 413), else
``unmatched``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.observability.metrics import UNMATCHED_ROUTE, RequestMetrics

logger = logging.getLogger("commerce_api.access")

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


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: bool = True) -> None:
        self.app = app
        self.metrics = RequestMetrics() if metrics else None

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
            elapsed = time.perf_counter() - started
            route = route_template(scope)
            method: str = scope["method"]
            if self.metrics is not None:
                self.metrics.observe(route, method, status, elapsed)
            if logger.isEnabledFor(logging.INFO):
                _log_request(scope, route, method, status, elapsed)


def _log_request(scope: Scope, route: str, method: str, status: int, elapsed: float) -> None:
    state: dict[str, Any] = scope.get("state", {})
    principal = state.get("principal")
    duration_ms = round(elapsed * 1000, 2)
    logger.info(
        "%s %s %s %.2fms",
        method,
        route,
        status,
        duration_ms,
        extra={
            "request_id": state.get("request_id"),
            "account_id": getattr(principal, "account_id", None),
            "key_id": getattr(principal, "key_id", None),
            "route": route,
            "method": method,
            "status": status,
            "duration_ms": duration_ms,
        },
    )
