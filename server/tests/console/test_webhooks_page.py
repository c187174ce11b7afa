"""The console's webhooks page (issue 29), on both backends, against a real HTTP receiver:
create an endpoint (its secret shown once), send it a ``webhook.test`` event that the
dispatcher signs and delivers, each event's deliveries by state, and the recovery of failed
deliveries since a moment (the service call of ``POST /v1/webhook_endpoints/{id}/recover``)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from commerce_api.core.timestamps import utcnow
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database
from commerce_api.storage.tables import webhook_endpoints
from commerce_api.webhooks.dispatcher import Dispatcher
from tests import factories
from tests.conftest import make_settings
from tests.console.helpers import form_token, sign_in
from tests.helpers import bearer
from tests.webhook_receiver import Receiver, Reply, running_receiver
from tests.webhooks.test_dispatcher import drain


@pytest.fixture
async def console(client: httpx.AsyncClient, admin_key: str) -> httpx.AsyncClient:
    assert (await sign_in(client, admin_key)).status_code == 303
    return client


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as running:
        yield running


@pytest.fixture
async def dispatcher(database_url: str, db: Database) -> AsyncIterator[Dispatcher]:
    """A dispatcher on the app's database (its secret key), retrying once, at once."""
    settings: Settings = make_settings(
        database_url, webhook_retry_schedule=(0,), webhook_timeout_seconds=2.0
    )
    assert settings.secret_key is not None
    running = Dispatcher(settings, db, SecretBox(settings.secret_key))
    try:
        yield running
    finally:
        running.stop()
        await running.run()  # releases its claims and closes its HTTP client


async def _account_id(console: httpx.AsyncClient, client_key: str) -> str:
    page = (await console.get("/dashboard/webhooks")).text
    found = re.search(r'<option value="(acct_\w+)" selected', page)
    assert found is not None, page[:2000]
    return found.group(1)


async def _create(
    console: httpx.AsyncClient, account_id: str, url: str, *events: str
) -> httpx.Response:
    token = form_token((await console.get(f"/dashboard/webhooks?account_id={account_id}")).text)
    return await console.post(
        f"/dashboard/webhooks/{account_id}/endpoints",
        data={"url": url, "events": list(events), "description": "Ops", "csrf_token": token},
    )


def _created(response: httpx.Response) -> tuple[str, str]:
    """The new endpoint's id and secret from the create form's answer."""
    assert response.status_code == 201, response.text[:2000]
    secret = re.search(r'id="new-endpoint-secret" readonly value="(whsec_[^"]+)"', response.text)
    endpoint = re.search(
        r'<h2 id="new-endpoint">New endpoint <code[^>]*>(we_\w+)</code>', response.text
    )
    assert secret is not None
    assert endpoint is not None
    return endpoint.group(1), secret.group(1)


def _deliveries(page: str, event_id: str) -> dict[str, int]:
    """The events list's delivery states of one event (each shown with its state's name), and
    ``after_failure``: the pending ones with a failed attempt behind them."""
    row = page[page.index(f"/dashboard/events/{event_id}") :].split("</tr>")[0]
    found = re.findall(r'data-state="(\w+)">(\d+) (\w+)</span>', row)
    assert all(state == shown for state, _, shown in found), found
    counts = {state: int(count) for state, count, _ in found}
    after_failure = re.search(r"\((\d+) after a failed attempt\)", row)
    if after_failure:
        counts["after_failure"] = int(after_failure.group(1))
    return counts


async def test_create_an_endpoint_shows_its_secret_once(
    console: httpx.AsyncClient, client_key: str, receiver: Receiver
) -> None:
    account_id = await _account_id(console, client_key)
    endpoint_id, secret = _created(
        await _create(console, account_id, receiver.url(), "order.created", "order.canceled")
    )
    api = await console.get(f"/v1/webhook_endpoints/{endpoint_id}", headers=bearer(client_key))
    assert api.status_code == 200
    assert api.json()["events"] == ["order.canceled", "order.created"]
    assert api.json()["description"] == "Ops"
    page = (await console.get(f"/dashboard/webhooks?account_id={account_id}")).text
    assert endpoint_id in page
    assert secret not in page  # shown once

    refused = await _create(console, account_id, "ftp://example.com/x")
    assert refused.status_code == 400
    assert "absolute http(s) URL" in refused.text
    assert 'id="new-endpoint-secret"' not in refused.text
    listed = await console.get("/v1/webhook_endpoints", headers=bearer(client_key))
    assert listed.json()["pagination"]["total"] == 1


