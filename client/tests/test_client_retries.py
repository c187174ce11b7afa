from __future__ import annotations

import random

import httpx
import pytest
from client_testing import ORDER_REQUEST, MockAPI, order_json, product_json

import commerce_client
from commerce_client import _retry
from commerce_client._retry import INITIAL_RETRY_DELAY, JITTER, MAX_RETRY_AFTER, MAX_RETRY_DELAY


def test_server_errors_are_retried_with_increasing_bounded_delays(sleeps: list[float]) -> None:
    api = MockAPI().error(503, "server_error")
    with api.client(max_retries=6) as client, pytest.raises(commerce_client.ServerError):
        client.products.get("prod_1")
    assert len(api.requests) == 7
    assert len(sleeps) == 6
    for retries_done, delay in enumerate(sleeps):
        base = min(INITIAL_RETRY_DELAY * 2**retries_done, MAX_RETRY_DELAY)
        assert base * (1 - JITTER) <= delay <= base
        assert delay <= MAX_RETRY_DELAY
    uncapped = [d for n, d in enumerate(sleeps) if INITIAL_RETRY_DELAY * 2**n < MAX_RETRY_DELAY]
    assert uncapped == sorted(uncapped)
    assert len(set(uncapped)) == len(uncapped)


def test_jitter_stays_within_its_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "random", lambda: 0.0)
    assert _retry.backoff_delay(0) == INITIAL_RETRY_DELAY
    monkeypatch.setattr(random, "random", lambda: 0.999999)
    assert _retry.backoff_delay(0) == pytest.approx(INITIAL_RETRY_DELAY * (1 - JITTER), rel=1e-5)
    assert _retry.backoff_delay(50) <= MAX_RETRY_DELAY


def test_a_retry_that_succeeds_returns_the_result(sleeps: list[float]) -> None:
    api = MockAPI().error(500, "server_error").error(502, "server_error").reply(json=product_json())
    with api.client() as client:
        assert client.products.get("prod_1").id == "prod_1"
    assert len(api.requests) == 3
    assert len(sleeps) == 2


def test_max_retries_zero_makes_one_attempt(sleeps: list[float]) -> None:
    api = MockAPI().error(500, "server_error")
    with api.client(max_retries=0) as client, pytest.raises(commerce_client.ServerError):
        client.products.get("prod_1")
    assert len(api.requests) == 1
    assert sleeps == []


def test_retry_after_is_honoured_on_429(sleeps: list[float]) -> None:
    api = MockAPI().error(429, "rate_limited", headers={"Retry-After": "7"})
    api.reply(json=product_json())
    with api.client() as client:
        client.products.get("prod_1")
    assert sleeps == [7.0]


def test_retry_after_is_honoured_on_503(sleeps: list[float]) -> None:
    api = MockAPI().error(503, "server_error", headers={"Retry-After": "2"})
    api.reply(json=product_json())
    with api.client() as client:
        client.products.get("prod_1")
    assert sleeps == [2.0]


def test_429_without_retry_after_backs_off(sleeps: list[float]) -> None:
    api = MockAPI().error(429, "rate_limited").reply(json=product_json())
    with api.client() as client:
        client.products.get("prod_1")
    assert INITIAL_RETRY_DELAY * (1 - JITTER) <= sleeps[0] <= INITIAL_RETRY_DELAY


def test_a_long_retry_after_is_raised_at_once(sleeps: list[float]) -> None:
    wait = str(int(MAX_RETRY_AFTER) + 1)
    api = MockAPI().error(429, "rate_limited", headers={"Retry-After": wait})
    with api.client() as client, pytest.raises(commerce_client.RateLimitError) as caught:
        client.products.get("prod_1")
    assert caught.value.retry_after == float(wait)
    assert len(api.requests) == 1
    assert sleeps == []


def test_retries_exhausted_raise_the_last_error(sleeps: list[float]) -> None:
    api = MockAPI().error(429, "rate_limited", headers={"Retry-After": "1"})
    with api.client(max_retries=2) as client, pytest.raises(commerce_client.RateLimitError):
        client.products.get("prod_1")
    assert len(api.requests) == 3
    assert sleeps == [1.0, 1.0]


