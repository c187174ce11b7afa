"""``webhook_endpoints.recover()``, sync and async, against a real server with its dispatcher:
a delivery the receiver refused waits an hour for its retry; recover sends it again at once and
counts it; the delivery carries the order's version. A disabled endpoint is refused."""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from client_e2e_server import http_receiver, prepare, serve
from client_testing import E2EServer

import commerce_client
from commerce_client import Order

pytestmark = pytest.mark.slow

DELIVERY_TIMEOUT_SECONDS = 15.0
Delivery = tuple[str, int]  # (path, the status answered)


@pytest.fixture(scope="module")
async def recover_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, E2EServer]:
    workdir = tmp_path_factory.mktemp("client-e2e-recover")
    return workdir, await prepare(f"sqlite:///{workdir / 'e2e.db'}")


@pytest.fixture(scope="module")
def recovering_server(recover_data: tuple[Path, E2EServer]) -> Iterator[E2EServer]:
    """A server whose dispatcher retries a failed delivery only after an hour."""
    workdir, data = recover_data
    env = {"COMMERCE_WEBHOOK_POLL_SECONDS": "0.1", "COMMERCE_WEBHOOK_RETRY_SCHEDULE": "3600"}
    with serve(workdir, f"sqlite:///{workdir / 'e2e.db'}", env=env) as url:
        yield E2EServer(url, data.client_key, data.admin_key, data.books, data.sold_out)


@pytest.fixture
def receiver() -> Iterator[tuple[str, queue.Queue[Delivery]]]:
    """A receiver that answers 500 to the first request at each path, then 200."""
    received: queue.Queue[Delivery] = queue.Queue()
    seen: set[str] = set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = 200 if self.path in seen else 500
            seen.add(self.path)
            received.put((self.path, status))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with http_receiver(Handler) as url:
        yield url, received


def _next(received: queue.Queue[Delivery]) -> Delivery:
    return received.get(timeout=DELIVERY_TIMEOUT_SECONDS)


def _order(api: commerce_client.Client, server: E2EServer) -> Order:
    return api.orders.create(
        customer_id=f"cus_{uuid.uuid4().hex}",
        items=[{"product_id": server.books[0], "quantity": 1}],
        shipping_address={
            "street": "1 Main St",
            "city": "Springfield",
            "postal_code": "12345",
            "country": "US",
        },
    )


def _one_failed_delivery(
    api: commerce_client.Client,
    server: E2EServer,
    receiver: tuple[str, queue.Queue[Delivery]],
    path: str,
) -> tuple[str, Order]:
    """A new endpoint at the receiver's ``path`` and an order whose delivery to it was refused
    once (its retry an hour away): the endpoint's id and the order."""
    base, received = receiver
    endpoint = api.webhook_endpoints.create(url=f"{base}{path}")
    order = _order(api, server)
    assert _next(received) == (path, 500)
    _wait_for_one_failed_attempt(api, order)
    return endpoint.id, order


def _wait_for_one_failed_attempt(api: commerce_client.Client, order: Order) -> None:
    """Until the refused attempt is recorded (the receiver's answer comes before its record)."""
    (event,) = api.events.list(order_id=order.id).data
    deadline = time.monotonic() + DELIVERY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        (delivery,) = api.events.get(event.id).deliveries
        if delivery.attempts:
            assert delivery.status == "pending"  # its retry an hour away
            return
        time.sleep(0.05)
    raise AssertionError("the refused attempt was never recorded")


def test_recover_sends_a_failed_delivery_again_now(
    recovering_server: E2EServer, receiver: tuple[str, queue.Queue[Delivery]]
) -> None:
    _, received = receiver
    server = recovering_server
    since = datetime.now(UTC) - timedelta(seconds=1)
    with commerce_client.Client(api_key=server.client_key, base_url=server.base_url) as api:
        endpoint_id, order = _one_failed_delivery(api, server, receiver, "/sync")
        assert order.version == 1

        assert api.webhook_endpoints.recover(endpoint_id, since) == 1

        assert _next(received) == ("/sync", 200)
        assert api.webhook_endpoints.recover(endpoint_id, since.isoformat()) == 0

        api.webhook_endpoints.update(endpoint_id, enabled=False)
        with pytest.raises(commerce_client.ConflictError) as refused:
            api.webhook_endpoints.recover(endpoint_id, since)
        assert refused.value.reason == "endpoint_disabled"
        with pytest.raises(ValueError, match="since"):
            api.webhook_endpoints.recover(endpoint_id, datetime.now())  # no zone
        api.webhook_endpoints.delete(endpoint_id)


async def test_async_recover_sends_a_failed_delivery_again_now(
    recovering_server: E2EServer, receiver: tuple[str, queue.Queue[Delivery]]
) -> None:
    _, received = receiver
    server = recovering_server
    since = datetime.now(UTC) - timedelta(seconds=1)
    with commerce_client.Client(api_key=server.client_key, base_url=server.base_url) as api:
        endpoint_id, _ = _one_failed_delivery(api, server, receiver, "/async")
    async with commerce_client.AsyncClient(
        api_key=server.client_key, base_url=server.base_url
    ) as client:
        assert await client.webhook_endpoints.recover(endpoint_id, since) == 1
        assert _next(received) == ("/async", 200)
        await client.webhook_endpoints.delete(endpoint_id)