async def test_a_test_event_reaches_the_receiver_signed(
    console: httpx.AsyncClient, client_key: str, receiver: Receiver, dispatcher: Dispatcher
) -> None:
    account_id = await _account_id(console, client_key)
    # Subscribed to another type: a test event goes to the endpoint all the same.
    endpoint_id, secret = _created(
        await _create(console, account_id, receiver.url(), "order.fulfilled")
    )
    token = form_token((await console.get(f"/dashboard/webhooks?account_id={account_id}")).text)
    sent = await console.post(
        f"/dashboard/webhooks/{account_id}/endpoints/{endpoint_id}/test",
        data={"csrf_token": token},
    )
    assert sent.status_code == 303
    event_path = sent.headers["location"].split("?")[0]
    event_id = event_path.rsplit("/", 1)[1]
    page = await console.get(sent.headers["location"])
    assert "Test event queued" in page.text
    assert "webhook.test" in page.text

    assert await drain(dispatcher) == 1

    [request] = receiver.requests()
    payload = request.verify(secret)  # a valid Standard Webhooks signature
    assert request.webhook_id == event_id
    assert payload["type"] == "webhook.test"
    assert payload["data"]["id"] == endpoint_id
    assert payload["data"]["url"] == receiver.url()
    event_page = (await console.get(event_path)).text
    assert (
        f'Delivery to <code class="id" title="{endpoint_id}">{endpoint_id}</code>: succeeded'
        in (event_page)
    )
    listing = (await console.get(f"/dashboard/webhooks?account_id={account_id}")).text
    assert _deliveries(listing, event_id) == {"succeeded": 1}
    # Not an order's event: no order link, and the API's list shows it as it is.
    assert f"/dashboard/orders/{endpoint_id}" not in listing
    events = await console.get("/v1/events", headers=bearer(client_key))
    assert [event["type"] for event in events.json()["data"]] == ["webhook.test"]

    # A redelivery goes to that endpoint again, not to another that takes every type.
    _created(await _create(console, account_id, receiver.url("/other")))
    again = await console.post(f"{event_path}/redeliver", data={"csrf_token": token})
    assert again.status_code == 303
    assert await drain(dispatcher) == 1
    assert [r.path for r in receiver.requests()] == ["/hook", "/hook"]


async def test_delivery_status_and_recovery_since_a_moment(
    console: httpx.AsyncClient,
    client_key: str,
    db: Database,
    receiver: Receiver,
    dispatcher: Dispatcher,
) -> None:
    account_id = await _account_id(console, client_key)
    endpoint_id, secret = _created(await _create(console, account_id, receiver.url("/down")))
    receiver.reply("/down", Reply(500))
    product = await factories.new_product(db, 10)
    order = await factories.place_ok(console, client_key, (product, 1))
    events = await console.get(f"/v1/events?order_id={order['id']}", headers=bearer(client_key))
    [event] = events.json()["data"]
    webhooks_page = f"/dashboard/webhooks?account_id={account_id}"
    assert _deliveries((await console.get(webhooks_page)).text, event["id"]) == {"pending": 1}

    assert await dispatcher.run_once() == 1  # failed; its one retry is due at once
    assert _deliveries((await console.get(webhooks_page)).text, event["id"]) == {
        "pending": 1,
        "after_failure": 1,
    }
    assert await drain(dispatcher) == 1  # failed again: given up
    page = (await console.get(webhooks_page)).text
    assert _deliveries(page, event["id"]) == {"failed": 1}

    receiver.reply("/down", Reply(200))
    since = (utcnow() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    recovered = await console.post(
        f"/dashboard/webhooks/{account_id}/endpoints/{endpoint_id}/recover",
        data={"since": since, "csrf_token": form_token(page)},
    )
    assert recovered.status_code == 200
    assert "Recovered 1 failed delivery of events since" in recovered.text
    assert _deliveries(recovered.text, event["id"]) == {"pending": 1}
    assert await drain(dispatcher) == 1
    page = (await console.get(webhooks_page)).text
    assert _deliveries(page, event["id"]) == {"succeeded": 1}
    assert [r.status for r in receiver.requests("/down")] == [500, 500, 200]
    for request in receiver.requests("/down"):
        assert request.verify(secret)["id"] == event["id"]

    # A moment that is not one, and a later moment with nothing to recover.
    token = form_token(page)
    action = f"/dashboard/webhooks/{account_id}/endpoints/{endpoint_id}/recover"
    bad = await console.post(action, data={"since": "yesterday", "csrf_token": token})
    assert bad.status_code == 400
    assert 'role="alert"' in bad.text
    later = (utcnow() + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M")
    none = await console.post(action, data={"since": later, "csrf_token": token})
    assert "Recovered 0 failed deliveries" in none.text


async def test_a_disabled_endpoint_is_refused_a_test_event_and_a_recovery(
    console: httpx.AsyncClient, client_key: str, db: Database, receiver: Receiver
) -> None:
    account_id = await _account_id(console, client_key)
    endpoint_id, _ = _created(await _create(console, account_id, receiver.url()))
    async with db.write() as conn:
        await conn.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.id == endpoint_id)
            .values(enabled=False, disabled_reason="Receiver gone (410)")
        )
    token = form_token((await console.get(f"/dashboard/webhooks?account_id={account_id}")).text)
    base = f"/dashboard/webhooks/{account_id}/endpoints/{endpoint_id}"
    test = await console.post(f"{base}/test", data={"csrf_token": token})
    assert test.status_code == 409
    assert "The endpoint is disabled" in test.text
    since = (utcnow() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    recover = await console.post(f"{base}/recover", data={"since": since, "csrf_token": token})
    assert recover.status_code == 409
    assert "Receiver gone (410)" in recover.text
    events = await console.get("/v1/events", headers=bearer(client_key))
    assert events.json()["data"] == []
    unknown = await console.post(
        f"/dashboard/webhooks/{account_id}/endpoints/we_nope/test", data={"csrf_token": token}
    )
    assert unknown.status_code == 404
