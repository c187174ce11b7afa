"""A real delivery: a server with its webhook dispatcher POSTs an event to a receiver in this
test, and ``verify_webhook`` accepts it with the endpoint's secret (and refuses it after the
secret is rotated away)."""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from client_e2e_server import http_receiver, prepare, serve
from client_testing import E2EServer

import commerce_client
from commerce_client import Order

pytestmark = pytest.mark.slow

DELIVERY_TIMEOUT_SECONDS = 15.0
Delivery = tuple[bytes, dict[str, str]]


@pytest.fixture(scope="module")
async def delivery_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, E2EServer]:
    workdir = tmp_path_factory.mktemp("client-e2e-delivery")
    return workdir, await prepare(f"sqlite:///{workdir / 'e2e.db'}")


@pytest.fixture(scope="module")
def dispatching_server(delivery_data: tuple[Path, E2EServer]) -> Iterator[E2EServer]:
    workdir, data = delivery_data
    env = {"COMMERCE_WEBHOOK_POLL_SECONDS": "0.1"}
    with serve(workdir, f"sqlite:///{workdir / 'e2e.db'}", env=env) as url:
        yield E2EServer(url, data.client_key, data.admin_key, data.books, data.sold_out)


@pytest.fixture
def receiver() -> Iterator[tuple[str, queue.Queue[Delivery]]]:
    """An HTTP receiver on a free port; yields its URL and the deliveries it got."""
    received: queue.Queue[Delivery] = queue.Queue()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.put((body, dict(self.headers.items())))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with http_receiver(Handler) as url:
        yield f"{url}/hooks", received


def test_a_real_delivery_verifies_with_the_endpoint_secret(
    dispatching_server: E2EServer, receiver: tuple[str, queue.Queue[Delivery]]
) -> None:
    url, received = receiver
    server = dispatching_server
    with commerce_client.Client(api_key=server.client_key, base_url=server.base_url) as api:
        endpoint = api.webhook_endpoints.create(url=url, events=["order.created"])
        order = api.orders.create(
            customer_id=f"cus_{uuid.uuid4().hex}",
            items=[{"product_id": server.books[0], "quantity": 1}],
            shipping_address={
                "street": "1 Main St",
                "city": "Springfield",
                "postal_code": "12345",
                "country": "US",
            },
        )
        body, headers = received.get(timeout=DELIVERY_TIMEOUT_SECONDS)

        event = commerce_client.verify_webhook(body, headers, endpoint.secret)
        assert event.type == "order.created"
        assert isinstance(event.data, Order)
        assert event.data == order
        assert headers["webhook-id"] == event.id

        rotated = api.webhook_endpoints.rotate_secret(endpoint.id)
        with pytest.raises(commerce_client.WebhookVerificationError):
            commerce_client.verify_webhook(body, headers, rotated.secret)

        # The receiver has answered; the server records the outcome just after.
        deadline = time.monotonic() + DELIVERY_TIMEOUT_SECONDS
        while True:
            detailed = api.events.get(event.id)
            (delivery,) = [d for d in detailed.deliveries if d.endpoint_id == endpoint.id]
            if delivery.status != "pending" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert delivery.status == "succeeded"
        assert len(delivery.attempts) == 1
        assert delivery.last_attempt is not None
        assert delivery.last_attempt.status_code == 200
        api.webhook_endpoints.delete(endpoint.id)
