"""One request pipeline: what every request goes through, whichever path answers it.

A request is answered by the fast lane (``app/fastlane.py``, before any framework code) or by the
routes, behind ``pipeline_middleware.PipelineMiddleware``. Both finish it here, with one
implementation of each concern:

- the request's :class:`~commerce_api.http.context.RequestContext` (its id, its caller, ...);
- authentication (``http.request_head.authenticate``, memoised in the context; the routes'
  dependency and the fast lane call it);
- the rate limit: the request counted against its quota once (:meth:`Pipeline.admit`), a 429
  when it is over, the ``X-RateLimit-*`` headers on every answer;
- the headers every answer carries (:meth:`Pipeline.headers`: the rate-limit headers, the
  request id, ``nosniff``, HSTS in production);
- metrics and the request log (:meth:`Pipeline.observe`, labelled by route template): one note
  per answer, handed to both in batches (:class:`RequestObserver`);
- the request head as a path that answers before the routes reads it is
  ``http.request_head``'s (the body's framing, the key), so the fast lane names no header.

The contract's 500 (and the 503 of a full disk) is ``middleware.unexpected_failure``, used by
the error guard inside this layer and by the fast lane.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from logging import INFO
from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.types import Scope, Send

from commerce_api.accounts.service import Principal
from commerce_api.core import tracing
from commerce_api.core.errors import error_body
from commerce_api.http.context import RequestContext, client_address
from commerce_api.http.request_head import authenticate, authorization_header
from commerce_api.http.services import RequestServices
from commerce_api.observability import AnsweredRequest
from commerce_api.observability.access import AccessLog
from commerce_api.observability.batching import Batch
from commerce_api.observability.metrics import (
    METRICS_PATH,
    REJECTED_IP,
    REJECTED_KEY,
    UNMATCHED_ROUTE,
    RequestMetrics,
    flush_before_scrape,
)
from commerce_api.ratelimit.limiter import Decision
from commerce_api.settings import Settings, Tier

if TYPE_CHECKING:
    from commerce_api.http.routing import MethodIndex

# For the operator's infrastructure: not counted against any quota.
EXEMPT_PATHS = frozenset({"/healthz", "/readyz", METRICS_PATH})
JSON_HEADER = (b"content-type", b"application/json")
_CONTENT_TYPE = b"content-type"
_CONTENT_LENGTH = b"content-length"


def common_headers(settings: Settings) -> list[tuple[bytes, bytes]]:
    """The same on every answer: ``nosniff``, so that no browser reads a JSON body as another
    type; in production, HSTS (``COMMERCE_HSTS_MAX_AGE_SECONDS``), so that a browser that has
    reached the service over HTTPS never tries plain HTTP again."""
    headers = [(b"x-content-type-options", b"nosniff")]
    if settings.environment == "production":
        max_age = f"max-age={settings.hsts_max_age_seconds}".encode()
        headers.append((b"strict-transport-security", max_age))
    return headers


def rate_limit_headers(decision: Decision) -> list[tuple[bytes, bytes]]:
    """The rate limiter's decision as headers: ``X-RateLimit-Limit``, ``-Remaining`` and
    ``-Reset`` on every counted answer, and ``Retry-After`` on a refusal."""
    headers = [
        (b"x-ratelimit-limit", str(decision.limit).encode()),
        (b"x-ratelimit-remaining", str(decision.remaining).encode()),
        (b"x-ratelimit-reset", str(decision.reset).encode()),
    ]
    if decision.retry_after is not None:
        headers.append((b"retry-after", str(decision.retry_after).encode()))
    return headers


class RenderedJSON(Response):
    """A 200 whose JSON body is already rendered (a cached page or product): Starlette's
    ``Response`` with the same two headers, in the same order, without its general
    constructor's work (one is made per catalogue read)."""

    media_type = JSON_HEADER[1].decode()

    def __init__(self, body: bytes) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [(_CONTENT_LENGTH, str(len(body)).encode()), JSON_HEADER]


def own_headers(response: Response) -> list[tuple[bytes, bytes]]:
    """An endpoint's response headers but those :meth:`Pipeline.answer` sets itself."""
    if type(response) is RenderedJSON:
        return []  # it has only those two
    return [
        (name, value)
        for name, value in response.raw_headers
        if name != _CONTENT_TYPE and name != _CONTENT_LENGTH
    ]


class RequestObserver:
    """Where answered requests go: the request metrics and the request log.

    Each answer is one note (an ``AnsweredRequest``) in one batch, handed to both together —
    ``RequestMetrics.record_many`` and ``AccessLog.write_many`` — when :data:`BATCH_SIZE` are
    waiting, :data:`FLUSH_SECONDS` after the first, before every scrape of ``/metrics`` and on
    :meth:`flush` (at shutdown): per request, neither runs. A request is noted for the log
    when the log's logger is on for INFO as it is answered (stamped with that time), and not
    at all when the log is off and there are no metrics."""

    BATCH_SIZE = 64
    FLUSH_SECONDS = 0.05

    def __init__(self, metrics: RequestMetrics | None, access_log: AccessLog) -> None:
        self.metrics = metrics
        self.access_log = access_log
        self._access_logger = access_log.logger
        self._batch: Batch[AnsweredRequest] = Batch(
            self._write, self.BATCH_SIZE, self.FLUSH_SECONDS
        )
        if metrics is not None:
            flush_before_scrape(self._batch)

    def observe(
        self, scope: Scope, ctx: RequestContext, route: str, status: int, elapsed: float
    ) -> None:
        if self._access_logger.isEnabledFor(INFO):
            principal = ctx.principal
            self._batch.add(
                (
                    route,
                    scope["method"],
                    status,
                    elapsed,
                    time.time(),
                    ctx.request_id,
                    getattr(principal, "account_id", None),
                    getattr(principal, "key_id", None),
                )
            )
        elif self.metrics is not None:
            self._batch.add((route, scope["method"], status, elapsed, None, None, None, None))

    def flush(self) -> None:
        self._batch.flush()

    def _write(self, answered: list[AnsweredRequest]) -> None:
        if self.metrics is not None:
            self.metrics.record_many(answered)
        self.access_log.write_many(answered)


