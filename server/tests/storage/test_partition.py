"""Issue 32 item 3: a partition of one host never stalls another. Two app instances on one
PostgreSQL, A's link to it through a relay (``tests.round_trips``) that the test cuts silently —
nothing passes, nothing is closed, as a network drops packets — and B's direct.

A takes a hot product's row lock in a transaction and is cut off holding it: PostgreSQL ends A's
transaction by itself (``idle_in_transaction_session_timeout``: the session settings the service
sets on its own connections, ``storage.deadlines``), so B's order on that product, waiting on
the lock, succeeds within seconds. A's own requests meanwhile are 503s with ``Retry-After``
within 5 s (its transaction deadline terminates the connection the cut left hanging; a new one
meets the connect timeout; once a wait has run out, the next ones fail at once for a moment),
and A serves again by itself once the link heals, retried as ``Retry-After`` says.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from sqlalchemy import select

from commerce_api.http.middleware import DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS
from commerce_api.storage.deadlines import UNREACHABLE_SECONDS, DatabaseTimeout
from commerce_api.storage.tables import products
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer, running_app
from tests.http.test_error_contract import assert_error
from tests.round_trips import counting_relay

pytestmark = pytest.mark.postgresql

BOUND_SECONDS = 5.0  # the bound on every wait during a partition


async def test_a_host_cut_off_holding_a_row_lock_never_stalls_another(
    postgresql_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    async with counting_relay(postgresql_database_url) as relay:
        settings_a = make_settings(relay.url_for(postgresql_database_url))
        settings_b = make_settings(postgresql_database_url)
        async with (
            running_app(settings_a) as (app_a, http_a),
            running_app(settings_b) as (app_b, http_b),
        ):
            db_a, db_b = app_a.state.services.db, app_b.state.services.db
            customer = await factories.new_customer(db_b, "Partition")
            product_id = await factories.new_product(db_b, stock=10)
            body = factories.order_body((product_id, 1))

            def keyed(key: str) -> dict[str, str]:
                return {**bearer(customer.secret), "Idempotency-Key": key}

            for http, key in ((http_a, "warm-a"), (http_b, "warm-b")):
                response = await http.post("/v1/orders", json=body, headers=keyed(key))
                assert response.status_code == 201, response.text

            locked, cut = asyncio.Event(), asyncio.Event()

            async def hold_the_product_lock() -> None:
                async with db_a.write() as conn:
                    await conn.execute(
                        select(products.c.id).where(products.c.id == product_id).with_for_update()
                    )
                    locked.set()
                    await cut.wait()
                    await conn.execute(select(1))  # never answered: the link is cut

            holder = asyncio.create_task(hold_the_product_lock())
            await locked.wait()
            await relay.cut(silent=True)
            cut.set()

            started = loop.time()
            response = await http_b.post("/v1/orders", json=body, headers=keyed("b-during"))
            waited = loop.time() - started
            assert response.status_code == 201, response.text
            assert waited < BOUND_SECONDS, f"B waited {waited:.1f} s on A's lock"

            with pytest.raises(DatabaseTimeout):
                await holder  # A's own transaction ended at its deadline, client side
            # Past the moment A's waits fail at once after that one ran out: the next request
            # waits for the database again, and meets the cut.
            await asyncio.sleep(UNREACHABLE_SECONDS)

            caplog.clear()
            order_path = f"/v1/orders/{response.json()['id']}"
            for attempt in range(4):  # orders and reads, as long as the cut lasts
                started = loop.time()
                if attempt % 2:
                    answer = await http_a.get(order_path, headers=bearer(customer.secret))
                else:
                    answer = await http_a.post("/v1/orders", json=body, headers=keyed("a-during"))
                waited = loop.time() - started
                assert_error(answer, 503, "server_error", reason="service_unavailable")
                retry_after = str(DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS)
                assert answer.headers["retry-after"] == retry_after
                assert waited < BOUND_SECONDS, f"A's request {attempt} took {waited:.1f} s"
            ours = [r for r in caplog.records if r.name.startswith("commerce_api")]
            assert not [r for r in ours if r.exc_info], "a traceback was logged"
            assert not [r for r in ours if r.levelno >= logging.ERROR]

            relay.heal()
            healed = loop.time()
            while True:  # the client's retries (with the same key), as Retry-After says
                again = await http_a.post("/v1/orders", json=body, headers=keyed("a-during"))
                if again.status_code != 503 or loop.time() - healed > BOUND_SECONDS:
                    break
                await asyncio.sleep(0.25)
            waited = loop.time() - healed
            assert again.status_code == 201, again.text  # the retry, once the link is back
            assert waited < BOUND_SECONDS, f"A served again only after {waited:.1f} s"

            async with db_b.read() as conn:
                stock = await conn.scalar(
                    select(products.c.inventory_count).where(products.c.id == product_id)
                )
            assert stock == 10 - 4  # the two warm-ups, B's during the cut, A's after it
