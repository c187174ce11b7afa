"""Verifying webhook deliveries (Standard Webhooks: https://www.standardwebhooks.com/).

Implemented with ``hmac``/``hashlib``/``base64`` rather than the ``standardwebhooks`` package:
verification is these few lines, and that package would add four runtime dependencies (attrs,
python-dateutil, Deprecated and their stubs) to every application that uses this client.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from commerce_client import _parse
from commerce_client._errors import WebhookVerificationError
from commerce_client.types.event import Event, event_data

__all__ = ["WEBHOOK_TOLERANCE_SECONDS", "verify_webhook"]

WEBHOOK_TOLERANCE_SECONDS: Final = 5 * 60
"""How far ``webhook-timestamp`` may be from now, either way: older deliveries are refused as
replays, and ones this far in the future as forged or from a badly wrong clock."""

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - a prefix, not a secret
SIGNATURE_VERSION: Final = "v1"


class HeadersLike(Protocol):
    """Anything with ``items()``: a dict, httpx/Starlette headers, ``http.server``'s
    ``self.headers`` (an ``email.message.Message``)."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


def _secret_key(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "The webhook secret must be the whsec_… value returned by "
            "webhook_endpoints.create() or rotate_secret()."
        ) from None


def _header(headers: dict[str, str], name: str) -> str:
    value = headers.get(name)
    if not value:
        raise WebhookVerificationError(f"Missing `{name}` header: not a signed delivery.")
    return value


def verify_webhook(
    payload: bytes | str,
    headers: HeadersLike,
    secret: str,
    *,
    tolerance: float = WEBHOOK_TOLERANCE_SECONDS,
) -> Event:
    """Check a delivery's signature and age, then return its event.

    Pass the body exactly as received (bytes, before any JSON parsing), the request's
    headers, and the endpoint's ``whsec_…`` secret. Raises :class:`WebhookVerificationError`
    when a signature header is missing, no signature matches, the timestamp is more than
    ``tolerance`` seconds away from now, or the signed body is not JSON — never because of the
    event's shape: an event of a type this version does not know comes back with its raw
    ``data`` (ignore it and answer 2xx). Deliveries are retried with the same ``webhook-id``
    (the event's ``id``): use it to ignore duplicates.
    """
    key = _secret_key(secret)
    found = {str(name).lower(): str(value) for name, value in headers.items()}
    message_id = _header(found, "webhook-id")
    timestamp = _header(found, "webhook-timestamp")
    signatures = _header(found, "webhook-signature")

    try:
        sent_at = int(timestamp)
    except ValueError:
        raise WebhookVerificationError("`webhook-timestamp` is not a Unix time.") from None
    age = time.time() - sent_at
    if age > tolerance:
        raise WebhookVerificationError(f"The delivery is too old ({age:.0f} s): a replay?")
    if age < -tolerance:
        raise WebhookVerificationError("The delivery's timestamp is too far in the future.")

    body = payload.encode() if isinstance(payload, str) else payload
    signed = f"{message_id}.{timestamp}.".encode() + body
    expected = hmac.new(key, signed, hashlib.sha256).digest()
    # Several signatures (space-separated) appear while a secret is rotated; any match passes.
    for candidate in signatures.split():
        version, _, encoded = candidate.partition(",")
        if version != SIGNATURE_VERSION:
            continue
        try:
            given = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(given, expected):
            break
    else:
        raise WebhookVerificationError(
            "No signature matches: the body was changed, or the secret is not this endpoint's."
        )

    try:
        envelope = _parse.loads(body)
    except ValueError as exc:
        raise WebhookVerificationError(f"The signed body is not JSON ({exc}).") from exc
    return _event(envelope if isinstance(envelope, dict) else {}, message_id, sent_at)


def _event(envelope: dict[str, Any], message_id: str, sent_at: int) -> Event:
    """The event in a verified body, whatever its shape: verification is about the signature
    and the timestamp. Known types give a typed :class:`Order`; an unknown type, unknown fields
    or missing ones give an event with the raw ``data`` (a receiver ignores what it does not
    know, and still answers 2xx). Missing envelope fields fall back to the delivery's headers."""
    type_ = envelope.get("type")
    created_at = envelope.get("created_at")
    try:
        created = _parse.timestamp(created_at) if isinstance(created_at, str) else None
    except ValueError:
        created = None
    identifier = envelope.get("id")
    return Event(
        id=identifier if isinstance(identifier, str) else message_id,
        type=type_ if isinstance(type_, str) else "",
        created_at=created or datetime.fromtimestamp(sent_at, UTC),
        data=event_data(type_ if isinstance(type_, str) else "", envelope.get("data", {})),
    )
