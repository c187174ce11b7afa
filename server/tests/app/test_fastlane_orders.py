"""``POST /v1/orders`` through the fast lane (``commerce_api.app.fastlane``), on both backends.

The fast lane answers a plain, valid order itself (placed by the order desk, in a batch);
anything unusual falls through to the FastAPI route with the body it read handed back. Both
backends take the same path. What it promises, checked here:

- a fast-lane 201 has the full stack's shape: status, headers, body;
- every request it does not answer gets exactly the full stack's error, writes nothing, and is
  counted against the quota exactly once;
- a 429, an out-of-stock 409, an idempotent replay and a key conflict are the full stack's;
- a body that arrives in several ASGI messages is read whole (or handed back whole).

A spy wraps ``FastLane._place_order`` and records whether it answered (True) or fell through
(False); ``lane.off`` sends every order to the full stack, to compare. A counting wrapper around
the rate-limit store records every hit, and the limiter's clock is frozen (no window edge).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update
from starlette.types import Message, Receive, Scope, Send

from commerce_api.accounts.keys import generate_key
from commerce_api.app.factory import create_app
from commerce_api.app.fastlane import FastLane
from commerce_api.core.errors import MAX_BODY_BYTES
from commerce_api.http.context import RequestContext
from commerce_api.ratelimit.limiter import RateLimiter, RateLimitStore
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from commerce_api.storage.tables import idempotency_keys, products
from tests import helpers
from tests.conftest import KeyFactory, make_settings
from tests.factories import order_body
from tests.helpers import TIMESTAMP, bearer, order_scope
from tests.http.test_error_contract import assert_error
from tests.orders.test_orders import (
    ITEM_FIELDS,
    ORDER_FIELDS,
    ORDER_ID,
    account_of,
    create_product,
    snapshot,
)
from tests.ratelimit.test_rate_limits import RESET, FakeClock

QUOTA = 40  # development tier: the client keys of these tests
PRODUCTION_QUOTA = 60  # an admin key (no account) counts at the production quota
REPLAYED = "idempotent-replayed"
NOSNIFF = "x-content-type-options"
RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")
SUCCESS_HEADERS = frozenset(
    {"content-type", "content-length", "location", "x-request-id", NOSNIFF, *RATE_HEADERS}
)
ERROR_HEADERS = frozenset(
    {"content-type", "content-length", "x-request-id", NOSNIFF, *RATE_HEADERS}
)
ORIGINAL_PLACE_ORDER = FastLane._place_order


# --- spies -------------------------------------------------------------------------------------


@dataclass
class LaneSpy:
    """What the fast lane did with each order: True answered, False fell through."""

    answered: list[bool] = field(default_factory=list)
    off: bool = False  # send every order to the full stack

    def take(self) -> list[bool]:
        taken, self.answered = self.answered, []
        return taken


@pytest.fixture
def lane(monkeypatch: pytest.MonkeyPatch) -> LaneSpy:
    record = LaneSpy()

    async def spy(
        self: FastLane,
        route: Any,
        scope: Scope,
        ctx: RequestContext,
        receive: Receive,
        send: Send,
        started: float,
    ) -> Receive | None:
        if record.off:
            record.answered.append(False)
            return receive
        result = await ORIGINAL_PLACE_ORDER(self, route, scope, ctx, receive, send, started)
        record.answered.append(result is None)
        return result

    monkeypatch.setattr(FastLane, "_place_order", spy)
    return record


class CountingStore:
    """The app's rate-limit store, counting the hits of each key."""

    def __init__(self, store: RateLimitStore) -> None:
        self.store = store
        self.hits: Counter[str] = Counter()

    async def hit(self, key: str, window_start: int, window_seconds: int, limit: int) -> int:
        self.hits[key] += 1
        return await self.store.hit(key, window_start, window_seconds, limit)

    async def close(self) -> None:
        await self.store.close()


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(
        database_url, rate_limit_development=QUOTA, rate_limit_production=PRODUCTION_QUOTA
    )


@pytest.fixture
def limiter(app: FastAPI) -> RateLimiter:
    found: RateLimiter = app.state.services.rate_limiter
    return found


@pytest.fixture
def hits(limiter: RateLimiter) -> Counter[str]:
    """Rate-limit hits by key (``acct_…``, ``key_…``, ``ip:…``), with a frozen clock."""
    limiter.clock = FakeClock()
    counting = CountingStore(limiter.store)
    limiter.store = counting
    return counting.hits


