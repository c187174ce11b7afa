"""``GET /v1/orders`` as issue 31 has it: newest first, ``created_gte`` / ``created_lt``, and
the cursor ``starting_after`` (keyset: orders placed while a client pages never shift it), on
both backends; and the list queries run on an index, in its order, without a sort."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection

from commerce_api.app.services import Services
from commerce_api.core.ids import new_id
from commerce_api.storage.db import Database
from tests.conftest import KeyFactory
from tests.factories import place_ok
from tests.helpers import bearer
from tests.http.test_error_contract import assert_error
from tests.orders.test_orders import account_of, create_product, insert_orders, list_orders


def ids(page: dict[str, Any]) -> list[str]:
    return [order["id"] for order in page["data"]]


async def test_the_list_is_newest_first_then_by_id_descending(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    oldest_first = await insert_orders(db, account_id, 9, same_time_every=3)  # ties on time
    page = await list_orders(client, client_key)
    assert ids(page) == oldest_first[::-1]
    stamps = [order["created_at"] for order in page["data"]]
    assert stamps == sorted(stamps, reverse=True)
    for tied in range(0, 9, 3):  # within one created_at, ids descend
        group = ids(page)[tied : tied + 3]
        assert group == sorted(group, reverse=True)


async def test_created_gte_and_created_lt_bound_the_list_as_a_half_open_range(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    at = await insert_orders(db, account_id, 5)  # 12:00:00 … 12:00:04
    window = {"created_gte": "2026-01-01T12:00:01Z", "created_lt": "2026-01-01T12:00:03Z"}
    page = await list_orders(client, client_key, **window)
    assert ids(page) == [at[2], at[1]]
    assert page["pagination"] == {"total": 2, "limit": 20, "offset": 0, "has_more": False}
    assert ids(await list_orders(client, client_key, created_gte="2026-01-01T12:00:03Z")) == [
        at[4],
        at[3],
    ]
    assert ids(await list_orders(client, client_key, created_lt="2026-01-01T12:00:01Z")) == [at[0]]
    # The same moment in another zone, with fractions; a lower-case t and z.
    shifted = {"created_gte": "2026-01-01T13:00:01.000+01:00", "created_lt": "2026-01-01t12:00:03z"}
    assert ids(await list_orders(client, client_key, **shifted)) == [at[2], at[1]]
    empty = await list_orders(client, client_key, created_gte="2026-01-01T12:00:05Z")
    assert empty["data"] == []
    assert empty["pagination"]["total"] == 0


async def test_the_time_range_combines_with_status_and_customer(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    await insert_orders(db, account_id, 3, customer_id="alice")
    fulfilled = await insert_orders(db, account_id, 3, status="fulfilled", customer_id="alice")
    await insert_orders(db, account_id, 3, customer_id="bob")
    params = {"status": "fulfilled", "customer_id": "alice", "created_gte": "2026-01-01T12:00:01Z"}
    assert ids(await list_orders(client, client_key, **params)) == [fulfilled[2], fulfilled[1]]


async def test_starting_after_pages_through_each_order_once_while_orders_arrive(
    db: Database, client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    existing = (await insert_orders(db, account_id, 25, same_time_every=4))[::-1]
    product_id = await create_product(client, admin_key, inventory_count=100)
    seen: list[str] = []
    arrived: list[str] = []
    cursor: dict[str, str] = {}
    while True:
        page = await list_orders(client, client_key, limit=7, **cursor)
        seen += ids(page)
        remaining = len(existing) - len(seen)
        pagination = page["pagination"]
        assert pagination["total"] == len(existing) + len(arrived)
        assert pagination["offset"] == pagination["total"] - remaining - len(page["data"])
        assert pagination["has_more"] == (remaining > 0)
        if not pagination["has_more"]:
            break
        cursor = {"starting_after": seen[-1]}
        arrived.append((await place_ok(client, client_key, (product_id, 1)))["id"])
    assert seen == existing
    # With offsets instead, the orders that arrived push the same orders onto the next page.
    first = await list_orders(client, client_key, limit=7)
    await place_ok(client, client_key, (product_id, 1))
    second = await list_orders(client, client_key, limit=7, offset=7)
    assert ids(first)[-1] == ids(second)[0]


async def test_starting_after_keeps_the_filters_and_needs_no_match_itself(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    pending = await insert_orders(db, account_id, 4)  # 12:00:00 … 12:00:03
    fulfilled = await insert_orders(db, account_id, 4, status="fulfilled")  # the same times
    # Each order's place in the list: (seconds after START, id).
    key = {
        order: (second, order)
        for group in (pending, fulfilled)
        for second, order in enumerate(group)
    }

    def after(cursor: str, among: list[str]) -> list[str]:
        return sorted(
            (o for o in among if key[o] < key[cursor]), key=lambda o: key[o], reverse=True
        )

    page = await list_orders(client, client_key, status="pending", starting_after=pending[2])
    assert ids(page) == [pending[1], pending[0]]
    assert page["pagination"] == {"total": 4, "limit": 20, "offset": 2, "has_more": False}
    # A cursor outside the filter (an order fulfilled since the page before, say) still marks
    # its place: the pending orders after it.
    page = await list_orders(client, client_key, status="pending", starting_after=fulfilled[2])
    assert ids(page) == after(fulfilled[2], pending)
    ranged = await list_orders(
        client, client_key, starting_after=pending[3], created_gte="2026-01-01T12:00:02Z"
    )
    in_range = [order for order in key if key[order][0] >= 2]
    assert ids(ranged) == after(pending[3], in_range)


async def test_the_last_order_as_cursor_gives_an_empty_last_page(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    at = await insert_orders(db, account_id, 3)
    page = await list_orders(client, client_key, starting_after=at[0], offset=0)
    assert page == {
        "data": [],
        "pagination": {"total": 3, "limit": 20, "offset": 3, "has_more": False},
    }


async def test_an_admin_key_pages_every_account_with_the_cursor(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=100)
    other = await make_key()
    placed = [
        (await place_ok(client, key, (product_id, 1)))["id"]
        for key in (client_key, other, client_key, other)
    ]
    seen: list[str] = []
    cursor: dict[str, str] = {}
    while True:
        page = await list_orders(client, admin_key, limit=3, **cursor)
        seen += ids(page)
        if not page["pagination"]["has_more"]:
            break
        cursor = {"starting_after": seen[-1]}
    assert seen == placed[::-1]


@pytest.mark.parametrize(
    ("params", "details"),
    [
        ({"created_gte": "yesterday"}, "created_gte"),
        ({"created_gte": "2026-01-01"}, "created_gte"),
        ({"created_gte": "2026-01-01T00:00:00"}, "created_gte"),  # no zone
        ({"created_gte": "1767268800"}, "created_gte"),  # a Unix time is not RFC 3339
        ({"created_gte": "2026-13-01T00:00:00Z"}, "created_gte"),
        ({"created_gte": "2026-01-01T00:00:00 01:00"}, "created_gte"),  # a `+` sent unencoded
        ({"created_gte": "2026-01-01 00:00:00Z"}, "created_gte"),  # RFC 3339's T
        ({"created_lt": ""}, "created_lt"),
        ({"created_lt": "2026-01-01T25:00:00Z"}, "created_lt"),
        ({"starting_after": ""}, "starting_after"),
        ({"starting_after": "ord_" + "x" * 61}, "starting_after"),
    ],
)
async def test_bad_window_parameters_are_400_naming_them(
    client: httpx.AsyncClient, client_key: str, params: dict[str, str], details: str
) -> None:
    response = await client.get("/v1/orders", params=params, headers=bearer(client_key))
    assert_error(response, 400, "invalid_request", details)
    assert f"`{details}`" in response.json()["error"]["message"]


async def test_an_offset_beside_the_cursor_counts_from_it(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    account_id = await account_of(db, client_key)
    at = await insert_orders(db, account_id, 6)
    page = await list_orders(client, client_key, starting_after=at[4], offset=2, limit=1)
    assert ids(page) == [at[1]]
    assert page["pagination"] == {"total": 6, "limit": 1, "offset": 4, "has_more": True}
    past = await list_orders(client, client_key, starting_after=at[4], offset=5)
    assert past == {
        "data": [],
        "pagination": {"total": 6, "limit": 20, "offset": 7, "has_more": False},
    }


async def test_a_bound_beyond_the_years_utc_can_hold_takes_in_everything(
    db: Database, client: httpx.AsyncClient, client_key: str
) -> None:
    """A schema-valid time whose UTC falls before year 1 or after 9999 is as early (late) as
    any: it bounds nothing."""
    account_id = await account_of(db, client_key)
    at = await insert_orders(db, account_id, 2)
    everything = {
        "created_gte": "0001-01-01T00:00:00+01:00",
        "created_lt": "9999-12-31T23:59:59-01:00",
    }
    assert ids(await list_orders(client, client_key, **everything)) == at[::-1]


async def test_a_cursor_the_key_cannot_see_is_404_naming_starting_after(
    client: httpx.AsyncClient, admin_key: str, client_key: str, make_key: KeyFactory
) -> None:
    product_id = await create_product(client, admin_key, inventory_count=10)
    theirs = (await place_ok(client, await make_key(), (product_id, 1)))["id"]
    unknown = new_id("ord")
    messages = {}
    for cursor in (unknown, theirs, "nope", new_id("evt")):
        response = await client.get(
            "/v1/orders", params={"starting_after": cursor}, headers=bearer(client_key)
        )
        assert_error(response, 404, "not_found", "starting_after")
        messages[cursor] = response.json()["error"]["message"].replace(cursor, "…")
    assert messages[theirs] == messages[unknown]  # another account's order is not revealed
    admin = await client.get(
        "/v1/orders", params={"starting_after": theirs}, headers=bearer(admin_key)
    )
    assert admin.status_code == 200, admin.text


# --- the queries' plans ---------------------------------------------------------------------------


@contextmanager
def statements(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """The SELECTs on ``orders`` the block runs on ``db``'s read engine, with parameters."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Connection, _cursor: Any, sql: str, params: Any, *_: Any) -> None:
        if sql.lstrip().upper().startswith("SELECT") and "FROM orders" in sql:
            seen.append((sql, params))

    engine = db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def plan(db: Database, backend: str, sql: str, params: Any) -> str:
    async with db.read() as conn:
        if backend == "sqlite":
            result = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
            return "\n".join(str(row[-1]) for row in result)
        # Tiny tables: a scan, or a sort of a few rows, costs the planner next to nothing, and
        # which it picks moves with the table's statistics. Off, the plan shows whether an
        # index gives the page in order.
        await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        await conn.exec_driver_sql("SET LOCAL enable_sort = off")
        result = await conn.exec_driver_sql(f"EXPLAIN {sql}", params)
        return "\n".join(str(row[0]) for row in result)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"status": "pending"},
        {"customer_id": "cus_1"},
        {"created_gte": "2026-01-01T12:00:01Z", "created_lt": "2026-01-01T12:00:03Z"},
    ],
)
async def test_the_cursor_page_reads_an_index_in_order_without_sorting(
    db: Database,
    services: Services,
    backend: str,
    client: httpx.AsyncClient,
    client_key: str,
    params: dict[str, str],
) -> None:
    account_id = await account_of(db, client_key)
    at = await insert_orders(db, account_id, 5)
    with statements(services.db) as seen:
        await list_orders(client, client_key, starting_after=at[3], **params)
    [page_query] = [(sql, p) for sql, p in seen if "ORDER BY" in sql]
    text = await plan(services.db, backend, *page_query)
    assert "ix_orders_" in text, text  # the planner's pick among them is its own
    if backend == "sqlite":
        assert "TEMP B-TREE" not in text, text
    else:
        assert "Sort" not in text, text
