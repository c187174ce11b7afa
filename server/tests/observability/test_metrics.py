"""``/metrics``: Prometheus text, requests by route template, rate limiting, the outbox.

The metrics are process-wide and every test app in this process shares them, so the tests
compare a scrape after the requests with one before.
"""

from __future__ import annotations

import errno
import json
import logging
import secrets
import sqlite3
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy.exc
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update
from starlette.types import Message

from commerce_api.app.factory import create_app
from commerce_api.catalog import repository as catalog_repository
from commerce_api.core.timestamps import utcnow
from commerce_api.http.context import RequestContext
from commerce_api.http.middleware import is_storage_full
from commerce_api.http.pipeline import RequestObserver, route_template
from commerce_api.observability import metrics
from commerce_api.observability.access import LOGGER_NAME, AccessLog
from commerce_api.observability.histogram import BatchedHistogram
from commerce_api.observability.metrics import RequestMetrics
from commerce_api.orders import placement
from commerce_api.storage.db import Database
from commerce_api.storage.tables import webhook_deliveries
from tests.conftest import KeyFactory, make_settings
from tests.factories import ADDRESS, order_body
from tests.helpers import bearer, order_scope, serving
from tests.orders.test_orders import create_product

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def requests_counted(
    before: Samples, after: Samples, route: str, method: str, status: int
) -> float:
    name = "commerce_http_requests_total"
    labels = {"route": route, "method": method, "status": str(status)}
    return value(after, name, **labels) - value(before, name, **labels)


async def test_requests_are_counted_by_route_template_method_and_status(
    client: httpx.AsyncClient, client_key: str, admin_key: str
) -> None:
    created = await client.post(
        "/v1/products",
        headers=bearer(admin_key),
        json={"name": "Lamp", "price": 10, "category": "home", "inventory_count": 3},
    )
    assert created.status_code == 201
    product_id = created.json()["id"]
    before = await scrape(client)

    # The two catalogue reads the fast path answers, FastAPI routes, errors, unknown routes.
    assert (await client.get("/v1/products", headers=bearer(client_key))).status_code == 200
    detail = await client.get(f"/v1/products/{product_id}", headers=bearer(client_key))
    assert detail.status_code == 200
    missing = await client.get("/v1/products/prod_missing", headers=bearer(client_key))
    assert missing.status_code == 404
    assert (await client.get("/v1/orders/ord_x", headers=bearer("sk_sandbox_nope"))).status_code
    assert (await client.get("/v1/nowhere/at/all")).status_code == 404
    assert (await client.delete("/v1/orders")).status_code == 405

    after = await scrape(client)
    assert requests_counted(before, after, "/v1/products", "GET", 200) == 1
    assert requests_counted(before, after, "/v1/products/{id}", "GET", 200) == 1
    assert requests_counted(before, after, "/v1/products/{id}", "GET", 404) == 1
    assert requests_counted(before, after, "/v1/orders/{id}", "GET", 401) == 1
    assert requests_counted(before, after, "unmatched", "GET", 404) == 1
    assert requests_counted(before, after, "/v1/orders", "DELETE", 405) == 1
    # The previous scrape is counted too, and raw paths never become labels.
    assert requests_counted(before, after, "/metrics", "GET", 200) == 1
    assert not any(product_id in str(labels) for _, labels in after)

    histogram = "commerce_http_request_duration_seconds_count"
    labels = {"route": "/v1/products/{id}", "method": "GET"}
    assert value(after, histogram, **labels) - value(before, histogram, **labels) == 2


async def test_rate_limited_requests_are_counted_and_metrics_are_exempt(
    database_url: str, make_key: KeyFactory
) -> None:
    key = await make_key()
    async with serving(make_settings(database_url, rate_limit_development=2)) as client:
        before = await scrape(client)
        statuses = [
            (await client.get("/v1/orders", headers=bearer(key))).status_code for _ in "abc"
        ]
        assert statuses == [200, 200, 429]
        for _ in range(3):  # over the quota, /metrics still answers and is not counted
            response = await client.get("/metrics")
            assert response.status_code == 200
            assert "x-ratelimit-limit" not in response.headers
        after = await scrape(client)

    rejected = "commerce_rate_limit_rejections_total"
    assert value(after, rejected, caller="key") - value(before, rejected, caller="key") == 1
    assert requests_counted(before, after, "/v1/orders", "GET", 429) == 1
    assert ("commerce_rate_limit_store_errors_total", frozenset()) in after


async def test_metrics_off_answers_404_in_the_error_envelope(database_url: str) -> None:
    async with serving(make_settings(database_url, metrics="off")) as client:
        response = await client.get("/metrics")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "x-request-id" in response.headers


async def test_metrics_need_no_key_and_stay_out_of_the_openapi_document(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get("/metrics")).status_code == 200
    document = (await client.get("/v1/openapi.json")).json()
    assert "/metrics" not in document["paths"]