@dataclass(frozen=True)
class World:
    """A client key (with its account), an admin key, a product in stock."""

    client_key: str
    account_id: str
    admin_key: str
    product_id: str


@pytest.fixture
async def world(
    db: Database,
    client: httpx.AsyncClient,
    client_key: str,
    admin_key: str,
    hits: Counter[str],
) -> World:
    product_id = await create_product(client, admin_key, inventory_count=10)
    return World(client_key, await account_of(db, client_key), admin_key, product_id)


# --- helpers -----------------------------------------------------------------------------------


def keyed(key: str, idempotency_key: str) -> dict[str, str]:
    return {**bearer(key), "Idempotency-Key": idempotency_key}


def remaining(response: httpx.Response) -> int:
    return int(response.headers["x-ratelimit-remaining"])


def expect_path(lane: LaneSpy, backend: str, answered: bool) -> None:
    """The fast lane answered (or fell through), on either backend."""
    taken = lane.take()
    assert taken == [answered], "answered by the fast lane" if answered else "fell through"


async def key_rows(db: Database) -> list[Any]:
    async with db.read() as conn:
        return list((await conn.execute(select(idempotency_keys))).all())


async def assert_nothing_written(db: Database, world: World) -> None:
    """No order, line, event or stored key; the product's stock as it was (10)."""
    after = await snapshot(db)
    assert (after.orders, after.order_items, after.events) == (0, 0, 0)
    assert after.stock[world.product_id] == 10
    assert await key_rows(db) == []


async def stock_of(db: Database, product_id: str) -> int:
    return (await snapshot(db)).stock[product_id]


def assert_order_created(response: httpx.Response, product_id: str, quantity: int) -> None:
    """A 201 with the contract's headers and order body."""
    assert response.status_code == 201, response.text
    assert set(response.headers.keys()) == SUCCESS_HEADERS, response.headers
    assert response.headers["content-type"] == "application/json"
    assert response.headers["content-length"] == str(len(response.content))
    assert response.headers["x-request-id"].startswith("req_")
    assert response.headers["x-ratelimit-limit"] == str(QUOTA)
    assert response.headers["x-ratelimit-reset"] == str(RESET)
    order = response.json()
    assert set(order) == ORDER_FIELDS
    assert ORDER_ID.fullmatch(order["id"])
    assert response.headers["location"] == f"/v1/orders/{order['id']}"
    assert order["status"] == "pending"
    assert order["customer_id"] == "cus_123"
    assert order["currency"] == "USD"
    assert TIMESTAMP.fullmatch(order["created_at"])
    assert order["updated_at"] == order["created_at"]
    assert (order["fulfilled_at"], order["canceled_at"]) == (None, None)
    [item] = order["items"]
    assert set(item) == ITEM_FIELDS
    assert (item["product_id"], item["quantity"], item["name"]) == (
        product_id,
        quantity,
        "Notebook",
    )
    assert item["unit_price"] == 12.5
    assert order["total"] == 12.5 * quantity


def comparable(response: httpx.Response) -> tuple[int, bytes, frozenset[str], dict[str, str]]:
    """What two answers to the same request must share: status, body, header names and the
    values of the headers that do not change from one request to the next."""
    varying = {"x-request-id", "x-ratelimit-remaining"}
    return (
        response.status_code,
        response.content,
        frozenset(response.headers.keys()),
        {name: value for name, value in response.headers.items() if name not in varying},
    )


# --- a plain order: the fast lane's answer has the full stack's shape --------------------------


async def test_a_plain_order_is_answered_by_the_fast_lane_with_the_full_stack_shape(
    db: Database,
    client: httpx.AsyncClient,
    app: FastAPI,
    world: World,
    lane: LaneSpy,
    backend: str,
    hits: Counter[str],
) -> None:
    body = order_body((world.product_id, 2))

    fast = await client.post("/v1/orders", json=body, headers=bearer(world.client_key))
    expect_path(lane, backend, answered=True)
    assert_order_created(fast, world.product_id, 2)
    assert remaining(fast) == QUOTA - 1
    assert hits[world.account_id] == 1

    lane.off = True
    full = await client.post("/v1/orders", json=body, headers=bearer(world.client_key))
    expect_path(lane, backend, answered=False)
    assert_order_created(full, world.product_id, 2)
    assert remaining(full) == QUOTA - 2
    assert hits[world.account_id] == 2

    assert sorted(fast.headers.keys()) == sorted(full.headers.keys())
    assert fast.headers["x-request-id"] != full.headers["x-request-id"]
    fast_order, full_order = fast.json(), full.json()
    assert fast_order["id"] != full_order["id"]
    for name in ("id", "created_at", "updated_at"):
        del fast_order[name], full_order[name]
    assert fast_order == full_order

    # What the fast lane answered is what the database holds.
    for response in (fast, full):
        stored = await client.get(response.headers["location"], headers=bearer(world.client_key))
        assert stored.status_code == 200, stored.text
        assert stored.json() == response.json()
    after = await snapshot(db)
    assert (after.orders, after.order_items, after.events) == (2, 2, 2)
    assert after.stock[world.product_id] == 6
    # and the catalogue's (cached) detail shows the stock the orders left
    detail = await client.get(f"/v1/products/{world.product_id}", headers=bearer(world.client_key))
    assert detail.status_code == 200, detail.text
    assert detail.json()["inventory_count"] == 6
    assert app.state.services.orders.stats[1] == 2  # each order placed by the order desk