def test_connection_errors_are_retried(sleeps: list[float]) -> None:
    api = MockAPI().fail(httpx.ConnectError("refused")).reply(json=product_json())
    with api.client() as client:
        assert client.products.get("prod_1").id == "prod_1"
    assert len(sleeps) == 1


def test_connection_errors_become_api_connection_error(sleeps: list[float]) -> None:
    api = MockAPI().fail(httpx.ConnectError("refused"))
    with api.client() as client, pytest.raises(commerce_client.APIConnectionError) as caught:
        client.products.get("prod_1")
    assert len(api.requests) == 3
    assert caught.value.status_code is None
    assert caught.value.code is None
    assert "ConnectError" in caught.value.message


def test_timeouts_become_api_timeout_error(sleeps: list[float]) -> None:
    api = MockAPI().fail(httpx.ReadTimeout("slow"))
    with api.client() as client, pytest.raises(commerce_client.APITimeoutError) as caught:
        client.products.get("prod_1")
    assert isinstance(caught.value, commerce_client.APIConnectionError)
    assert len(api.requests) == 3


def test_a_non_transient_transport_error_is_not_retried(sleeps: list[float]) -> None:
    api = MockAPI().fail(httpx.UnsupportedProtocol("gopher://"))
    with api.client() as client, pytest.raises(commerce_client.APIConnectionError):
        client.products.get("prod_1")
    assert len(api.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(sleeps: list[float], status: int) -> None:
    api = MockAPI().error(status, "invalid_request")
    with api.client() as client, pytest.raises(commerce_client.CommerceError):
        client.products.get("prod_1")
    assert len(api.requests) == 1


def test_every_post_gets_an_idempotency_key_reused_across_its_retries(
    sleeps: list[float],
) -> None:
    api = MockAPI().fail(httpx.ReadTimeout("slow")).error(503, "server_error")
    api.reply(201, order_json())
    with api.client() as client:
        client.orders.create(**ORDER_REQUEST)
    keys = {request.headers["idempotency-key"] for request in api.requests}
    assert len(api.requests) == 3
    assert len(keys) == 1
    assert len(keys.pop()) == 36  # a UUID


def test_each_call_gets_a_fresh_idempotency_key(sleeps: list[float]) -> None:
    api = MockAPI().reply(201, order_json())
    with api.client() as client:
        client.orders.create(**ORDER_REQUEST)
        client.orders.create(**ORDER_REQUEST)
        client.orders.cancel("ord_1")
        client.orders.fulfill("ord_1")
    keys = [request.headers["idempotency-key"] for request in api.requests]
    assert len(set(keys)) == 4


def test_a_caller_supplied_idempotency_key_is_used(sleeps: list[float]) -> None:
    api = MockAPI().error(500, "server_error").reply(201, order_json())
    with api.client() as client:
        client.orders.create(**ORDER_REQUEST, idempotency_key="order-42")
        client.orders.cancel("ord_1", idempotency_key="cancel-42")
    assert [r.headers["idempotency-key"] for r in api.requests] == [
        "order-42",
        "order-42",
        "cancel-42",
    ]


def test_gets_carry_no_idempotency_key() -> None:
    api = MockAPI().reply(json=product_json())
    with api.client() as client:
        client.products.get("prod_1")
    assert "idempotency-key" not in api.last.headers


def test_a_post_without_a_key_is_not_retried(sleeps: list[float]) -> None:
    # The client always sends a key; a request that somehow lacks one must not be repeated.
    request = httpx.Request("POST", "https://api.test/v1/orders")
    assert not _retry.is_repeatable(request)
    assert _retry.is_repeatable(httpx.Request("GET", "https://api.test/v1/orders"))
    keyed = httpx.Request("POST", "https://x/v1/orders", headers={"Idempotency-Key": "k"})
    assert _retry.is_repeatable(keyed)


def test_out_of_stock_409_is_not_retried(sleeps: list[float]) -> None:
    api = MockAPI().error(409, "invalid_request", "items[0].quantity", "Not enough stock.")
    with api.client() as client, pytest.raises(commerce_client.ConflictError) as caught:
        client.orders.create(**ORDER_REQUEST)
    assert caught.value.details == "items[0].quantity"
    assert len(api.requests) == 1
    assert sleeps == []


def test_illegal_transition_409_is_not_retried(sleeps: list[float]) -> None:
    api = MockAPI().error(409, "invalid_request", "status", "The order is canceled.")
    with api.client() as client, pytest.raises(commerce_client.ConflictError):
        client.orders.fulfill("ord_1")
    assert len(api.requests) == 1


def test_idempotency_key_in_flight_409_is_retried_with_the_same_key(
    sleeps: list[float],
) -> None:
    api = MockAPI().error(409, "invalid_request", "Idempotency-Key", "Still in flight.")
    api.reply(201, order_json(), headers={"Idempotent-Replayed": "true"})
    with api.client() as client:
        order = client.orders.create(**ORDER_REQUEST)
    assert order.id == "ord_1"
    assert len(api.requests) == 2
    assert len({r.headers["idempotency-key"] for r in api.requests}) == 1
    assert len(sleeps) == 1


@pytest.mark.parametrize(
    ("reason", "details", "retried"),
    [
        ("idempotency_key_in_use", "Idempotency-Key", True),
        ("insufficient_stock", "items[0].quantity", False),
        ("invalid_transition", "status", False),
        # The reason decides over ``details`` when the server gives one.
        ("insufficient_stock", "Idempotency-Key", False),
    ],
)
def test_a_409_is_retried_by_its_reason(
    reason: str, details: str, retried: bool, sleeps: list[float]
) -> None:
    api = MockAPI().error(409, "invalid_request", details, "Conflict.", reason=reason)
    api.reply(201, order_json(), headers={"Idempotent-Replayed": "true"})
    with api.client() as client:
        if retried:
            client.orders.create(**ORDER_REQUEST)
        else:
            with pytest.raises(commerce_client.ConflictError) as caught:
                client.orders.create(**ORDER_REQUEST)
            assert caught.value.reason == reason
    assert len(api.requests) == (2 if retried else 1)


def test_in_flight_409_that_persists_is_raised(sleeps: list[float]) -> None:
    api = MockAPI().error(409, "invalid_request", "Idempotency-Key", "Still in flight.")
    with api.client() as client, pytest.raises(commerce_client.ConflictError) as caught:
        client.orders.create(**ORDER_REQUEST)
    assert caught.value.details == "Idempotency-Key"
    assert len(api.requests) == 3


def test_rate_limit_headers_of_a_retried_response_are_kept(sleeps: list[float]) -> None:
    api = MockAPI().error(503, "server_error", headers={"X-RateLimit-Remaining": "5"})
    api.reply(json=product_json(), headers={"X-RateLimit-Remaining": "4"})
    with api.client() as client:
        client.products.get("prod_1")
        assert client.last_rate_limit is not None
        assert client.last_rate_limit.remaining == 4


async def test_async_client_retries_with_backoff(sleeps: list[float]) -> None:
    api = MockAPI().fail(httpx.ConnectError("refused")).error(500, "server_error")
    api.reply(201, order_json())
    async with api.async_client() as client:
        order = await client.orders.create(**ORDER_REQUEST)
    assert order.status == "pending"
    assert len(api.requests) == 3
    assert len({r.headers["idempotency-key"] for r in api.requests}) == 1
    assert len(sleeps) == 2
    assert sleeps[0] < sleeps[1] <= MAX_RETRY_DELAY


async def test_async_client_does_not_retry_out_of_stock(sleeps: list[float]) -> None:
    api = MockAPI().error(409, "invalid_request", "items[0].quantity")
    async with api.async_client() as client:
        with pytest.raises(commerce_client.ConflictError):
            await client.orders.create(**ORDER_REQUEST)
    assert len(api.requests) == 1


async def test_async_client_retries_in_flight_409_and_honours_retry_after(
    sleeps: list[float],
) -> None:
    api = MockAPI().error(409, "invalid_request", "Idempotency-Key")
    api.error(429, "rate_limited", headers={"Retry-After": "3"}).reply(201, order_json())
    async with api.async_client() as client:
        await client.orders.create(**ORDER_REQUEST, idempotency_key="mine")
    assert [r.headers["idempotency-key"] for r in api.requests] == ["mine"] * 3
    assert sleeps[1] == 3.0


def test_retry_after_as_an_http_date(sleeps: list[float]) -> None:
    api = MockAPI().error(
        503, "server_error", headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    api.reply(json=product_json())
    with api.client() as client:
        client.products.get("prod_1")
    assert sleeps == [0.0]  # a date in the past: retry at once