async def test_outbox_depth_and_oldest_due_age_are_read_at_scrape_time(
    client: httpx.AsyncClient, client_key: str, admin_key: str, db: Database
) -> None:
    before = await scrape(client)
    assert value(before, "commerce_webhook_outbox_pending") == 0
    assert value(before, "commerce_webhook_outbox_oldest_due_age_seconds") == 0

    product = await client.post(
        "/v1/products",
        headers=bearer(admin_key),
        json={"name": "Lamp", "price": 10, "category": "home", "inventory_count": 5},
    )
    endpoint = await client.post(
        "/v1/webhook_endpoints",
        headers=bearer(client_key),
        json={"url": "http://127.0.0.1:9/hook"},
    )
    assert endpoint.status_code == 201
    for _ in range(2):
        order = await client.post(
            "/v1/orders",
            headers=bearer(client_key),
            json={
                "customer_id": "cus_1",
                "items": [{"product_id": product.json()["id"], "quantity": 1}],
                "shipping_address": ADDRESS,
            },
        )
        assert order.status_code == 201
    async with db.write() as conn:  # one has been due for ten minutes, the other is a retry
        await conn.execute(update(webhook_deliveries).values(next_attempt_at=utcnow()))
        first: Any = (await conn.execute(webhook_deliveries.select().limit(1))).one()
        await conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.event_id == first.event_id)
            .values(next_attempt_at=utcnow() - timedelta(minutes=10))
        )

    after = await scrape(client)
    assert value(after, "commerce_webhook_outbox_pending") == 2
    age = value(after, "commerce_webhook_outbox_oldest_due_age_seconds")
    assert 600 <= age < 660


@pytest.mark.parametrize(
    ("path", "template"),
    [
        ("/v1/products", "/v1/products"),
        ("/v1/products/prod_1", "/v1/products/{id}"),
        ("/v1/products/prod_1/extra", "unmatched"),
        ("/v1/products/", "unmatched"),
        ("/", "unmatched"),
    ],
)
def test_a_request_that_reached_no_route_is_labelled_by_its_route_or_unmatched(
    path: str, template: str
) -> None:
    routes = create_app(make_settings("sqlite:///unused.db")).state.method_index
    assert route_template({"type": "http", "path": path, "method": "GET"}, routes) == template