class Pipeline:
    """The concerns every answer shares; one per process (built by the app's lifespan)."""

    def __init__(
        self,
        services: RequestServices,
        observer: RequestObserver,
        routes: MethodIndex,
        uncounted: Callable[[str], bool] = lambda _path: False,
    ) -> None:
        self.uncounted = uncounted  # paths left out of the rate limit besides EXEMPT_PATHS
        self.read_path = services.read_path
        self.limiter = services.rate_limiter
        self.limiting = services.settings.rate_limit_enabled
        self.observer = observer
        self.routes = routes
        self.common_headers = common_headers(services.settings)

    async def admit(self, scope: Scope, ctx: RequestContext) -> bool:
        """Count the request against its quota, once: its key's account (or the key), else its
        IP; False when it is over. Any failure to authenticate counts as "no valid key" here:
        the route, if it needs a key, meets it again and answers it."""
        if not self.limiting:
            return True
        if ctx.decision is None:
            principal = ctx.principal
            if principal is None and ctx.auth_error is None:
                try:
                    principal = await authenticate(self.read_path, ctx, authorization_header(scope))
                except Exception:
                    principal = None
            if principal is not None and principal.role == "publishable":
                ctx.decision = await self.limiter.check_publishable(
                    principal.key_id, client_address(scope)
                )
            else:
                ctx.decision = await self.limiter.check(*quota(principal, scope))
        return ctx.decision.retry_after is None  # ``Decision.allowed``, read as a field

    def exempt(self, path: str) -> bool:
        """Whether a request for ``path`` is left out of the rate limit."""
        return path in EXEMPT_PATHS or self.uncounted(path)

    def rejection(self, ctx: RequestContext) -> bytes:
        """The 429 body for a refused request (and count the refusal)."""
        decision = ctx.decision
        assert decision is not None
        (REJECTED_KEY if ctx.principal is not None else REJECTED_IP).inc()
        return error_body("rate_limited", "quota_exceeded", *decision.refusal())

    def headers(self, ctx: RequestContext) -> list[tuple[bytes, bytes]]:
        """The headers of every answer, after its own: the rate limit's, the request id, and
        the :func:`common_headers`."""
        headers = [] if ctx.decision is None else rate_limit_headers(ctx.decision)
        headers.append((b"x-request-id", ctx.request_id.encode()))
        headers += self.common_headers
        return headers

    async def respond(
        self,
        scope: Scope,
        ctx: RequestContext,
        send: Send,
        route: str,
        started: float,
        response: Response,
    ) -> None:
        """:meth:`answer` with an endpoint's response."""
        body = bytes(response.body)
        headers = own_headers(response)
        await self.answer(scope, ctx, send, route, started, response.status_code, body, headers)

    async def answer(
        self,
        scope: Scope,
        ctx: RequestContext,
        send: Send,
        route: str,
        started: float,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """Send a whole JSON answer, finished like every other: counted against the quota
        (over it, the 429 instead), with the common headers, observed."""
        if not await self.admit(scope, ctx):
            status, body, headers = 429, self.rejection(ctx), None
        given = [
            JSON_HEADER,
            (_CONTENT_LENGTH, str(len(body)).encode()),
            *(headers or ()),
            *self.headers(ctx),
        ]
        await send({"type": "http.response.start", "status": status, "headers": given})
        await send({"type": "http.response.body", "body": body})
        self.observe(scope, ctx, route, status, started)

    def observe(
        self, scope: Scope, ctx: RequestContext, route: str | None, status: int, started: float
    ) -> None:
        """Count the answer in the metrics and log its line (and label its span)."""
        template = route or self.route_template(scope)
        self.observer.observe(scope, ctx, template, status, time.perf_counter() - started)
        if tracing.ENABLED:
            account_id = getattr(ctx.principal, "account_id", None)
            tracing.finish_request(scope["method"], template, status, account_id, ctx.request_id)

    def route_template(self, scope: Scope) -> str:
        return route_template(scope, self.routes)


def quota(principal: Principal | None, scope: Scope) -> tuple[str, Tier]:
    """What a request without a publishable key is counted against: its key's account (or the
    key, for an admin key without one) at the key's tier; without a valid key, its IP at the
    development tier."""
    if principal is not None:
        return principal.account_id or principal.key_id, principal.tier
    return f"ip:{client_address(scope)}", "development"


def route_template(scope: Scope, routes: MethodIndex) -> str:
    """The template of the route that answered (or would answer) this request: the matched
    route when routing ran, else the route the path would match (a request refused before
    routing: a 429, a 413), else ``unmatched``."""
    route = scope.get("route")
    path: str | None = getattr(route, "path", None)
    if path is not None:
        return path
    return routes.template(scope["path"]) or UNMATCHED_ROUTE
