"""Tracking on fulfilment (issue 29): ``POST /v1/orders/{id}/fulfill`` takes an optional
``{"tracking": {"carrier", "number", "url"}}``; the order and its ``order.fulfilled`` event
carry it; an invalid one is a 400 naming the field and changes nothing; no body (or ``{}``)
fulfils as before; an ``Idempotency-Key`` replays it. Both backends."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.factories import create_product, place_ok
from tests.helpers import bearer, list_page
from tests.http.test_error_contract import assert_error

TRACKING = {"carrier": "UPS", "number": "1Z999AA10123456784", "url": "https://ups.example/t/1Z9"}


async def _pending_order(client: httpx.AsyncClient, admin_key: str, client_key: str) -> str:
    product = await create_product(client, admin_key)
    order_id: str = (await place_ok(client, client_key, (product["id"], 1)))["id"]
    return order_id


async def _fulfill(
    client: httpx.AsyncClient, key: str, order_id: str, **request: Any
) -> httpx.Response:
    headers = {**bearer(key), **request.pop("headers", {})}
    return await client.post(f"/v1/orders/{order_id}/fulfill", headers=headers, **request)


async def _events_of(client: httpx.AsyncClient, key: str, order_id: str) -> list[dict[str, Any]]:
    """The order's events, oldest first."""
    page = await list_page(client, "/v1/events", key, order_id=order_id)
    return list(reversed(page["data"]))