@pytest.mark.parametrize("idempotency_key", [None, "hang-up-1"])
async def test_a_body_cut_short_is_a_400_not_a_server_error(
    app: FastAPI,
    client: httpx.AsyncClient,
    client_key: str,
    idempotency_key: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``ClientDisconnect`` while the body is read (a client that hung up, or a chunked body
    with broken framing: the server cannot tell them apart): not counted as a 5xx, not logged
    as an unhandled error; answered and counted as a 400, a refusal ``malformed_request``."""
    before = await scrape(client)
    scope = order_scope(client_key, 500, idempotency_key)
    incoming: list[Message] = [
        {"type": "http.request", "body": b'{"customer_id": "cus', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    with caplog.at_level(logging.INFO, logger="commerce_api"):
        await app(scope, receive, send)
    after = await scrape(client)
    assert sent[0]["status"] == 400
    error = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"]
    assert (error["reason"], error["details"]) == ("malformed_request", "body")
    assert requests_counted(before, after, "/v1/orders", "POST", 500) == 0
    assert requests_counted(before, after, "/v1/orders", "POST", 400) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


# --- a full disk -------------------------------------------------------------------------------


def _disk_full() -> sqlalchemy.exc.OperationalError:
    """What SQLAlchemy raises when SQLite cannot write for want of space (SQLITE_FULL)."""
    return sqlalchemy.exc.OperationalError(
        "INSERT …", {}, sqlite3.OperationalError("database or disk is full")
    )


def assert_storage_full(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "30"
    error = response.json()["error"]
    assert error["code"] == "server_error"
    assert "storage is full" in error["message"]
    assert error["details"] == response.headers["x-request-id"]


async def test_a_full_disk_is_a_503_with_retry_after_a_log_line_and_a_metric(
    client: httpx.AsyncClient,
    admin_key: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def full(*_args: object, **_kwargs: object) -> None:
        raise _disk_full()

    monkeypatch.setattr(catalog_repository, "insert", full)
    before = await scrape(client)
    with caplog.at_level(logging.ERROR, logger="commerce_api"):
        response = await client.post(
            "/v1/products",
            headers=bearer(admin_key),
            json={"name": "Lamp", "price": 10, "category": "home", "inventory_count": 3},
        )
    assert_storage_full(response)
    after = await scrape(client)
    assert (
        value(after, "commerce_storage_full_errors_total")
        - value(before, "commerce_storage_full_errors_total")
        == 1
    )
    assert requests_counted(before, after, "/v1/products", "POST", 503) == 1
    assert any("storage full" in record.getMessage() for record in caplog.records)
    listed = await client.get("/v1/products", headers=bearer(admin_key))
    assert listed.json()["pagination"]["total"] == 0  # nothing was written


async def test_a_full_disk_while_an_order_is_placed_is_a_503(
    db: Database,
    client: httpx.AsyncClient,
    admin_key: str,
    client_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The database's "disk full", met while a batch of orders is written, becomes the 503,
    with nothing written (each backend's own form of the error)."""
    product_id = await create_product(client, admin_key, inventory_count=3)

    async def full(*_args: object, **_kwargs: object) -> None:
        if db.is_sqlite:
            disk_full: Exception = sqlite3.OperationalError("database or disk is full")
        else:
            disk_full = type("DiskFullError", (Exception,), {"sqlstate": "53100"})()
        raise sqlalchemy.exc.OperationalError("INSERT INTO orders …", {}, disk_full)

    monkeypatch.setattr(placement, "place_batch", full)
    response = await client.post(
        "/v1/orders",
        headers=bearer(client_key),
        json=order_body((product_id, 1)),
    )
    assert_storage_full(response)
    product = await client.get(f"/v1/products/{product_id}", headers=bearer(client_key))
    assert product.json()["inventory_count"] == 3


@pytest.mark.parametrize(
    ("exc", "full"),
    [
        (sqlite3.OperationalError("database or disk is full"), True),
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (type("DiskFullError", (Exception,), {"sqlstate": "53100"})(), True),
        (sqlite3.OperationalError("database is locked"), False),
        (RuntimeError("boom"), False),
    ],
)
def test_what_counts_as_a_full_disk(exc: Exception, full: bool) -> None:
    wrapped = sqlalchemy.exc.OperationalError("…", {}, exc)
    assert is_storage_full(exc) is full
    assert is_storage_full(wrapped) is full


async def test_one_batch_feeds_the_metrics_and_the_request_log_and_a_scrape_flushes_it(
    db: Database, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each answer is one note in the observer's batch, for both; the log's line only for an
    answer given while its logger was on. A scrape flushes the batch before it reads."""
    monkeypatch.setattr(RequestObserver, "FLUSH_SECONDS", 3600)  # only the scrape flushes
    observer = RequestObserver(RequestMetrics(), AccessLog("json"))
    route = f"/v1/shared-{secrets.token_hex(4)}"  # labels of its own: the metrics are global
    access_logger = logging.getLogger(LOGGER_NAME)
    saved = access_logger.level
    try:
        access_logger.setLevel(logging.INFO)
        observer.observe({"method": "GET"}, RequestContext("req_logged"), route, 200, 0.001)
        access_logger.setLevel(logging.WARNING)
        observer.observe({"method": "GET"}, RequestContext("req_unlogged"), route, 200, 0.002)
    finally:
        access_logger.setLevel(saved)
    assert observer._batch.timer is not None, "both wait in the batch"
    assert capsys.readouterr().err == ""

    exposition = (await metrics.render(db)).decode()
    counted = {
        sample.name: sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.labels.get("route") == route
    }
    assert counted["commerce_http_requests_total"] == 2
    assert counted["commerce_http_request_duration_seconds_count"] == 2
    [line] = capsys.readouterr().err.splitlines()
    assert json.loads(line)["request_id"] == "req_logged"
    assert observer._batch.timer is None


@pytest.mark.parametrize(
    "values",
    [
        [0.0],
        [0.0001, 0.004, 0.005, 0.0051, 0.3, 2.5, 7.0, 1e6],
        [0.01] * 64,
        [0.0, 0.05, 0.05, 10.0, float("inf")],
    ],
    ids=["zero", "every-bucket", "one-bucket", "edges"],
)
def test_observing_a_batch_is_observing_each_value(values: list[float]) -> None:
    """``BatchedHistogram`` (one increment per bucket and batch, on counters) exposes what
    prometheus-client's ``Histogram.observe`` per value does."""
    buckets = (0.005, 0.05, 0.5, 5.0)
    one_by_one, batched = CollectorRegistry(), CollectorRegistry()
    single = Histogram("d", "d", ["route"], buckets=buckets, registry=one_by_one)
    many = BatchedHistogram("d", "d", ["route"], buckets, registry=batched)
    for value in values:
        single.labels("/a").observe(value)
    many.labels("/a").observe_many(values)

    class Exposed:
        def collect(self) -> Any:
            return many.expose(batched.collect())

    assert _without_created(generate_latest(Exposed())) == _without_created(
        generate_latest(one_by_one)
    )


def _without_created(exposition: bytes) -> list[bytes]:
    """The exposition's lines but the creation time (each histogram's own)."""
    return [line for line in exposition.splitlines() if b"_created" not in line]
