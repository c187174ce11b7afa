"""The service and its PostgreSQL lose each other (issue 32: a restart, a network cut): a
request meanwhile is a 503 with ``Retry-After`` and the reason ``service_unavailable`` — not a
500 with a traceback logged per request — and service comes back by itself when the link does.
The link is a relay the test cuts and heals (``tests.round_trips``), the machine's PostgreSQL
untouched."""

from __future__ import annotations

import logging

import pytest

from commerce_api.http.middleware import DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer, running_app
from tests.http.test_error_contract import assert_error
from tests.round_trips import counting_relay

pytestmark = pytest.mark.postgresql


async def test_orders_while_the_database_is_cut_off_are_503s_and_service_returns_by_itself(
    postgresql_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with counting_relay(postgresql_database_url) as relay:
        settings = make_settings(relay.url_for(postgresql_database_url))
        async with running_app(settings) as (app, http):
            db = app.state.services.db
            customer = await factories.new_customer(db, "Outage")
            product_id = await factories.new_product(db, stock=10)
            body = factories.order_body((product_id, 1))
            headers = {**bearer(customer.key.secret), "Idempotency-Key": "outage-1"}
            assert (await http.post("/v1/orders", json=body, headers=headers)).status_code == 201

            await relay.cut()
            caplog.clear()
            for attempt in range(3):
                headers = {**bearer(customer.key.secret), "Idempotency-Key": f"cut-{attempt}"}
                response = await http.post("/v1/orders", json=body, headers=headers)
                assert_error(response, 503, "server_error", reason="service_unavailable")
                retry_after = response.headers["retry-after"]
                assert retry_after == str(DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS)
            ours = [r for r in caplog.records if r.name.startswith("commerce_api")]
            assert not [r for r in ours if r.exc_info], "a traceback was logged"
            assert not [r for r in ours if r.levelno >= logging.ERROR]

            await relay.start()
            headers = {**bearer(customer.key.secret), "Idempotency-Key": "cut-0"}
            again = await http.post("/v1/orders", json=body, headers=headers)
            assert again.status_code == 201, again.text  # the retry, once the link is back
