"""Traces (docs/deployment.md, "Traces"), on every backend, with OpenTelemetry's in-memory
exporter: an order's request span (the child of the client's ``traceparent``, with its route,
account and status), its transaction's span (the child of — or linked to — the request's), and
the later webhook delivery attempt's span in the same trace, whose ``traceparent`` the real
receiver gets. Off (no ``OTEL_*`` variables), no provider is made and no delivery carries one.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from sqlalchemy import select

from commerce_api.app.factory import create_app
from commerce_api.core import tracing
from commerce_api.observability import traces
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from commerce_api.storage.tables import events
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer
from tests.server_process import COMMERCE_API
from tests.webhook_receiver import Received, Receiver, eventually, running_receiver

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID = "00f067aa0ba902b7"
INCOMING = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"
OTEL_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
)


@pytest.fixture(autouse=True)
def no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url,
        run_dispatcher=True,
        webhook_poll_seconds=0.05,
        webhook_timeout_seconds=2.0,
        webhook_retry_schedule=(0, 0, 0),
    )


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    traces.install(memory)
    try:
        yield memory
    finally:
        traces.stop()


@pytest.fixture
async def traced_client(
    exporter: InMemorySpanExporter, settings: Settings
) -> AsyncIterator[httpx.AsyncClient]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield http


async def _shop(
    db: Database, client: httpx.AsyncClient, receiver: Receiver, settings: Settings
) -> tuple[str, str, str]:
    """(account id, its client key, a product in stock), with an endpoint for order.created."""
    account_id = await factories.new_account(db)
    key = await factories.new_key(db, account_id, environment=settings.environment)
    admin = await factories.new_key(db, role="admin", environment=settings.environment)
    product = await factories.create_product(client, admin.secret, inventory_count=100)
    created = await client.post(
        "/v1/webhook_endpoints",
        json={"url": receiver.url("/hook"), "events": ["order.created"]},
        headers=bearer(key.secret),
    )
    assert created.status_code == 201, created.text
    return account_id, key.secret, product["id"]


async def _order_delivered(
    client: httpx.AsyncClient, key: str, product_id: str, receiver: Receiver
) -> tuple[httpx.Response, Received]:
    """Place an order (2 units) under the client's span (``INCOMING``): the response, and its
    webhook delivery as the receiver got it."""
    response = await client.post(
        "/v1/orders",
        json=factories.order_body((product_id, 2)),
        headers={**bearer(key), "traceparent": INCOMING},
    )
    assert response.status_code == 201, response.text
    await eventually(lambda: bool(receiver.requests("/hook")), within=10, what="a delivery")
    (received,) = receiver.requests("/hook")
    return response, received


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def _ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def _serves(transaction: ReadableSpan, request: ReadableSpan) -> bool:
    """Whether ``transaction`` is the child of ``request`` or links to it."""
    _, request_span_id = _ids(request)
    parent = transaction.parent
    linked = {link.context.span_id for link in transaction.links}
    return (parent is not None and parent.span_id == request_span_id) or request_span_id in linked


async def test_an_order_is_traced_from_request_to_transaction_to_delivery(
    db: Database,
    backend: str,
    settings: Settings,
    exporter: InMemorySpanExporter,
    traced_client: httpx.AsyncClient,
) -> None:
    with running_receiver() as receiver:
        account_id, key, product_id = await _shop(db, traced_client, receiver, settings)
        response, received = await _order_delivered(traced_client, key, product_id, receiver)
        await eventually(
            lambda: bool(_spans(exporter, "webhook delivery")), within=5, what="its span"
        )

    # The request: the child of the client's span, named and labelled by what answered it.
    (request,) = _spans(exporter, "POST /v1/orders")
    assert request.kind is SpanKind.SERVER
    assert _ids(request)[0] == int(TRACE_ID, 16)
    assert request.parent is not None
    assert request.parent.span_id == int(CLIENT_SPAN_ID, 16)
    attributes = dict(request.attributes or {})
    assert attributes["http.route"] == "/v1/orders"
    assert attributes["http.request.method"] == "POST"
    assert attributes["http.response.status_code"] == 201
    assert attributes["commerce.account_id"] == account_id
    assert attributes["commerce.request_id"] == response.headers["x-request-id"]

    # Its transaction: a span of its own, the child of the request (or linked to it).
    (transaction,) = [t for t in _spans(exporter, "transaction") if _serves(t, request)]
    assert transaction.kind is SpanKind.CLIENT
    assert (transaction.attributes or {})["db.system.name"] == backend
    assert (transaction.attributes or {})["commerce.batch.size"] == 1

    # The delivery, later, in the dispatcher: in the order's trace, the child of its request.
    (delivery,) = _spans(exporter, "webhook delivery")
    assert delivery.kind is SpanKind.CLIENT
    assert _ids(delivery)[0] == int(TRACE_ID, 16)
    assert delivery.parent is not None
    assert delivery.parent.span_id == _ids(request)[1]
    delivered = dict(delivery.attributes or {})
    assert delivered["commerce.event_type"] == "order.created"
    assert delivered["commerce.delivery_attempt"] == 1
    assert delivered["http.response.status_code"] == 200
    # The receiver's traceparent names the attempt's span, in the order's trace.
    version, trace_id, span_id, flags = received.headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    assert int(span_id, 16) == _ids(delivery)[1]

    # A request the routes answer (not the fast lane), and its transaction, the request's child.
    (endpoint_created,) = _spans(exporter, "POST /v1/webhook_endpoints")
    assert (endpoint_created.attributes or {})["http.response.status_code"] == 201
    assert (endpoint_created.attributes or {})["commerce.account_id"] == account_id
    assert any(
        t.parent is not None and t.parent.span_id == _ids(endpoint_created)[1]
        for t in _spans(exporter, "transaction")
    )

    async with db.read() as conn:
        stored = await conn.scalar(select(events.c.traceparent))
    assert stored is not None
    assert stored.split("-")[1] == TRACE_ID


async def test_a_batch_transaction_is_the_child_of_one_request_and_links_the_others(
    db: Database,
    settings: Settings,
    exporter: InMemorySpanExporter,
    traced_client: httpx.AsyncClient,
) -> None:
    with running_receiver() as receiver:
        _, key, product_id = await _shop(db, traced_client, receiver, settings)
        exporter.clear()
        body = factories.order_body((product_id, 1))
        answers = await asyncio.gather(
            *(traced_client.post("/v1/orders", json=body, headers=bearer(key)) for _ in range(12))
        )
    assert [answer.status_code for answer in answers] == [201] * 12

    requests = _spans(exporter, "POST /v1/orders")
    transactions = [
        t for t in _spans(exporter, "transaction") if "commerce.batch.size" in (t.attributes or {})
    ]
    assert len(requests) == 12
    # Each order's request is served by exactly one batch's transaction span.
    for request in requests:
        assert len([t for t in transactions if _serves(t, request)]) == 1
    for transaction in transactions:
        size = (transaction.attributes or {})["commerce.batch.size"]
        assert isinstance(size, int)
        assert len(transaction.links) == size - 1
        assert transaction.parent is not None  # the batch's first request
    # Twelve orders at once: the batch after the first carries several (the links are made).
    assert any(transaction.links for transaction in transactions)


async def test_without_otel_variables_nothing_is_traced(
    db: Database, settings: Settings, app: FastAPI, client: httpx.AsyncClient
) -> None:
    assert tracing.ENABLED is False
    assert traces.provider() is None
    assert not isinstance(trace.get_tracer_provider(), SDKTracerProvider)
    with running_receiver() as receiver:
        _, key, product_id = await _shop(db, client, receiver, settings)
        _, received = await _order_delivered(client, key, product_id, receiver)
    assert "traceparent" not in received.headers
    async with db.read() as conn:
        assert await conn.scalar(select(events.c.traceparent)) is None
    assert traces.provider() is None


async def test_an_otlp_endpoint_turns_traces_on_and_they_reach_it(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_receiver() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.base_url)
        application = create_app(make_settings(database_url))
        async with application.router.lifespan_context(application):
            assert tracing.ENABLED is True
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                assert (await http.get("/healthz")).status_code == 200
        # The lifespan's end exported what was left, and turned tracing off.
        assert tracing.ENABLED is False
        assert traces.provider() is None
        (exported,) = collector.requests("/v1/traces")
    assert exported.method == "POST"
    assert exported.headers["content-type"] == "application/x-protobuf"
    assert b"/healthz" in exported.body


def test_off_the_service_loads_neither_the_spans_nor_the_sdk() -> None:
    script = (
        "import sys, commerce_api.cli, commerce_api.app.factory\n"
        "loaded = [m for m in sys.modules if m.startswith("
        "('commerce_api.core.spans', 'opentelemetry.sdk', 'opentelemetry.exporter'))]\n"
        "print(loaded)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_otel_variables_decide_whether_traces_are_exported() -> None:
    assert traces.exporter_names({}) == []
    assert traces.exporter_names({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert traces.exporter_names({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == ["otlp"]
    assert traces.exporter_names({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318"}) == [
        "otlp"
    ]
    assert traces.exporter_names({"OTEL_TRACES_EXPORTER": "otlp,console"}) == ["otlp", "console"]
    disabled = {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}
    assert traces.exporter_names(disabled) == []
    with pytest.raises(traces.TracingConfigError, match="zipkin"):
        traces.exporter_names({"OTEL_TRACES_EXPORTER": "zipkin"})
    grpc = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(traces.TracingConfigError, match="http/protobuf"):
        traces.exporter_names(grpc)


def test_an_exporter_the_service_cannot_make_stops_the_commands_with_exit_code_2(
    tmp_path: Path,
) -> None:
    env = factories.cli_env(f"sqlite:///{tmp_path / 'shop.db'}", OTEL_TRACES_EXPORTER="zipkin")
    done = subprocess.run(
        [str(COMMERCE_API), "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done
    assert "OTEL_TRACES_EXPORTER names zipkin" in done.stderr
    assert "Traceback" not in done.stderr


def test_otlp_variables_start_an_otlp_exporter_and_stop_turns_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "shop-7")
    assert traces.start() is True
    try:
        assert tracing.ENABLED is True
        provider = traces.provider()
        assert provider is not None
        assert provider.resource.attributes["service.name"] == "shop-7"
        assert traces.start() is False  # on already
    finally:
        traces.stop()
    assert tracing.ENABLED is False
    assert traces.provider() is None


def test_the_default_service_name_is_the_api_s() -> None:
    assert traces.start({"OTEL_TRACES_EXPORTER": "console"}) is True
    try:
        provider = traces.provider()
        assert provider is not None
        assert provider.resource.attributes["service.name"] == traces.SERVICE_NAME
    finally:
        traces.stop()