async def test_each_order_gets_a_fresh_request_id_on_either_path(
    client: httpx.AsyncClient, world: World, lane: LaneSpy, backend: str
) -> None:
    """Request ids are fresh per request, on either path."""
    ids = set()
    for _ in range(5):
        response = await client.post(
            "/v1/orders",
            json=order_body((world.product_id, 1)),
            headers=bearer(world.client_key),
        )
        assert response.status_code == 201, response.text
        expect_path(lane, backend, answered=True)
        ids.add(response.headers["x-request-id"])
    assert len(ids) == 5


# --- unusual requests get the full stack's error ----------------------------------------------
# Most fall through to the routes before anything is counted; an order whose body is valid is
# counted and handed to the route's endpoint here, so its endpoint's own refusals (a product on
# two lines, a key without an account) are answered by the fast lane, the same bytes.


@dataclass(frozen=True)
class Unusual:
    name: str
    status: int
    code: str | None  # None: a success (201)
    details: str | None
    auth: str = "client"  # client | none | unknown | admin
    content: bytes | None = None  # None: a valid order for the world's product
    content_type: str = "application/json"
    path: str = "/v1/orders"
    idempotency_key: str | None = None
    extra_headers: tuple[tuple[str, str], ...] = ()
    answered_here: bool = False  # the endpoint refused it: the fast lane answers


VALID = "__valid__"


def over_the_line_limit(product_id: str) -> list[dict[str, object]]:
    """Two lines of 6,000 for one product: merged, one line of 12,000, over the per-line limit
    (10,000 by default), which the endpoint checks."""
    return [{"product_id": product_id, "quantity": 6000}] * 2


UNUSUAL = [
    Unusual("invalid-json", 400, "invalid_request", "body", content=b'{"customer_id": "c", '),
    Unusual("not-utf8", 400, "invalid_request", "body", content=b'{"customer_id": "\xff"}'),
    Unusual("array-body", 400, "invalid_request", "body", content=b"[]"),
    Unusual("too-large", 413, "invalid_request", "body", content=b"__large__"),
    Unusual("empty-body", 400, "invalid_request", "body", content=b""),
    Unusual("no-content-type", 415, "invalid_request", "Content-Type", content_type=""),
    Unusual(
        "missing-field",
        400,
        "invalid_request",
        "customer_id",
        content=orjson.dumps({"items": [], "shipping_address": {}}),
    ),
    Unusual("unknown-field", 400, "invalid_request", "coupon", content=b"__extra__"),
    Unusual(
        "merged-lines-over-the-limit",
        400,
        "invalid_request",
        "items[1].quantity",
        content=b"__over__",
        answered_here=True,
    ),
    Unusual("zero-quantity", 400, "invalid_request", "items[0].quantity", content=b"__zero__"),
    Unusual("text-plain", 415, "invalid_request", "Content-Type", content_type="text/plain"),
    Unusual("form", 415, "invalid_request", "Content-Type", content_type="application/x-www-form"),
    Unusual("query-string", 400, "invalid_request", "expand", path="/v1/orders?expand=items"),
    Unusual(
        "malformed-idempotency-key",
        400,
        "invalid_request",
        "Idempotency-Key",
        idempotency_key="tab\there",
    ),
    Unusual("empty-idempotency-key", 400, "invalid_request", "Idempotency-Key", idempotency_key=""),
    Unusual("no-key", 401, "unauthorized", "Authorization", auth="none"),
    Unusual("unknown-key", 401, "unauthorized", "Authorization", auth="unknown"),
    Unusual("admin-key", 403, "unauthorized", "Authorization", auth="admin", answered_here=True),
    Unusual(
        "no-key-and-invalid-body",
        401,
        "unauthorized",
        "Authorization",
        auth="none",
        content=b"{nope",
    ),
    # The routes read the first of two Authorization headers; the fast lane leaves it to them.
    Unusual(
        "two-authorization-headers",
        201,
        None,
        None,
        extra_headers=(("Authorization", "Bearer sk_sandbox_other"),),
    ),
    Unusual(
        "two-content-type-headers",
        201,
        None,
        None,
        extra_headers=(("Content-Type", "application/json"),),
    ),
    Unusual("charset-parameter", 201, None, None, content_type="application/json; charset=utf-8"),
    Unusual("upper-case-media-type", 201, None, None, content_type="Application/JSON"),
]


