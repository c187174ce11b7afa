"""Issue 32 item 3: the keyed non-order POSTs (cancel, fulfil, product creation, webhook
endpoints, redelivery) record their ``Idempotency-Key`` in the change's own transaction, as
orders do. A request cut short mid-change — its process killed, its task cancelled, its
connection gone — leaves no claim behind, so its retry with the same key runs at once (a claim
committed before the change used to refuse it with 409 "still being processed" for its 60 s
lease); and two requests racing with one key still change things once.

The cancel is held mid-change by the order's row lock, taken by another client of the database
(PostgreSQL: where the change and the claim could come apart across transactions).
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import pytest

from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer, running_app

pytestmark = pytest.mark.postgresql

REPLAYED = "idempotent-replayed"


async def _wait_until_a_backend_waits_on_a_lock(conn: asyncpg.Connection) -> None:
    for _ in range(200):
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        if waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the cancel never reached the order's lock")


async def test_a_keyed_cancel_cut_short_mid_change_leaves_its_retry_free_to_run(
    postgresql_database_url: str,
) -> None:
    async with running_app(make_settings(postgresql_database_url)) as (app, http):
        db = app.state.services.db
        customer = await factories.new_customer(db, "Cut short")
        product_id = await factories.new_product(db, stock=10)
        placed = await http.post(
            "/v1/orders",
            json=factories.order_body((product_id, 3)),
            headers={**bearer(customer.secret), "Idempotency-Key": "order"},
        )
        assert placed.status_code == 201, placed.text
        path = f"/v1/orders/{placed.json()['id']}/cancel"
        headers = {**bearer(customer.secret), "Idempotency-Key": "cancel-once"}

        other = await asyncpg.connect(postgresql_database_url)
        try:
            holding = other.transaction()
            await holding.start()
            await other.execute(
                "SELECT 1 FROM orders WHERE id = $1 FOR UPDATE", placed.json()["id"]
            )
            first = asyncio.create_task(http.post(path, headers=headers))
            await _wait_until_a_backend_waits_on_a_lock(other)
            first.cancel()  # the request dies mid-change, as a killed process's would
            with contextlib.suppress(asyncio.CancelledError):
                await first
            await holding.rollback()
            keys = await other.fetchval(
                "SELECT count(*) FROM idempotency_keys WHERE key = 'cancel-once'"
            )
            assert keys == 0, "a claim outlived the request that made it"
        finally:
            await other.close()

        retried = await http.post(path, headers=headers)
        assert retried.status_code == 200, retried.text  # at once, not a 409 for 60 s
        assert REPLAYED not in retried.headers
        assert retried.json()["status"] == "canceled"
        again = await http.post(path, headers=headers)
        assert again.headers[REPLAYED] == "true"
        assert again.content == retried.content


async def test_two_keyed_creations_racing_with_one_key_create_one_product(
    postgresql_database_url: str,
) -> None:
    async with running_app(make_settings(postgresql_database_url)) as (app, http):
        db = app.state.services.db
        admin = (await factories.new_key(db, role="admin")).secret
        headers = {**bearer(admin), "Idempotency-Key": "one-lamp"}
        body = factories.product_body(name="Lamp")
        answers = await asyncio.gather(
            *(http.post("/v1/products", json=body, headers=headers) for _ in range(4))
        )
        assert {answer.status_code for answer in answers} == {201}, [a.text for a in answers]
        assert len({answer.json()["id"] for answer in answers}) == 1
        assert sum(REPLAYED not in answer.headers for answer in answers) == 1
        listed = await http.get("/v1/products", params={"q": "Lamp"}, headers=bearer(admin))
        assert listed.status_code == 200, listed.text
        assert [product["name"] for product in listed.json()["data"]] == ["Lamp"]
