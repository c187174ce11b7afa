"""Each failure raises its typed error with the API's ``reason``, against a real
``commerce-api serve`` process (see conftest.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from client_e2e_server import serve
from client_testing import ADDRESS, E2EServer
from sqlalchemy import update

import commerce_client
from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Database
from commerce_api.storage.tables import idempotency_keys
from commerce_client import AsyncClient, Client, OrderItemParam

pytestmark = pytest.mark.slow


def items(product_id: str, quantity: int = 1) -> list[OrderItemParam]:
    return [{"product_id": product_id, "quantity": quantity}]


def create(
    api: Client, product_id: str, quantity: int = 1, customer: str = "", **kwargs: str
) -> commerce_client.Order:
    return api.orders.create(
        customer_id=customer or f"cus_{uuid.uuid4().hex}",
        items=items(product_id, quantity),
        shipping_address=ADDRESS,
        **kwargs,
    )


def test_out_of_stock_raises_insufficient_stock(api: Client, e2e_server: E2EServer) -> None:
    with pytest.raises(commerce_client.InsufficientStockError) as caught:
        create(api, e2e_server.sold_out)
    assert isinstance(caught.value, commerce_client.ConflictError)  # the class it refines
    assert caught.value.reason == "insufficient_stock"
    assert caught.value.code == "invalid_request"
    assert caught.value.details == "items[0].quantity"
    assert "insufficient_stock" in str(caught.value)


def test_three_bad_fields_are_three_problems(api: Client, e2e_server: E2EServer) -> None:
    with pytest.raises(commerce_client.ValidationFailedError) as caught:
        api.orders.create(
            customer_id="",
            items=items(e2e_server.books[4], 0),
            shipping_address={**ADDRESS, "country": "XX"},
        )
    assert caught.value.details == "customer_id", "details keeps naming the first"
    problems = caught.value.problems
    assert [problem.parameter for problem in problems] == [
        "customer_id",
        "items[0].quantity",
        "shipping_address.country",
    ]
    assert {problem.reason for problem in problems} == {"validation_failed"}
    assert all(problem.parameter in problem.message for problem in problems)


def test_canceling_twice_raises_invalid_transition(api: Client, e2e_server: E2EServer) -> None:
    order = create(api, e2e_server.books[5])
    api.orders.cancel(order.id)
    with pytest.raises(commerce_client.InvalidTransitionError) as caught:
        api.orders.cancel(order.id)
    assert caught.value.reason == "invalid_transition"
    assert caught.value.status_code == 409


def test_a_reused_idempotency_key_raises_idempotency_key_reused(
    api: Client, e2e_server: E2EServer
) -> None:
    key = str(uuid.uuid4())
    create(api, e2e_server.books[6], idempotency_key=key)
    with pytest.raises(commerce_client.IdempotencyKeyReusedError) as caught:
        create(api, e2e_server.books[6], quantity=2, idempotency_key=key)
    assert isinstance(caught.value, commerce_client.IdempotencyError)
    assert caught.value.reason == "idempotency_key_reused"


async def test_a_key_still_in_flight_is_retried_then_raises_idempotency_key_in_use(
    api: Client, e2e_server: E2EServer, e2e_workdir: Path, sleeps: list[float]
) -> None:
    key, customer = str(uuid.uuid4()), f"cus_{uuid.uuid4().hex}"
    create(api, e2e_server.books[7], customer=customer, idempotency_key=key)
    # As if that first request were still running: its claim fresh and unanswered.
    db = Database(f"sqlite:///{e2e_workdir / 'e2e.db'}")
    try:
        async with db.write() as conn:
            await conn.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.key == key)
                .values(state="in_flight", locked_at=utcnow())
            )
    finally:
        await db.dispose()
    with (
        Client(
            api_key=e2e_server.client_key, base_url=e2e_server.base_url, max_retries=1
        ) as client,
        pytest.raises(commerce_client.IdempotencyKeyInUseError) as caught,
    ):
        create(client, e2e_server.books[7], customer=customer, idempotency_key=key)
    assert caught.value.reason == "idempotency_key_in_use"
    assert len(sleeps) == 1  # retried once: the reason says it is safe


def test_an_invalid_value_raises_validation_failed(api: Client, e2e_server: E2EServer) -> None:
    with pytest.raises(commerce_client.ValidationFailedError) as caught:
        api.orders.create(
            customer_id="cus_1",
            items=items(e2e_server.books[0]),
            shipping_address={**ADDRESS, "country": "XX"},
        )
    assert caught.value.reason == "validation_failed"
    assert caught.value.details == "shipping_address.country"


def test_an_unknown_order_is_not_found(api: Client) -> None:
    with pytest.raises(commerce_client.NotFoundError) as caught:
        api.orders.get("ord_missing")
    assert caught.value.reason == "not_found"


def test_keys_say_why_they_are_refused(api: Client, e2e_server: E2EServer) -> None:
    with (
        Client(api_key="sk_sandbox_" + "x" * 32, base_url=e2e_server.base_url) as unknown,
        pytest.raises(commerce_client.AuthenticationError) as caught,
    ):
        unknown.products.list()
    assert caught.value.reason == "invalid_api_key"
    with (
        Client(api_key=e2e_server.admin_key, base_url=e2e_server.base_url) as admin,
        pytest.raises(commerce_client.PermissionDeniedError) as denied,
    ):
        create(admin, e2e_server.books[0])
    assert denied.value.reason == "forbidden"


def test_a_spent_quota_raises_quota_exceeded(e2e_server: E2EServer, e2e_workdir: Path) -> None:
    database_url = f"sqlite:///{e2e_workdir / 'e2e.db'}"
    limits = {"COMMERCE_RATE_LIMIT_PRODUCTION": "1"}  # the e2e account is a production one
    with (
        serve(e2e_workdir, database_url, "--no-dispatcher", env=limits) as url,
        Client(api_key=e2e_server.client_key, base_url=url, max_retries=0) as client,
    ):
        client.products.list()
        with pytest.raises(commerce_client.QuotaExceededError) as caught:
            client.products.list()
    assert isinstance(caught.value, commerce_client.RateLimitError)
    assert caught.value.reason == "quota_exceeded"
    assert caught.value.retry_after is not None
    assert caught.value.retry_after > 0


async def test_the_async_client_raises_the_same_typed_errors(e2e_server: E2EServer) -> None:
    async with AsyncClient(api_key=e2e_server.client_key, base_url=e2e_server.base_url) as client:
        with pytest.raises(commerce_client.InsufficientStockError) as caught:
            await client.orders.create(
                customer_id="cus_async",
                items=items(e2e_server.sold_out),
                shipping_address=ADDRESS,
            )
    assert caught.value.reason == "insufficient_stock"
