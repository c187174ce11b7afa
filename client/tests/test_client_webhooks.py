from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from decimal import Decimal
from email.message import Message

import pytest
from client_testing import order_json
from standardwebhooks import Webhook

import commerce_client
from commerce_client import Order, WebhookVerificationError, verify_webhook

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
OTHER_SECRET = "whsec_" + base64.b64encode(b"another key of thirty-two bytes!").decode()
PAYLOAD = json.dumps(
    {
        "id": "evt_1",
        "type": "order.fulfilled",
        "created_at": "2026-11-21T08:12:41.123Z",
        "data": order_json(status="fulfilled", fulfilled_at="2026-11-21T09:00:00.000Z"),
    }
).encode()


def signature(secret: str, message_id: str, timestamp: int, payload: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{timestamp}.".encode() + payload
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_headers(
    payload: bytes = PAYLOAD, secret: str = SECRET, timestamp: int | None = None
) -> dict[str, str]:
    timestamp = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": "evt_1",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, "evt_1", timestamp, payload),
    }


def test_a_valid_delivery_returns_a_typed_event() -> None:
    event = verify_webhook(PAYLOAD, signed_headers(), SECRET)
    assert event.id == "evt_1"
    assert event.type == "order.fulfilled"
    assert isinstance(event.data, Order)
    assert event.data.status == "fulfilled"
    assert event.data.total == Decimal("0.3")


def test_a_delivery_signed_by_the_reference_library_verifies() -> None:
    now = int(time.time())
    sent_at = datetime.fromtimestamp(now, UTC)
    reference = Webhook(SECRET).sign("msg_1", sent_at, PAYLOAD.decode())
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now), "webhook-signature": reference}
    assert verify_webhook(PAYLOAD, headers, SECRET).id == "evt_1"


def test_a_str_payload_and_mixed_case_headers_verify() -> None:
    headers = {name.title(): value for name, value in signed_headers().items()}
    assert verify_webhook(PAYLOAD.decode(), headers, SECRET).id == "evt_1"


def test_http_server_headers_verify() -> None:
    message = Message()
    for name, value in signed_headers().items():
        message[name] = value
    assert verify_webhook(PAYLOAD, message, SECRET).id == "evt_1"


def test_a_tampered_body_is_refused() -> None:
    headers = signed_headers()
    tampered = PAYLOAD.replace(b'"fulfilled"', b'"canceled"', 1)
    with pytest.raises(WebhookVerificationError, match="No signature matches"):
        verify_webhook(tampered, headers, SECRET)


def test_a_tampered_id_or_timestamp_is_refused() -> None:
    headers = signed_headers()
    with pytest.raises(WebhookVerificationError):
        verify_webhook(PAYLOAD, {**headers, "webhook-id": "evt_2"}, SECRET)
    later = str(int(headers["webhook-timestamp"]) + 1)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(PAYLOAD, {**headers, "webhook-timestamp": later}, SECRET)


def test_the_wrong_secret_is_refused() -> None:
    with pytest.raises(WebhookVerificationError, match="No signature matches"):
        verify_webhook(PAYLOAD, signed_headers(), OTHER_SECRET)


def test_a_stale_delivery_is_refused() -> None:
    headers = signed_headers(timestamp=int(time.time()) - 6 * 60)
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify_webhook(PAYLOAD, headers, SECRET)


def test_a_delivery_from_the_future_is_refused() -> None:
    headers = signed_headers(timestamp=int(time.time()) + 6 * 60)
    with pytest.raises(WebhookVerificationError, match="future"):
        verify_webhook(PAYLOAD, headers, SECRET)


def test_a_delivery_within_the_tolerance_passes() -> None:
    headers = signed_headers(timestamp=int(time.time()) - 4 * 60)
    assert verify_webhook(PAYLOAD, headers, SECRET).id == "evt_1"


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_an_unsigned_delivery_is_refused(missing: str) -> None:
    headers = signed_headers()
    del headers[missing]
    with pytest.raises(WebhookVerificationError, match=f"Missing `{missing}`"):
        verify_webhook(PAYLOAD, headers, SECRET)


def test_a_non_numeric_timestamp_is_refused() -> None:
    with pytest.raises(WebhookVerificationError, match="Unix time"):
        verify_webhook(PAYLOAD, {**signed_headers(), "webhook-timestamp": "soon"}, SECRET)


def test_any_of_several_signatures_may_match() -> None:
    headers = signed_headers()
    good = headers["webhook-signature"]
    wrong = signed_headers(secret=OTHER_SECRET)["webhook-signature"]
    for combined in (f"{wrong} {good}", f"v1a,xyz {good}", f"v1,!!notbase64 {good}"):
        assert verify_webhook(PAYLOAD, {**headers, "webhook-signature": combined}, SECRET)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(PAYLOAD, {**headers, "webhook-signature": f"{wrong} v2,{good[3:]}"}, SECRET)


def test_a_malformed_secret_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        verify_webhook(PAYLOAD, signed_headers(), "whsec_not base64!")


def test_a_signed_body_that_is_not_json_is_refused() -> None:
    payload = b"<html>hello</html>"
    with pytest.raises(WebhookVerificationError, match="not JSON"):
        verify_webhook(payload, signed_headers(payload), SECRET)


def envelope(type_: str, data: object, **extra: object) -> bytes:
    return json.dumps(
        {"id": "evt_1", "type": type_, "created_at": "2026-11-21T08:12:41.123Z", "data": data}
        | extra
    ).encode()


def test_an_unknown_event_type_verifies_into_a_generic_event() -> None:
    """A future kind (here ``order.refunded``, whose data is no order) must never fail
    verification: the receiver ignores it and answers 2xx."""
    payload = envelope("order.refunded", {"id": "ord_1", "amount": "5.00"})
    event = verify_webhook(payload, signed_headers(payload), SECRET)
    assert (event.id, event.type) == ("evt_1", "order.refunded")
    assert event.created_at == datetime(2026, 11, 21, 8, 12, 41, 123000, tzinfo=UTC)
    assert event.data == {"id": "ord_1", "amount": "5.00"}


def test_unknown_fields_are_ignored_and_the_order_is_still_typed() -> None:
    order = order_json(status="fulfilled") | {"loyalty_points": 12}
    payload = envelope("order.fulfilled", order, api_version="2027-01-01")
    event = verify_webhook(payload, signed_headers(payload), SECRET)
    assert isinstance(event.data, Order)
    assert event.data.status == "fulfilled"


def test_missing_optional_fields_still_give_a_typed_order() -> None:
    order = {k: v for k, v in order_json().items() if k not in {"fulfilled_at", "canceled_at"}}
    payload = envelope("order.created", order)
    event = verify_webhook(payload, signed_headers(payload), SECRET)
    assert isinstance(event.data, Order)
    assert event.data.fulfilled_at is None


def test_a_known_type_whose_data_is_not_an_order_gives_the_raw_data() -> None:
    payload = envelope("order.canceled", {"id": "ord_1"})
    event = verify_webhook(payload, signed_headers(payload), SECRET)
    assert event.data == {"id": "ord_1"}


def test_an_envelope_missing_fields_falls_back_to_the_headers() -> None:
    payload = b'{"hello": "world"}'
    headers = signed_headers(payload)
    event = verify_webhook(payload, headers, SECRET)
    assert (event.id, event.type, event.data) == ("evt_1", "", {})
    assert event.created_at == datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)


def test_webhook_verification_error_is_a_commerce_error() -> None:
    with pytest.raises(commerce_client.CommerceError):
        verify_webhook(PAYLOAD, {}, SECRET)