def unusual_request(case: Unusual, world: World) -> tuple[str, list[tuple[str, str]], bytes]:
    product = {"product_id": world.product_id, "quantity": 1}
    valid = order_body((world.product_id, 1))
    content = case.content
    if content is None:
        content = orjson.dumps(valid)
    elif content == b"__extra__":
        content = orjson.dumps({**valid, "coupon": "FREE"})
    elif content == b"__over__":
        content = orjson.dumps({**valid, "items": over_the_line_limit(world.product_id)})
    elif content == b"__large__":  # valid JSON, padded past the 1 MiB limit
        content = orjson.dumps(valid) + b" " * MAX_BODY_BYTES
    elif content == b"__zero__":
        content = orjson.dumps({**valid, "items": [{**product, "quantity": 0}]})
    headers = [("Content-Type", case.content_type)] if case.content_type else []
    if case.auth == "client":
        headers.append(("Authorization", f"Bearer {world.client_key}"))
    elif case.auth == "unknown":
        headers.append(("Authorization", f"Bearer {generate_key('sandbox').secret}"))
    elif case.auth == "admin":
        headers.append(("Authorization", f"Bearer {world.admin_key}"))
    else:
        assert case.auth == "none"
    if case.idempotency_key is not None:
        headers.append(("Idempotency-Key", case.idempotency_key))
    headers.extend(case.extra_headers)
    return case.path, headers, content


def counted_as(case: Unusual, world: World, hits: Counter[str]) -> tuple[int, int]:
    """``(first remaining, hits so far)`` for the quota this request counts against."""
    if case.auth in {"none", "unknown"}:
        return QUOTA - 1, hits["ip:127.0.0.1"]
    if case.auth == "admin":
        return PRODUCTION_QUOTA - 2, sum(
            count for key, count in hits.items() if key.startswith("key_")
        )  # the admin created the product: one request before
    return QUOTA - 1, hits[world.account_id]


@pytest.mark.parametrize("case", UNUSUAL, ids=lambda case: case.name)
async def test_an_unusual_order_gets_the_full_stacks_error(
    case: Unusual,
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    hits: Counter[str],
) -> None:
    path, headers, content = unusual_request(case, world)
    first_remaining, before = counted_as(case, world, hits)
    responses: list[httpx.Response] = []
    for off in (False, True, False):  # the fast lane, the full stack, the fast lane again
        lane.off = off
        response = await client.post(path, content=content, headers=headers)
        expect_path(lane, backend, answered=case.answered_here and not off)
        if case.code is None:
            assert_order_created(response, world.product_id, 1)
        else:
            assert_error(response, case.status, case.code, case.details)
            assert set(response.headers.keys()) >= ERROR_HEADERS, response.headers
            assert REPLAYED not in response.headers
        # counted once per request, whichever path answered
        assert remaining(response) == first_remaining - len(responses), response.headers
        responses.append(response)
        assert counted_as(case, world, hits)[1] == before + len(responses)

    fast, full, again = (comparable(response) for response in responses)
    if case.code is None:
        assert (await snapshot(db)).orders == 3
        return
    assert fast == full == again, "the fast lane's answer differs from the full stack's"
    if case.status == 401:
        assert responses[0].headers.get("www-authenticate") == "Bearer"
    await assert_nothing_written(db, world)


# --- the quota ---------------------------------------------------------------------------------


