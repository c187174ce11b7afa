"""The ASGI application: ``create_app()`` builds it from settings (``serve`` runs it inside
``serving.served_app``, granian's factory)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from commerce_api import __version__
from commerce_api.app.fastlane import FastLane
from commerce_api.app.services import open_services
from commerce_api.audit import service as audit
from commerce_api.audit.routes import audit_router
from commerce_api.catalog.routes import categories_router
from commerce_api.catalog.routes import router as catalog_router
from commerce_api.console import routes as console
from commerce_api.console.routes import router as console_router
from commerce_api.core import tracing
from commerce_api.core.errors import APIError
from commerce_api.events import service as events
from commerce_api.events.routes import events_router
from commerce_api.http.cors import ApiCORS
from commerce_api.http.dependencies import ServicesDep
from commerce_api.http.errors import install_error_handlers
from commerce_api.http.middleware import ErrorGuardMiddleware
from commerce_api.http.openapi import OPENAPI_URL, docs_router, install_openapi
from commerce_api.http.pipeline import Pipeline, RequestObserver
from commerce_api.http.pipeline_middleware import PipelineMiddleware
from commerce_api.http.routing import (
    MethodIndex,
    StrictRoute,
    json_response,
)
from commerce_api.http.schemas import ErrorResponse
from commerce_api.idempotency import service as idempotency
from commerce_api.observability import metrics, traces
from commerce_api.observability.access import AccessLog
from commerce_api.observability.logging import resolved_format
from commerce_api.orders import service as orders_service
from commerce_api.orders.domain import expiry_sweep_seconds
from commerce_api.orders.routes import order_webhooks
from commerce_api.orders.routes import router as orders_router
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from commerce_api.storage.faults import log_failure
from commerce_api.webhooks.dispatcher import Dispatcher, stop_dispatcher
from commerce_api.webhooks.repository.outbox import pending_summary
from commerce_api.webhooks.routes import endpoints_router

TITLE = "Commerce API"
logger = logging.getLogger("commerce_api")

health_router = APIRouter(tags=["Health"], route_class=StrictRoute)


@health_router.get("/healthz", summary="Liveness", responses={200: {"description": "Up."}})
async def healthz() -> Response:
    """The process is up (it does not touch the database)."""
    return json_response({"status": "ok"})


@health_router.get(
    "/readyz",
    summary="Readiness",
    responses={
        200: {"description": "Ready."},
        503: {"model": ErrorResponse, "description": "Database unreachable."},
    },
)
async def readyz(services: ServicesDep) -> Response:
    """The database answers. 503 with a `server_error` body when it does not."""
    try:
        await services.db.ping()
    except Exception as exc:
        raise APIError(
            503,
            "server_error",
            "The database is unreachable.",
            "database",
            reason="service_unavailable",
        ) from exc
    return json_response({"status": "ok"})


HOUSEKEEPING_INTERVAL_SECONDS = 600


async def _every(
    seconds: float, stop: asyncio.Event, what: str, work: Callable[[], Awaitable[object]]
) -> None:
    """Run ``work`` now and then every ``seconds`` until ``stop``; a failure is logged and
    retried at the next turn. Every process may run such a loop: each job is safe to run
    concurrently.

    Stopped by ``stop`` as well as by cancellation: on Python 3.11 a cancellation that arrives
    just as a database call inside the driver completes can be lost (``asyncio.wait_for``), and
    the task would then sleep out its interval during shutdown."""
    while not stop.is_set():
        try:
            await work()
        except Exception as exc:
            log_failure(logger, exc, "%s failed; will retry", what)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)


async def _housekeeping(db: Database, settings: Settings) -> None:
    """Periodic clean-up: idempotency keys, events and audit rows past their retention."""
    await idempotency.prune(db)
    async with db.write() as conn:
        await events.prune_events(conn)
    async with db.write() as conn:
        await audit.prune_audit_events(conn, settings.audit_retention_days)


def _background_jobs(
    db: Database, settings: Settings, stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """The periodic jobs: housekeeping every 10 minutes, and the pending-order sweep at the
    interval its TTL needs (``orders.domain.expiry_sweep_seconds``)."""
    ttl = settings.pending_order_ttl_seconds
    jobs = [
        asyncio.create_task(
            _every(
                HOUSEKEEPING_INTERVAL_SECONDS,
                stop,
                "housekeeping",
                lambda: _housekeeping(db, settings),
            ),
            name="housekeeping",
        )
    ]
    if ttl > 0:
        sweep = _every(
            expiry_sweep_seconds(ttl),
            stop,
            "the pending-order sweep",
            lambda: orders_service.expire_pending_orders(db, ttl),
        )
        jobs.append(asyncio.create_task(sweep, name="pending-order-sweep"))
    return jobs


# Not in the OpenAPI document: it is for the operator's monitoring, not for integrators.
metrics_router = APIRouter(route_class=StrictRoute, include_in_schema=False)


@metrics_router.get(metrics.METRICS_PATH)
async def prometheus_metrics(services: ServicesDep) -> Response:
    """Prometheus text exposition (``COMMERCE_METRICS=off`` removes the route)."""
    return Response(await metrics.render(services.db), media_type=metrics.CONTENT_TYPE)


PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})


class CommerceAPI(FastAPI):
    """The FastAPI app, with the fast lane asked first (see fastlane.py), and before it CORS for
    ``/v1`` (``http/cors.py``)."""

    fast_lane: FastLane | None = None
    cors: ApiCORS | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Off, tracing costs this one boolean (core.tracing); on, the request's span.
        traced = (
            tracing.start_request(scope) if tracing.ENABLED and scope["type"] == "http" else None
        )
        try:
            cors = self.cors
            # Without origins, CORS has only preflights (OPTIONS) to refuse: nothing else asks it.
            if (
                cors is not None
                and scope["type"] == "http"
                and (cors.origins or scope["method"] == "OPTIONS")
            ):
                sending = await cors.sending(scope, send)
                if sending is None:
                    return  # a preflight, answered
                send = sending
            fast_lane = self.fast_lane
            if fast_lane is not None and scope["type"] == "http":
                next_receive = await fast_lane(scope, receive, send)
                if next_receive is None:
                    return  # answered
                receive = next_receive
            await super().__call__(scope, receive, send)
        except BaseException as exc:
            if traced is not None:
                tracing.end_request(traced, exc)
                traced = None
            raise
        finally:
            if traced is not None:
                tracing.end_request(traced)


def create_app(settings: Settings | None = None) -> CommerceAPI:
    settings = settings or Settings()
    metrics.read_outbox_with(pending_summary)  # the gauges /metrics reads at scrape time
    observer = RequestObserver(
        metrics.RequestMetrics() if settings.metrics == "on" else None,
        AccessLog(resolved_format(settings)),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tracing_started = traces.start()  # if the OTEL_* variables ask for it
        services = await open_services(settings)
        db, secret_box, read_path = services.db, services.secret_box, services.read_path
        app.state.services = services
        pipeline = Pipeline(services, observer, app.state.method_index, console.uncounted)
        app.state.pipeline = pipeline
        if isinstance(app, CommerceAPI):
            app.fast_lane = FastLane(services, pipeline, app.state.method_index.routes)
        stopping = asyncio.Event()
        periodic = _background_jobs(db, settings, stopping)
        warming = asyncio.create_task(read_path.catalog.warm(), name="catalog-warm-up")
        dispatcher = Dispatcher(settings, db, secret_box) if settings.run_dispatcher else None
        dispatching = None
        if dispatcher is not None:
            dispatching = asyncio.create_task(dispatcher.run(), name="webhook-dispatcher")
        # Everything made so far (modules, routes, the clients' pools) lives as long as the
        # process: kept out of the garbage collector's full collections, which would otherwise
        # walk all of it again and again under load (pauses of 50-100 ms, seen as p99 in
        # `make bench` on PostgreSQL + Redis, where redis.asyncio adds its objects too).
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            # Runs after granian has finished the requests in flight (or given up on them).
            if isinstance(app, CommerceAPI):
                app.fast_lane = None
            if dispatcher is not None and dispatching is not None:
                await stop_dispatcher(dispatcher, dispatching)
            stopping.set()
            for job in periodic:
                job.cancel()
            await asyncio.gather(*periodic, warming, return_exceptions=True)
            await services.close()
            observer.flush()  # the request log's last lines (and the last metrics)
            metrics.process_exited()
            if tracing_started:
                traces.stop()  # the last spans exported

    app = CommerceAPI(
        title=TITLE,
        version=__version__,
        lifespan=lifespan,
        openapi_url=OPENAPI_URL,
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
        # Operation ids are the handler names (list_products), for readable generated clients.
        generate_unique_id_function=lambda route: route.name,
        # /metrics and the request log cover this; FastAPI's OpenTelemetry hooks would cost a
        # provider check on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    install_error_handlers(app)
    # Outermost last: the request pipeline (request id, rate limit, headers, metrics and log:
    # pipeline.py) → the error guard (body size, 500s: middleware.py) → the routes. The fast
    # lane answers before all of them, finished by the same pipeline.
    app.add_middleware(ErrorGuardMiddleware)
    app.add_middleware(PipelineMiddleware)
    routers = [
        catalog_router,
        categories_router,
        orders_router,
        endpoints_router,
        events_router,
        audit_router,
        health_router,
        docs_router(TITLE),
    ]
    if settings.metrics == "on":
        routers.append(metrics_router)
    routers.append(console_router)  # /dashboard: the operator console, not in the OpenAPI doc
    for router in routers:
        app.include_router(router)
    app.state.method_index = MethodIndex(routers)
    app.cors = ApiCORS(settings.cors_origins, app.state.method_index.routes)
    app.webhooks.include_router(order_webhooks)  # documented only: what deliveries look like
    install_openapi(app, PUBLIC_PATHS)
    return app