async def _order(client: httpx.AsyncClient, key: str, order_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/orders/{order_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    order: dict[str, Any] = response.json()
    return order


async def test_fulfilling_with_tracking_puts_it_on_the_order_and_in_the_event(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order_id = await _pending_order(client, admin_key, client_key)
    assert (await _order(client, client_key, order_id))["tracking"] is None

    response = await _fulfill(client, admin_key, order_id, json={"tracking": TRACKING})
    assert response.status_code == 200, response.text
    fulfilled = response.json()
    assert (fulfilled["status"], fulfilled["version"]) == ("fulfilled", 2)
    assert fulfilled["tracking"] == TRACKING
    assert list(fulfilled["tracking"]) == ["carrier", "number", "url"]
    assert await _order(client, client_key, order_id) == fulfilled
    listed = await list_page(client, "/v1/orders", client_key)
    assert [o["tracking"] for o in listed["data"]] == [TRACKING]

    created, fulfilled_event = await _events_of(client, client_key, order_id)
    assert (created["type"], created["data"]["tracking"]) == ("order.created", None)
    assert fulfilled_event["type"] == "order.fulfilled"
    assert fulfilled_event["data"] == fulfilled


async def test_the_tracking_url_may_be_left_out_or_null(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    for tracking in (
        {"carrier": "DHL", "number": "42"},
        {"carrier": "DHL", "number": "42", "url": None},
    ):
        order_id = await _pending_order(client, admin_key, client_key)
        response = await _fulfill(client, admin_key, order_id, json={"tracking": tracking})
        assert response.status_code == 200, response.text
        assert response.json()["tracking"] == {"carrier": "DHL", "number": "42", "url": None}


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param({}, id="no-body"),
        pytest.param({"json": {}}, id="empty-object"),
        pytest.param({"json": {"tracking": None}}, id="null-tracking"),
        pytest.param(
            {"content": b"", "headers": {"Content-Type": "application/json"}}, id="empty-json"
        ),
    ],
)
async def test_without_tracking_the_order_is_fulfilled_as_before(
    client: httpx.AsyncClient, admin_key: str, client_key: str, request_body: dict[str, Any]
) -> None:
    order_id = await _pending_order(client, admin_key, client_key)
    response = await _fulfill(client, admin_key, order_id, **request_body)
    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["tracking"]) == ("fulfilled", None)
    _, fulfilled_event = await _events_of(client, client_key, order_id)
    assert fulfilled_event["data"]["tracking"] is None


def _tracking(**changes: object) -> dict[str, object]:
    tracking: dict[str, object] = {**TRACKING, **changes}
    return {"tracking": {key: value for key, value in tracking.items() if value is not ...}}


@pytest.mark.parametrize(
    ("body", "details"),
    [
        pytest.param(_tracking(url="http://ups.example/t/1"), "tracking.url", id="http-url"),
        pytest.param(_tracking(url="javascript:alert(1)"), "tracking.url", id="script-url"),
        pytest.param(_tracking(url="https://me:pw@ups.example/"), "tracking.url", id="credentials"),
        pytest.param(_tracking(url="https://ups.example/#t"), "tracking.url", id="fragment"),
        pytest.param(_tracking(url="https://"), "tracking.url", id="no-host"),
        pytest.param(_tracking(url="https://ups.example/a b"), "tracking.url", id="space"),
        pytest.param(
            _tracking(url="https://ups.example/" + "a" * 2048), "tracking.url", id="long-url"
        ),
        pytest.param(_tracking(url=""), "tracking.url", id="empty-url"),
        pytest.param(_tracking(carrier=""), "tracking.carrier", id="empty-carrier"),
        pytest.param(_tracking(carrier="x" * 101), "tracking.carrier", id="long-carrier"),
        pytest.param(_tracking(carrier="UPS\n"), "tracking.carrier", id="control-character"),
        pytest.param(_tracking(carrier=None), "tracking.carrier", id="null-carrier"),
        pytest.param(_tracking(number=...), "tracking.number", id="no-number"),
        pytest.param(_tracking(number=123), "tracking.number", id="numeric-number"),
        pytest.param(_tracking(number="1" * 101), "tracking.number", id="long-number"),
        pytest.param(_tracking(eta="tomorrow"), "tracking.eta", id="unknown-field"),
        pytest.param({"tracking": "1Z999"}, "tracking", id="not-an-object"),
        pytest.param({"trackingg": TRACKING}, "trackingg", id="misspelt"),
        pytest.param([TRACKING], "body", id="a-list"),
    ],
)
async def test_an_invalid_tracking_is_a_400_naming_the_field_and_changes_nothing(
    client: httpx.AsyncClient, admin_key: str, client_key: str, body: object, details: str
) -> None:
    order_id = await _pending_order(client, admin_key, client_key)
    before = await _order(client, client_key, order_id)
    response = await _fulfill(client, admin_key, order_id, json=body)
    assert_error(response, 400, "invalid_request", details, reason="validation_failed")
    assert await _order(client, client_key, order_id) == before
    assert [e["type"] for e in await _events_of(client, client_key, order_id)] == ["order.created"]


async def test_a_body_that_is_not_json_is_refused(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order_id = await _pending_order(client, admin_key, client_key)
    text = await _fulfill(
        client, admin_key, order_id, content=b"UPS 1Z", headers={"Content-Type": "text/plain"}
    )
    assert_error(text, 415, "invalid_request", "Content-Type", reason="unsupported_media_type")
    broken = await _fulfill(
        client,
        admin_key,
        order_id,
        content=b'{"tracking": ',
        headers={"Content-Type": "application/json"},
    )
    assert_error(broken, 400, "invalid_request", "body", reason="malformed_request")
    assert (await _order(client, client_key, order_id))["status"] == "pending"


async def test_a_replayed_fulfilment_returns_the_same_tracking(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order_id = await _pending_order(client, admin_key, client_key)
    key = {"Idempotency-Key": f"fulfil-{order_id}"}
    first = await _fulfill(client, admin_key, order_id, json={"tracking": TRACKING}, headers=key)
    assert first.status_code == 200, first.text
    again = await _fulfill(client, admin_key, order_id, json={"tracking": TRACKING}, headers=key)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert again.json()["tracking"] == TRACKING

    other = {"tracking": {**TRACKING, "number": "another"}}
    different = await _fulfill(client, admin_key, order_id, json=other, headers=key)
    assert_error(different, 422, "invalid_request", "Idempotency-Key")
    events = await _events_of(client, client_key, order_id)
    assert [e["type"] for e in events] == ["order.created", "order.fulfilled"]
    assert (await _order(client, client_key, order_id))["tracking"] == TRACKING


async def test_tracking_is_refused_with_the_transition_on_an_order_no_longer_pending(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    order_id = await _pending_order(client, admin_key, client_key)
    first = await _fulfill(client, admin_key, order_id, json={"tracking": TRACKING})
    assert first.status_code == 200, first.text
    other = {"tracking": {"carrier": "DHL", "number": "42"}}
    again = await _fulfill(client, admin_key, order_id, json=other)
    assert_error(again, 409, "invalid_request", "status", reason="invalid_transition")
    assert (await _order(client, client_key, order_id))["tracking"] == TRACKING