async def test_over_quota_an_order_is_429_with_retry_after_and_writes_nothing(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    hits: Counter[str],
) -> None:
    for expected in range(QUOTA - 1, 0, -1):
        response = await client.get("/v1/products", headers=bearer(world.client_key))
        assert response.status_code == 200, response.text
        assert remaining(response) == expected
    body = order_body((world.product_id, 1))
    last = await client.post("/v1/orders", json=body, headers=bearer(world.client_key))
    expect_path(lane, backend, answered=True)
    assert_order_created(last, world.product_id, 1)
    assert remaining(last) == 0
    assert hits[world.account_id] == QUOTA
    before = await snapshot(db)

    for attempt, idempotency_key in enumerate([None, "over-quota"], start=1):
        headers = bearer(world.client_key)
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        refused = await client.post("/v1/orders", json=body, headers=headers)
        expect_path(lane, backend, answered=True)
        error = assert_error(refused, 429, "rate_limited", "X-RateLimit-Limit")
        assert str(QUOTA) in error["message"]
        assert refused.headers["retry-after"] == str(RESET - int(FakeClock().now))
        assert (refused.headers["x-ratelimit-limit"], remaining(refused)) == (str(QUOTA), 0)
        assert refused.headers["x-ratelimit-reset"] == str(RESET)
        assert "location" not in refused.headers
        assert hits[world.account_id] == QUOTA + attempt, "counted exactly once"
    assert await snapshot(db) == before
    assert await key_rows(db) == []


async def test_over_quota_an_invalid_order_is_429_from_the_full_stack_counted_once(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    hits: Counter[str],
) -> None:
    for _ in range(QUOTA):
        response = await client.get("/v1/products", headers=bearer(world.client_key))
        assert response.status_code == 200
    refused = await client.post(
        "/v1/orders", json={"customer_id": "c"}, headers=bearer(world.client_key)
    )
    expect_path(lane, backend, answered=False)
    assert_error(refused, 429, "rate_limited", "X-RateLimit-Limit")
    assert refused.headers["retry-after"].isdigit()
    assert hits[world.account_id] == QUOTA + 1
    assert (await snapshot(db)).orders == 0


# --- out of stock ------------------------------------------------------------------------------


async def test_out_of_stock_is_409_from_the_fast_lane_as_from_the_full_stack(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    hits: Counter[str],
) -> None:
    body = order_body((world.product_id, 11))
    fast = await client.post("/v1/orders", json=body, headers=bearer(world.client_key))
    expect_path(lane, backend, answered=True)
    error = assert_error(fast, 409, "invalid_request", "items[0].quantity")
    assert error["message"] == (
        f"Not enough stock for `{world.product_id}`: 11 requested, 10 available."
    )
    assert set(fast.headers.keys()) == ERROR_HEADERS
    assert REPLAYED not in fast.headers

    lane.off = True
    full = await client.post("/v1/orders", json=body, headers=bearer(world.client_key))
    expect_path(lane, backend, answered=False)
    assert comparable(full) == comparable(fast)
    assert remaining(fast) - remaining(full) == 1
    assert hits[world.account_id] == 2

    await assert_nothing_written(db, world)


async def test_out_of_stock_with_a_key_is_stored_and_replayed(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
) -> None:
    body = order_body((world.product_id, 11))
    first = await client.post("/v1/orders", json=body, headers=keyed(world.client_key, "oos"))
    expect_path(lane, backend, answered=True)
    assert_error(first, 409, "invalid_request", "items[0].quantity")
    assert REPLAYED not in first.headers
    [row] = await key_rows(db)
    assert (row.key, row.state, row.response_status) == ("oos", "done", 409)

    # Restocked meanwhile: the stored 409 is still the answer to this key.
    async with db.write() as conn:
        await conn.execute(
            update(products).where(products.c.id == world.product_id).values(inventory_count=100)
        )
    for off in (False, True):
        lane.off = off
        replay = await client.post("/v1/orders", json=body, headers=keyed(world.client_key, "oos"))
        expect_path(lane, backend, answered=not off)
        assert_error(replay, 409, "invalid_request", "items[0].quantity")
        assert replay.headers[REPLAYED] == "true"
        assert replay.content == first.content
    assert (await snapshot(db)).orders == 0
    assert await stock_of(db, world.product_id) == 100


# --- idempotent replay -------------------------------------------------------------------------


