"""Every wait for PostgreSQL has a deadline (issue 32 item 3, ``storage.deadlines``): the
service's connections carry the session settings, and a wait past one is a 503 with
``Retry-After`` and one warning line, never a 500 or a hang."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from sqlalchemy import text

from commerce_api.http.middleware import DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS
from commerce_api.storage.deadlines import Deadlines
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer, running_app
from tests.http.test_error_contract import assert_error

pytestmark = pytest.mark.postgresql


async def test_the_services_connections_carry_the_deadlines(postgresql_database_url: str) -> None:
    settings = make_settings(
        postgresql_database_url,
        database_statement_timeout_seconds=7,
        database_lock_timeout_seconds=2.5,
    )
    async with running_app(settings) as (app, _):
        db = app.state.services.db
        async with db.read() as conn:
            shown = {
                name: (await conn.execute(text(f"SHOW {name}"))).scalar()
                for name in (
                    "statement_timeout",
                    "lock_timeout",
                    "idle_in_transaction_session_timeout",
                    "tcp_user_timeout",
                    "tcp_keepalives_idle",
                    "tcp_keepalives_interval",
                    "tcp_keepalives_count",
                )
            }
        assert shown == {
            "statement_timeout": "7s",
            "lock_timeout": "2500ms",
            "idle_in_transaction_session_timeout": "2s",
            "tcp_user_timeout": "3000",  # shown in ms, without a unit
            "tcp_keepalives_idle": "1",
            "tcp_keepalives_interval": "1",
            "tcp_keepalives_count": "2",
        }
        assert db.driver_options()["server_settings"]["lock_timeout"] == "2500"
        assert Deadlines().idle_in_transaction < Deadlines().lock  # a waiter outlives a holder


async def test_an_order_waiting_on_a_lock_past_the_lock_timeout_is_a_503(
    postgresql_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    async with running_app(make_settings(postgresql_database_url)) as (app, http):
        db = app.state.services.db
        customer = await factories.new_customer(db, "Waiting")
        product_id = await factories.new_product(db, stock=5)
        body = factories.order_body((product_id, 1))
        headers = {**bearer(customer.secret), "Idempotency-Key": "behind-a-lock"}
        # Another client of the database (no deadlines of ours) holds the product's row lock.
        other = await asyncpg.connect(postgresql_database_url)
        try:
            holding = other.transaction()
            await holding.start()
            await other.execute("SELECT id FROM products WHERE id = $1 FOR UPDATE", product_id)
            caplog.clear()
            started = loop.time()
            response = await http.post("/v1/orders", json=body, headers=headers)
            waited = loop.time() - started
            assert_error(response, 503, "server_error", reason="service_unavailable")
            retry_after = str(DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS)
            assert response.headers["retry-after"] == retry_after
            assert waited < 5.0
            ours = [r for r in caplog.records if r.name.startswith("commerce_api")]
            assert not [r for r in ours if r.exc_info], "a traceback was logged"
            assert [r for r in ours if "timed out" in r.getMessage()], "no warning line"
            await holding.rollback()
        finally:
            await other.close()
        again = await http.post("/v1/orders", json=body, headers=headers)
        assert again.status_code == 201, again.text  # the key was not used up
