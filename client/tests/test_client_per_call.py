"""Per-call control: ``with_options`` (timeout, retries, headers) and ``with_response`` (a
call's status, headers, request id and rate-limit figures with its result, per call)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from client_testing import ADDRESS, MockAPI, order_json, product_json

import commerce_client
from commerce_client import Order, Product, ResponseInfo, WithResponse


def test_with_options_changes_one_call_and_leaves_the_client_alone(sleeps: list[float]) -> None:
    api = MockAPI().reply(json=product_json())
    with api.client(timeout=30) as client:
        quick = client.with_options(timeout=2.5, extra_headers={"X-Trace": "abc"})
        quick.products.get("prod_1")
        assert api.last.extensions["timeout"] == httpx.Timeout(2.5).as_dict()
        assert api.last.headers["x-trace"] == "abc"
        assert api.last.headers["authorization"].startswith("Bearer sk_sandbox_")

        client.products.get("prod_1")
        assert api.last.extensions["timeout"] == httpx.Timeout(30).as_dict()
        assert "x-trace" not in api.last.headers
        assert (client.timeout, client.extra_headers) == (30, {})


def test_with_options_max_retries_applies_to_that_call_only(sleeps: list[float]) -> None:
    api = MockAPI().reply(503)
    with api.client(max_retries=2) as client:
        with pytest.raises(commerce_client.ServerError):
            client.with_options(max_retries=0).products.get("prod_1")
        assert len(api.requests) == 1
        with pytest.raises(commerce_client.ServerError):
            client.products.get("prod_1")
        assert len(api.requests) == 1 + 3


def test_extra_headers_cannot_replace_the_key() -> None:
    api = MockAPI().reply(json=product_json())
    with api.client() as client:
        client.with_options(extra_headers={"Authorization": "Bearer other"}).products.get("p")
    assert api.last.headers["authorization"] != "Bearer other"


def test_with_options_refuses_a_bad_retry_count() -> None:
    with MockAPI().client() as client, pytest.raises(ValueError, match="max_retries"):
        client.with_options(max_retries=-1)


def test_a_copy_shares_the_connections_and_closing_it_closes_nothing() -> None:
    client = commerce_client.Client(api_key="sk_sandbox_" + "a" * 32)
    copy = client.with_options(timeout=1)
    copy.close()
    assert not client._http.is_closed
    client.close()
    assert client._http.is_closed


def test_with_response_returns_the_result_and_its_response(sleeps: list[float]) -> None:
    api = (
        MockAPI()
        .reply(503)
        .reply(
            201,
            json=order_json(),
            headers={"X-Request-Id": "req_order", "X-RateLimit-Remaining": "7"},
        )
    )
    with api.client() as client:
        result = client.with_response(
            client.orders.create,
            customer_id="cus_1",
            items=[{"product_id": "prod_1", "quantity": 3}],
            shipping_address=ADDRESS,
            idempotency_key="key-1",
        )
    assert isinstance(result, WithResponse)
    assert isinstance(result.data, Order)
    info = result.response
    assert isinstance(info, ResponseInfo)
    assert (info.status_code, info.request_id, info.retries) == (201, "req_order", 1)
    assert info.rate_limit is not None
    assert info.rate_limit.remaining == 7
    assert info.headers["x-request-id"] == "req_order"
    assert api.last.headers["idempotency-key"] == "key-1"


def test_with_response_needs_a_call_to_the_api() -> None:
    with MockAPI().client() as client, pytest.raises(TypeError):
        client.with_response(lambda: None)


async def test_concurrent_async_calls_each_get_their_own_response() -> None:
    """``last_rate_limit`` is shared; ``with_response`` is per call, even side by side."""

    async def respond(request: httpx.Request) -> httpx.Response:
        product_id = request.url.path.rsplit("/", 1)[-1]
        await asyncio.sleep(0.05 if product_id == "prod_slow" else 0)
        return httpx.Response(
            200,
            json=product_json(id=product_id),
            headers={"X-Request-Id": f"req_{product_id}"},
        )

    http = httpx.AsyncClient(transport=httpx.MockTransport(respond))
    async with commerce_client.AsyncClient(
        api_key="sk_sandbox_" + "a" * 32, base_url="https://api.test/v1", http_client=http
    ) as client:
        slow, fast = await asyncio.gather(
            client.with_response(client.products.get, "prod_slow"),
            client.with_response(client.products.get, "prod_fast"),
        )
    assert isinstance(slow.data, Product)
    assert (slow.data.id, slow.response.request_id) == ("prod_slow", "req_prod_slow")
    assert (fast.data.id, fast.response.request_id) == ("prod_fast", "req_prod_fast")