async def test_the_same_key_and_body_replay_the_order_and_take_stock_once(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    hits: Counter[str],
) -> None:
    body = order_body((world.product_id, 3))
    first = await client.post("/v1/orders", json=body, headers=keyed(world.client_key, "k-1"))
    expect_path(lane, backend, answered=True)
    assert_order_created(first, world.product_id, 3)
    assert REPLAYED not in first.headers
    for off in (False, True, False):
        lane.off = off
        replay = await client.post("/v1/orders", json=body, headers=keyed(world.client_key, "k-1"))
        expect_path(lane, backend, answered=not off)
        assert replay.status_code == 201, replay.text
        assert replay.headers[REPLAYED] == "true"
        assert replay.content == first.content
        assert replay.json()["id"] == first.json()["id"]
        assert replay.headers["location"] == first.headers["location"]
        assert set(replay.headers.keys()) == SUCCESS_HEADERS | {REPLAYED}
    assert hits[world.account_id] == 4
    after = await snapshot(db)
    assert (after.orders, after.events) == (1, 1)
    assert after.stock[world.product_id] == 7


async def test_the_same_key_with_a_different_body_is_422_on_either_path(
    db: Database, client: httpx.AsyncClient, world: World, lane: LaneSpy, backend: str
) -> None:
    first = await client.post(
        "/v1/orders",
        json=order_body((world.product_id, 1)),
        headers=keyed(world.client_key, "k-2"),
    )
    assert first.status_code == 201, first.text
    lane.take()
    different = order_body((world.product_id, 2))
    answers = []
    for off in (False, True):
        lane.off = off
        response = await client.post(
            "/v1/orders", json=different, headers=keyed(world.client_key, "k-2")
        )
        expect_path(lane, backend, answered=not off)
        assert_error(response, 422, "invalid_request", "Idempotency-Key")
        assert REPLAYED not in response.headers
        answers.append(comparable(response))
    assert answers[0] == answers[1]
    after = await snapshot(db)
    assert after.orders == 1
    assert after.stock[world.product_id] == 9


async def test_a_key_first_used_through_the_full_stack_is_replayed_by_the_fast_lane(
    db: Database, client: httpx.AsyncClient, world: World, lane: LaneSpy, backend: str
) -> None:
    body = orjson.dumps(order_body((world.product_id, 2)))
    first = await client.post(
        "/v1/orders",
        content=body,
        headers={
            **keyed(world.client_key, "cross"),
            "Content-Type": "application/json; charset=utf-8",
        },
    )
    expect_path(lane, backend, answered=False)
    assert first.status_code == 201, first.text
    replay = await client.post(
        "/v1/orders",
        content=body,
        headers={**keyed(world.client_key, "cross"), "Content-Type": "application/json"},
    )
    expect_path(lane, backend, answered=True)
    assert replay.headers[REPLAYED] == "true"
    assert replay.content == first.content
    assert await stock_of(db, world.product_id) == 8


# --- a body in several ASGI messages -----------------------------------------------------------


