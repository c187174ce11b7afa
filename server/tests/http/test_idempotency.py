"""``Idempotency-Key`` on POST: replay, conflicts, in-flight claims, retention, scoping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import func, insert, select, update

from commerce_api.accounts import service as accounts
from commerce_api.idempotency import service as idempotency
from commerce_api.storage.db import Database
from commerce_api.storage.tables import idempotency_keys, products
from tests import helpers
from tests.conftest import KeyFactory
from tests.factories import order_body
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error
from tests.orders.test_orders import account_of, create_product, snapshot

REPLAYED = "idempotent-replayed"


def keyed(key: str, idempotency_key: str) -> dict[str, str]:
    return {**bearer(key), "Idempotency-Key": idempotency_key}


def raw_headers(key: str, idempotency_key: str) -> dict[bytes, bytes]:
    """Headers as bytes, so that any octet (latin-1) reaches the server unchanged."""
    return {
        b"Authorization": f"Bearer {key}".encode(),
        b"Idempotency-Key": idempotency_key.encode("latin-1"),
    }


async def post(
    client: httpx.AsyncClient,
    path: str,
    key: str,
    idempotency_key: str,
    body: object | None = None,
) -> httpx.Response:
    if body is None:
        return await client.post(path, headers=keyed(key, idempotency_key))
    return await client.post(path, json=body, headers=keyed(key, idempotency_key))


async def key_rows(db: Database) -> list[Any]:
    async with db.read() as conn:
        return list((await conn.execute(select(idempotency_keys))).all())


async def set_key_times(
    db: Database, key: str, *, created_at: datetime | None = None, locked_at: datetime | None
) -> None:
    values: dict[str, datetime] = {}
    if created_at is not None:
        values["created_at"] = created_at
    if locked_at is not None:
        values["locked_at"] = locked_at
    async with db.write() as conn:
        await conn.execute(
            update(idempotency_keys).where(idempotency_keys.c.key == key).values(**values)
        )


async def insert_key_row(
    db: Database,
    scope: str,
    key: str,
    fingerprint: str,
    *,
    state: str = "in_flight",
    age: timedelta = timedelta(0),
    lock_age: timedelta | None = None,
) -> None:
    now = datetime.now(UTC)
    row: dict[str, object] = {
        "scope": scope,
        "key": key,
        "fingerprint": fingerprint,
        "state": state,
        "created_at": now - age,
        "locked_at": now - (age if lock_age is None else lock_age),
    }
    if state == "done":
        row |= {"response_status": 201, "response_headers": {}, "response_body": b"{}"}
    async with db.write() as conn:
        await conn.execute(insert(idempotency_keys).values(**row))


def order_fingerprint(body: object) -> str:
    return idempotency.fingerprint("POST", "/v1/orders", "", orjson.dumps(body))


async def product_stock(db: Database, product_id: str) -> int:
    async with db.read() as conn:
        count = await conn.scalar(
            select(products.c.inventory_count).where(products.c.id == product_id)
        )
    assert isinstance(count, int)
    return count


# --- replay ------------------------------------------------------------------------------------


async def test_the_same_request_with_the_same_key_is_replayed_not_repeated(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=10)
    body = order_body((product_id, 3))
    first = await post(client, "/v1/orders", client_key, "order-1", body)
    assert first.status_code == 201, first.text
    assert REPLAYED not in first.headers
    after_first = await snapshot(db)

    second = await post(client, "/v1/orders", client_key, "order-1", body)
    assert second.status_code == 201
    assert second.headers[REPLAYED] == "true"
    assert second.content == first.content
    assert second.headers["location"] == first.headers["location"]
    assert second.headers["content-type"].startswith("application/json")
    assert second.headers["x-request-id"] != first.headers["x-request-id"]
    assert await snapshot(db) == after_first
    assert after_first.orders == 1
    assert after_first.events == 1
    assert await product_stock(db, product_id) == 7


async def test_json_key_order_and_whitespace_do_not_make_a_different_request(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    first = await post(client, "/v1/orders", client_key, "reordered", body)
    assert first.status_code == 201, first.text
    reordered = (
        '{ "shipping_address": {"country": "US", "postal_code": "12345", '
        '"city": "Springfield", "street": "1 Main St"},\n'
        f'  "items": [{{"quantity": 1, "product_id": "{product_id}"}}],  '
        '"customer_id": "cus_123" }'
    )
    second = await client.post(
        "/v1/orders",
        content=reordered.encode(),
        headers={**keyed(client_key, "reordered"), "Content-Type": "application/json"},
    )
    assert second.status_code == 201, second.text
    assert second.headers[REPLAYED] == "true"
    assert second.json() == first.json()
    assert (await snapshot(db)).orders == 1


async def test_a_request_without_a_key_is_never_replayed(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    for _ in range(2):
        response = await client.post("/v1/orders", json=body, headers=bearer(client_key))
        assert response.status_code == 201
        assert REPLAYED not in response.headers
    assert (await snapshot(db)).orders == 2
    assert await key_rows(db) == []


async def test_the_stored_record_holds_the_response_encrypted(
    db: Database, app: FastAPI, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    first = await post(client, "/v1/orders", client_key, "stored", body)
    [row] = await key_rows(db)
    assert row.scope == await account_of(db, client_key)
    assert row.key == "stored"
    assert row.fingerprint == order_fingerprint(body)
    assert row.state == "done"
    assert row.response_status == 201
    # Encrypted at rest (a stored body may carry a webhook secret).
    assert first.content not in bytes(row.response_body)
    secret_box = app.state.services.secret_box
    assert secret_box.decrypt_bytes(bytes(row.response_body)) == first.content
    assert row.response_headers["location"] == first.headers["location"]


async def test_a_different_request_with_the_same_key_is_422(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    first = await post(client, "/v1/orders", client_key, "k", order_body((product_id, 1)))
    assert first.status_code == 201
    before = await snapshot(db)
    different = await post(client, "/v1/orders", client_key, "k", order_body((product_id, 2)))
    assert_error(different, 422, "invalid_request", "Idempotency-Key")
    assert REPLAYED not in different.headers
    # The same key on another endpoint is a different request too.
    elsewhere = await post(client, f"/v1/orders/{first.json()['id']}/cancel", client_key, "k")
    assert_error(elsewhere, 422, "invalid_request", "Idempotency-Key")
    assert await snapshot(db) == before
    again = await post(client, "/v1/orders", client_key, "k", order_body((product_id, 1)))
    assert again.headers[REPLAYED] == "true"


# --- in flight, abandoned, expired ------------------------------------------------------------


async def test_a_request_whose_first_attempt_is_in_flight_is_409(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    scope = await account_of(db, client_key)
    await insert_key_row(db, scope, "busy", order_fingerprint(body))
    before = await snapshot(db)
    response = await post(client, "/v1/orders", client_key, "busy", body)
    assert_error(response, 409, "invalid_request", "Idempotency-Key")
    assert REPLAYED not in response.headers
    assert await snapshot(db) == before
    [row] = await key_rows(db)
    assert row.state == "in_flight"


async def test_a_different_request_while_the_first_is_in_flight_is_422(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    scope = await account_of(db, client_key)
    await insert_key_row(db, scope, "busy", order_fingerprint(order_body(("prod_a", 1))))
    response = await post(client, "/v1/orders", client_key, "busy", order_body(("prod_b", 1)))
    assert_error(response, 422, "invalid_request", "Idempotency-Key")


async def test_an_abandoned_in_flight_claim_is_taken_over_after_its_lease(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    scope = await account_of(db, client_key)
    stale = idempotency.LEASE + timedelta(seconds=5)
    await insert_key_row(db, scope, "crashed", order_fingerprint(body), lock_age=stale)
    response = await post(client, "/v1/orders", client_key, "crashed", body)
    assert response.status_code == 201, response.text
    assert REPLAYED not in response.headers
    [row] = await key_rows(db)
    assert row.state == "done"
    replay = await post(client, "/v1/orders", client_key, "crashed", body)
    assert replay.headers[REPLAYED] == "true"
    assert replay.content == response.content


async def test_an_in_flight_claim_within_its_lease_is_not_taken_over(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    body = order_body(("prod_a", 1))
    scope = await account_of(db, client_key)
    recent = idempotency.LEASE - timedelta(seconds=10)
    await insert_key_row(db, scope, "slow", order_fingerprint(body), lock_age=recent)
    response = await post(client, "/v1/orders", client_key, "slow", body)
    assert_error(response, 409, "invalid_request", "Idempotency-Key")


async def test_a_key_older_than_24_hours_is_treated_as_new(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    first = await post(client, "/v1/orders", client_key, "daily", body)
    assert first.status_code == 201
    long_ago = datetime.now(UTC) - idempotency.RETENTION - timedelta(minutes=1)
    await set_key_times(db, "daily", created_at=long_ago, locked_at=long_ago)

    again = await post(client, "/v1/orders", client_key, "daily", body)
    assert again.status_code == 201, again.text
    assert REPLAYED not in again.headers
    assert again.json()["id"] != first.json()["id"]
    assert (await snapshot(db)).orders == 2
    [row] = await key_rows(db)
    assert row.created_at > long_ago + timedelta(hours=1)

    replay = await post(client, "/v1/orders", client_key, "daily", body)
    assert replay.headers[REPLAYED] == "true"
    assert replay.json()["id"] == again.json()["id"]


async def test_an_expired_key_may_be_reused_for_a_different_request(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    first = await post(client, "/v1/orders", client_key, "reuse", order_body((product_id, 1)))
    assert first.status_code == 201
    long_ago = datetime.now(UTC) - timedelta(hours=25)
    await set_key_times(db, "reuse", created_at=long_ago, locked_at=long_ago)
    other = await post(client, "/v1/orders", client_key, "reuse", order_body((product_id, 2)))
    assert other.status_code == 201, other.text
    assert other.json()["items"][0]["quantity"] == 2


async def test_a_key_just_under_24_hours_old_still_replays(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    first = await post(client, "/v1/orders", client_key, "almost", body)
    nearly = datetime.now(UTC) - idempotency.RETENTION + timedelta(minutes=5)
    await set_key_times(db, "almost", created_at=nearly, locked_at=nearly)
    replay = await post(client, "/v1/orders", client_key, "almost", body)
    assert replay.headers[REPLAYED] == "true"
    assert replay.content == first.content


async def test_prune_deletes_only_keys_older_than_the_retention(db: Database) -> None:
    hour = timedelta(hours=1)
    await insert_key_row(db, "acct_a", "old-done", "f", state="done", age=25 * hour)
    await insert_key_row(db, "acct_a", "old-in-flight", "f", age=48 * hour)
    await insert_key_row(db, "acct_a", "recent", "f", state="done", age=23 * hour)
    await insert_key_row(db, "acct_b", "new", "f", age=timedelta(0))
    assert await idempotency.prune(db) == 2
    assert sorted(row.key for row in await key_rows(db)) == ["new", "recent"]
    assert await idempotency.prune(db) == 0


# --- what is stored ----------------------------------------------------------------------------


async def test_an_error_response_is_stored_and_replayed_even_after_the_cause_is_gone(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=1)
    body = order_body((product_id, 2))
    first = await post(client, "/v1/orders", client_key, "too-many", body)
    assert_error(first, 409, "invalid_request", "items[0].quantity")
    assert REPLAYED not in first.headers

    restock = await client.patch(
        f"/v1/products/{product_id}", json={"inventory_count": 50}, headers=bearer(admin_key)
    )
    assert restock.status_code == 200, restock.text
    replay = await post(client, "/v1/orders", client_key, "too-many", body)
    assert_error(replay, 409, "invalid_request", "items[0].quantity")
    assert replay.headers[REPLAYED] == "true"
    assert replay.content == first.content
    assert (await snapshot(db)).orders == 0

    fresh = await post(client, "/v1/orders", client_key, "too-many-2", body)
    assert fresh.status_code == 201, fresh.text


@pytest.mark.parametrize(
    ("body", "status", "details"),
    [
        ({"customer_id": "c"}, 400, "items"),
        (order_body(("prod_doesnotexist", 1)), 404, "items[0].product_id"),
    ],
)
async def test_validation_and_not_found_errors_are_stored_and_replayed(
    db: Database,
    client: httpx.AsyncClient,
    client_key: str,
    body: dict[str, object],
    status: int,
    details: str,
) -> None:
    first = await post(client, "/v1/orders", client_key, "bad", body)
    assert_error(first, status, "invalid_request" if status == 400 else "not_found", details)
    [row] = await key_rows(db)
    assert (row.state, row.response_status) == ("done", status)
    replay = await post(client, "/v1/orders", client_key, "bad", body)
    assert replay.status_code == status
    assert replay.headers[REPLAYED] == "true"
    assert replay.content == first.content


async def test_a_server_error_is_not_stored_so_a_retry_runs_again(
    db: Database,
    client: httpx.AsyncClient,
    product_in_stock: str,
    client_key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    product_id = product_in_stock
    body = order_body((product_id, 2))
    helpers.crash_after_writing_orders(monkeypatch, "transient", times=1)
    failed = await post(client, "/v1/orders", client_key, "retry-me", body)
    assert_error(failed, 500, "server_error")
    assert await key_rows(db) == []
    assert (await snapshot(db)).orders == 0
    assert await product_stock(db, product_id) == 10

    retried = await post(client, "/v1/orders", client_key, "retry-me", body)
    assert retried.status_code == 201, retried.text
    assert REPLAYED not in retried.headers
    assert await product_stock(db, product_id) == 8
    [row] = await key_rows(db)
    assert (row.state, row.response_status) == ("done", 201)


async def test_an_unauthenticated_request_is_not_stored(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    rejected = await post(client, "/v1/orders", "sk_sandbox_" + "x" * 32, "auth", body)
    assert_error(rejected, 401, "unauthorized")
    assert await key_rows(db) == []
    accepted = await post(client, "/v1/orders", client_key, "auth", body)
    assert accepted.status_code == 201
    assert REPLAYED not in accepted.headers


# --- the key itself ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_key",
    ["", "k" * 256, "tab\there", "bell\x07", "del\x7f"],
    ids=["empty", "too-long", "tab", "control", "delete"],
)
async def test_an_invalid_key_is_400_naming_the_header(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str, bad_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    before = await snapshot(db)
    response = await client.post(
        "/v1/orders",
        json=order_body((product_id, 1)),
        headers=raw_headers(client_key, bad_key),
    )
    assert_error(response, 400, "invalid_request", "Idempotency-Key")
    assert await snapshot(db) == before
    assert await key_rows(db) == []


async def test_a_non_ascii_key_is_400_naming_the_header(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    response = await client.post(
        "/v1/orders",
        json=order_body((product_id, 1)),
        headers=raw_headers(client_key, "caf\xe9"),
    )
    assert_error(response, 400, "invalid_request", "Idempotency-Key")
    assert await key_rows(db) == []


@pytest.mark.parametrize(
    "good_key",
    ["k" * 255, "a", "3f2c1e9a-8b7d-4c6e-9f1a-2b3c4d5e6f70", "with space and ~!@#$%^&*()"],
    ids=["255-chars", "one-char", "uuid", "punctuation"],
)
async def test_any_printable_ascii_key_up_to_255_characters_is_accepted(
    client: httpx.AsyncClient, admin_key: str, client_key: str, good_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    first = await post(client, "/v1/orders", client_key, good_key, body)
    assert first.status_code == 201, first.text
    replay = await post(client, "/v1/orders", client_key, good_key, body)
    assert replay.headers[REPLAYED] == "true"


async def test_keys_are_scoped_to_the_account(
    db: Database,
    client: httpx.AsyncClient,
    product_in_stock: str,
    client_key: str,
    make_key: KeyFactory,
) -> None:
    product_id = product_in_stock
    body = order_body((product_id, 1))
    other = await make_key()
    mine = await post(client, "/v1/orders", client_key, "shared", body)
    theirs = await post(client, "/v1/orders", other, "shared", body)
    assert mine.status_code == theirs.status_code == 201
    assert REPLAYED not in theirs.headers
    assert mine.json()["id"] != theirs.json()["id"]
    assert (await snapshot(db)).orders == 2
    # A different body under another account's key is not a conflict either.
    third = await post(
        client, "/v1/orders", await make_key(), "shared", order_body((product_id, 3))
    )
    assert third.status_code == 201, third.text


async def test_two_keys_of_one_account_share_its_idempotency_keys(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    async with db.write() as conn:
        rotated = await accounts.create_key(conn, "sandbox", account_id=account_id)
    product_id = await create_product(client, admin_key)
    body = order_body((product_id, 1))
    first = await post(client, "/v1/orders", client_key, "rotation", body)
    second = await post(client, "/v1/orders", rotated.secret, "rotation", body)
    assert second.headers[REPLAYED] == "true"
    assert second.content == first.content


async def test_the_key_is_ignored_on_reads(client: httpx.AsyncClient, client_key: str) -> None:
    response = await client.get("/v1/orders", headers=keyed(client_key, ""))
    assert response.status_code == 200


# --- other endpoints ---------------------------------------------------------------------------


async def test_creating_a_product_with_an_admin_key_is_replayed(
    db: Database, client: httpx.AsyncClient, admin_key: str
) -> None:
    body = {
        "name": "Lamp",
        "description": "",
        "price": 30,
        "category": "home",
        "inventory_count": 2,
    }
    first = await post(client, "/v1/products", admin_key, "lamp", body)
    assert first.status_code == 201, first.text
    second = await post(client, "/v1/products", admin_key, "lamp", body)
    assert second.status_code == 201
    assert second.headers[REPLAYED] == "true"
    assert second.content == first.content
    assert second.headers["location"] == first.headers["location"]
    async with db.read() as conn:
        assert await conn.scalar(select(func.count()).select_from(products)) == 1
    conflict = await post(client, "/v1/products", admin_key, "lamp", {**body, "price": 31})
    assert_error(conflict, 422, "invalid_request", "Idempotency-Key")


async def test_a_cancel_with_a_key_is_replayed_instead_of_409(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = (await post(client, "/v1/orders", client_key, "o", order_body((product_id, 4)))).json()
    path = f"/v1/orders/{order['id']}/cancel"
    first = await post(client, path, client_key, "cancel-1")
    assert first.status_code == 200, first.text
    assert REPLAYED not in first.headers
    replay = await post(client, path, client_key, "cancel-1")
    assert replay.status_code == 200
    assert replay.headers[REPLAYED] == "true"
    assert replay.content == first.content
    assert await product_stock(db, product_id) == 10  # restored once, not twice
    assert (await snapshot(db)).events == 2
    fresh = await post(client, path, client_key, "cancel-2")
    assert_error(fresh, 409, "invalid_request", "status")


async def test_a_fulfil_with_a_key_is_replayed_instead_of_409(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    product_id = await create_product(client, admin_key)
    order = (await post(client, "/v1/orders", client_key, "o", order_body((product_id, 1)))).json()
    path = f"/v1/orders/{order['id']}/fulfill"
    first = await post(client, path, admin_key, "ship-it")
    assert first.status_code == 200, first.text
    replay = await post(client, path, admin_key, "ship-it")
    assert replay.headers[REPLAYED] == "true"
    assert replay.content == first.content
    assert (await snapshot(db)).events == 2
    refused = await post(client, path, admin_key, "ship-it-again")
    assert_error(refused, 409, "invalid_request", "status")
    # The refusal itself is stored and replayed.
    refused_again = await post(client, path, admin_key, "ship-it-again")
    assert refused_again.headers[REPLAYED] == "true"
    assert refused_again.status_code == 409