async def pieces(body: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize("size", [1, 7, 64])
async def test_an_order_sent_in_several_chunks_is_placed(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    size: int,
) -> None:
    body = orjson.dumps(order_body((world.product_id, 2)))
    response = await client.post(
        "/v1/orders",
        content=pieces(body, size),
        headers={
            **bearer(world.client_key),
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
        },
    )
    expect_path(lane, backend, answered=True)
    assert_order_created(response, world.product_id, 2)
    assert await stock_of(db, world.product_id) == 8


async def test_an_invalid_order_in_several_chunks_reaches_the_full_stack_whole(
    db: Database, client: httpx.AsyncClient, world: World, lane: LaneSpy, backend: str
) -> None:
    """The fast lane read every chunk before it gave up: they are handed back in order."""
    body = orjson.dumps(order_body((world.product_id, 2), customer_id=""))
    whole = await client.post("/v1/orders", content=body, headers=asgi_json(world))
    expect_path(lane, backend, answered=False)
    assert_error(whole, 400, "invalid_request", "customer_id")
    chunked = await client.post(
        "/v1/orders",
        content=pieces(body, 5),
        headers={**asgi_json(world), "Content-Length": str(len(body))},
    )
    expect_path(lane, backend, answered=False)
    assert comparable(chunked) == comparable(whole)
    assert (await snapshot(db)).orders == 0


def asgi_json(world: World) -> dict[str, str]:
    return {**bearer(world.client_key), "Content-Type": "application/json"}


class Exchange:
    """Calls the ASGI app directly with a body split into the given messages."""

    def __init__(self, messages: list[Message]) -> None:
        self.pending = list(messages)
        self.sent: list[Message] = []
        self.reads = 0

    async def receive(self) -> Message:
        self.reads += 1
        if self.pending:
            return self.pending.pop(0)
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        start, *bodies = self.sent
        assert start["type"] == "http.response.start"
        headers = {name.decode(): value.decode() for name, value in start["headers"]}
        return start["status"], headers, b"".join(part.get("body", b"") for part in bodies)


def split(body: bytes, cuts: list[int]) -> list[Message]:
    """``body`` as ``http.request`` messages cut at ``cuts`` (an empty one in the middle)."""
    bounds = [0, *cuts, len(body)]
    parts = [body[a:b] for a, b in itertools.pairwise(bounds)]
    parts.insert(1, b"")
    return [
        {"type": "http.request", "body": part, "more_body": index < len(parts) - 1}
        for index, part in enumerate(parts)
    ]


@pytest.mark.parametrize("idempotency_key", [None, "chunks"])
async def test_an_order_in_several_asgi_messages_called_directly(
    app: FastAPI,
    db: Database,
    world: World,
    lane: LaneSpy,
    backend: str,
    idempotency_key: str | None,
) -> None:
    body = orjson.dumps(order_body((world.product_id, 4)))
    messages = split(body, [1, 10, len(body) // 2, len(body) - 1])
    assert len(messages) == 6
    exchange = Exchange(messages)
    await app(
        order_scope(world.client_key, len(body), idempotency_key), exchange.receive, exchange.send
    )
    expect_path(lane, backend, answered=True)
    status, headers, content = exchange.response()
    assert status == 201, content
    order = orjson.loads(content)
    assert headers["location"] == f"/v1/orders/{order['id']}"
    assert headers["content-length"] == str(len(content))
    assert order["items"][0]["quantity"] == 4
    assert await stock_of(db, world.product_id) == 6
    if idempotency_key is not None:
        replay = Exchange(split(body, [3]))
        await app(
            order_scope(world.client_key, len(body), idempotency_key), replay.receive, replay.send
        )
        expect_path(lane, backend, answered=True)
        status, headers, again = replay.response()
        assert (status, headers[REPLAYED], again) == (201, "true", content)
        assert await stock_of(db, world.product_id) == 6


async def test_a_whole_body_is_not_waited_past_for_the_servers_end_of_body_message(
    app: FastAPI, db: Database, world: World, lane: LaneSpy, backend: str
) -> None:
    """granian sends a body's bytes and then, in a message of its own, its end: each a round
    trip through its I/O thread. Once Content-Length bytes have come the body is whole, and the
    order is placed without waiting for the second message."""
    body = orjson.dumps(order_body((world.product_id, 2)))
    exchange = Exchange(
        [
            {"type": "http.request", "body": body, "more_body": True},
            {"type": "http.request", "body": b"", "more_body": False},
        ]
    )
    await app(order_scope(world.client_key, len(body), None), exchange.receive, exchange.send)
    expect_path(lane, backend, answered=True)
    status, _headers, content = exchange.response()
    assert status == 201, content
    assert exchange.reads == 1  # the end-of-body message was never asked for
    assert await stock_of(db, world.product_id) == 8


async def test_a_body_shorter_than_its_content_length_is_left_to_the_full_stack(
    app: FastAPI, db: Database, world: World, lane: LaneSpy, backend: str
) -> None:
    """The fast lane does not place an order whose body does not match Content-Length."""
    body = orjson.dumps(order_body((world.product_id, 1)))
    exchange = Exchange(split(body, [5]))
    await app(order_scope(world.client_key, len(body) + 10, None), exchange.receive, exchange.send)
    expect_path(lane, backend, answered=False)
    assert exchange.sent, "the full stack answered"


# --- a validation error with a key is stored ---------------------------------------------------


@pytest.mark.parametrize(
    ("content", "details"),
    [
        (orjson.dumps({"customer_id": "c"}), "items"),
        (b'{"customer_id": ', None),
        (b"__over__", "items[1].quantity"),  # refused by the endpoint: the fast lane answers
    ],
    ids=["missing-items", "invalid-json", "merged-lines-over-the-limit"],
)
async def test_a_validation_error_with_a_key_is_stored_and_replayed(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    content: bytes,
    details: str | None,
) -> None:
    answered = content == b"__over__"
    if answered:
        lines = over_the_line_limit(world.product_id)
        content = orjson.dumps({**order_body((world.product_id, 1)), "items": lines})
    headers = {**keyed(world.client_key, "invalid"), "Content-Type": "application/json"}
    first = await client.post("/v1/orders", content=content, headers=headers)
    expect_path(lane, backend, answered=answered)
    assert_error(first, 400, "invalid_request", details)
    assert REPLAYED not in first.headers
    [row] = await key_rows(db)
    assert (row.state, row.response_status) == ("done", 400)

    for off in (False, True):
        lane.off = off
        replay = await client.post("/v1/orders", content=content, headers=headers)
        expect_path(lane, backend, answered=answered and not off)
        assert replay.status_code == 400
        assert replay.headers[REPLAYED] == "true"
        assert replay.content == first.content

    # A valid order under the same key is another request: 422, from whichever path.
    valid = order_body((world.product_id, 1))
    for off in (False, True):
        lane.off = off
        conflict = await client.post(
            "/v1/orders", json=valid, headers=keyed(world.client_key, "invalid")
        )
        expect_path(lane, backend, answered=not off)
        assert_error(conflict, 422, "invalid_request", "Idempotency-Key")
    assert (await snapshot(db)).orders == 0


# --- a crash ------------------------------------------------------------------------------------


async def test_a_crash_while_placing_is_the_full_stacks_500_and_stores_nothing(
    db: Database,
    client: httpx.AsyncClient,
    world: World,
    lane: LaneSpy,
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    helpers.crash_after_writing_orders(monkeypatch, "the disk caught fire")
    body = order_body((world.product_id, 1))
    answers = []
    for off in (False, True):
        lane.off = off
        response = await client.post(
            "/v1/orders", json=body, headers=keyed(world.client_key, "crash")
        )
        expect_path(lane, backend, answered=not off)
        error = assert_error(response, 500, "server_error")
        assert error["details"] == response.headers["x-request-id"]
        assert set(response.headers.keys()) == ERROR_HEADERS
        answers.append(frozenset(response.headers.keys()))
    assert answers[0] == answers[1]
    assert "the disk caught fire" in caplog.text
    after = await snapshot(db)
    assert (after.orders, after.events, after.stock[world.product_id]) == (0, 0, 10)
    assert await key_rows(db) == []


# --- concurrency -------------------------------------------------------------------------------


async def test_concurrent_fast_lane_orders_take_exactly_the_stock(
    db: Database, client: httpx.AsyncClient, world: World, lane: LaneSpy, backend: str
) -> None:
    """Twelve single-unit orders race for ten units: ten 201s, two 409s, stock 0."""
    responses = await asyncio.gather(
        *(
            client.post(
                "/v1/orders",
                json=order_body((world.product_id, 1)),
                headers=bearer(world.client_key),
            )
            for _ in range(12)
        )
    )
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [201] * 10 + [409] * 2
    for response in responses:
        if response.status_code == 409:
            assert_error(response, 409, "invalid_request", "items[0].quantity")
    taken = lane.take()
    assert taken == [True] * 12
    after = await snapshot(db)
    assert (after.orders, after.stock[world.product_id]) == (10, 0)
    assert sorted(remaining(response) for response in responses) == list(range(QUOTA - 12, QUOTA))


async def test_concurrent_orders_with_one_key_place_one_order(
    db: Database, client: httpx.AsyncClient, world: World, lane: LaneSpy, backend: str
) -> None:
    """Requests with one key never share a batch: the first places the order, the others
    replay it, on both backends. One order, stock taken once."""
    body = order_body((world.product_id, 2))
    responses = await asyncio.gather(
        *(
            client.post("/v1/orders", json=body, headers=keyed(world.client_key, "race"))
            for _ in range(6)
        )
    )
    created = [response for response in responses if response.status_code == 201]
    originals = [response for response in created if REPLAYED not in response.headers]
    assert len(originals) == 1, [response.status_code for response in responses]
    assert {response.json()["id"] for response in created} == {originals[0].json()["id"]}
    assert len(created) == 6, "every other attempt replays the first"
    assert lane.take() == [True] * 6
    after = await snapshot(db)
    assert (after.orders, after.stock[world.product_id]) == (1, 8)


async def test_without_rate_limiting_the_fast_lane_sends_no_rate_limit_headers(
    database_url: str, make_key: KeyFactory, lane: LaneSpy, backend: str
) -> None:
    application = create_app(make_settings(database_url, rate_limit_enabled=False))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            admin, key = await make_key("admin"), await make_key()
            product_id = await create_product(http, admin)
            answers = []
            for off in (False, True):
                lane.off = off
                response = await http.post(
                    "/v1/orders", json=order_body((product_id, 1)), headers=bearer(key)
                )
                expect_path(lane, backend, answered=not off)
                assert response.status_code == 201, response.text
                answers.append(frozenset(response.headers.keys()))
    assert answers[0] == answers[1] == SUCCESS_HEADERS - set(RATE_HEADERS)
