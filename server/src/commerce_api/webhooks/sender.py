"""Sending one delivery: the event as the receiver gets it, signed with the endpoint's
secrets (Standard Webhooks), POSTed to the address its URL was checked to resolve to, within
the attempt's timeout, in the attempt's span when traced. The dispatcher decides what to send
and what the answer means."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import orjson

from commerce_api.core import tracing
from commerce_api.core.timestamps import format_timestamp
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox
from commerce_api.webhooks.http_client import HTTPClient
from commerce_api.webhooks.http_response import ReceiverError
from commerce_api.webhooks.policy import is_success
from commerce_api.webhooks.signing import signature_header
from commerce_api.webhooks.url_policy import UnsafeURL, resolve

USER_AGENT = "CommerceAPI-Webhooks/1"
_ERROR_LENGTH = 500
SECRET_CACHE_SIZE = 10_000  # decrypted endpoint secrets kept by a sender (see _decrypt)


def event_body(event: Any) -> str:
    """The JSON body of a delivery of ``event`` (a row of ``events``)."""
    return orjson.dumps(
        {
            "id": event.id,
            "type": event.type,
            "created_at": format_timestamp(event.created_at),
            "data": event.data,
        }
    ).decode()


class Sender:
    """Signs and POSTs deliveries, keeping connections alive per destination (address and host
    name: see ``http_client``) and decrypted secrets per ciphertext."""

    def __init__(
        self, settings: Settings, secret_box: SecretBox, *, max_idle_per_destination: int
    ) -> None:
        self._settings = settings
        self._secret_box = secret_box
        self._http = HTTPClient(
            user_agent=USER_AGENT, max_idle_per_destination=max_idle_per_destination
        )
        self._secrets: dict[str, str] = {}  # see _decrypt

    @property
    def connections_opened(self) -> int:
        """How many connections were opened so far (for tests)."""
        return self._http.connections_opened

    async def aclose(self) -> None:
        await self._http.aclose()

    def _signing_secrets(self, endpoint: Any, now: datetime) -> list[str]:
        signing = [self._decrypt(endpoint.secret_encrypted)]
        expires = endpoint.previous_secret_expires_at
        if endpoint.previous_secret_encrypted and expires is not None and expires > now:
            signing.append(self._decrypt(endpoint.previous_secret_encrypted))
        return signing

    def _decrypt(self, token: str) -> str:
        """A stored secret, decrypted once per ciphertext (a rotation stores a new one), not
        once per attempt: Fernet's check and decryption were a twentieth of the CPU of an
        attempt."""
        secret = self._secrets.get(token)
        if secret is None:
            if len(self._secrets) >= SECRET_CACHE_SIZE:
                self._secrets.clear()
            secret = self._secrets[token] = self._secret_box.decrypt(token)
        return secret

    async def post(
        self,
        endpoint: Any,
        message_id: str,
        body: str,
        attempted_at: datetime,
        traceparent: str | None = None,
    ) -> tuple[int | None, str | None]:
        """One POST (with a W3C ``traceparent`` header when given: the attempt's span); returns
        (status code, error). The receiver's body is never stored (it is read, up to a limit,
        only so that the connection can carry the next attempt)."""
        try:
            target = await resolve(
                endpoint.url, allow_private=self._settings.allow_private_webhook_urls
            )
        except UnsafeURL as exc:
            return None, f"Refused receiver URL: {exc}"[:_ERROR_LENGTH]
        headers: tuple[tuple[str, str], ...] = (
            ("content-type", "application/json"),
            ("webhook-id", message_id),
            ("webhook-timestamp", str(int(attempted_at.timestamp()))),
            (
                "webhook-signature",
                signature_header(
                    self._signing_secrets(endpoint, attempted_at), message_id, attempted_at, body
                ),
            ),
        )
        if traceparent is not None:
            headers += (("traceparent", traceparent),)
        try:
            # Bounds the attempt as a whole (connecting, sending, the answer), so a receiver
            # that trickles its answer cannot hold a slot (or outlive the claim).
            async with asyncio.timeout(self._settings.webhook_timeout_seconds):
                # To the address that was checked, not to whatever DNS says next (the Host
                # header and TLS still name the URL's host).
                status_code = await self._http.post(
                    target.url, target.address, headers, body.encode()
                )
        except TimeoutError:
            return None, "Timed out."
        except (OSError, ReceiverError) as exc:
            return None, f"{type(exc).__name__}: {exc}"[:_ERROR_LENGTH] or type(exc).__name__
        if is_success(status_code):
            return status_code, None
        return status_code, f"HTTP {status_code}"

    async def traced_post(
        self, endpoint: Any, event: Any, body: str, attempted_at: datetime, attempts_before: int
    ) -> tuple[int | None, str | None]:
        """An attempt's POST (:meth:`post`) of ``event`` (a row of ``events``); traced, in its
        span (the child of the trace its event was recorded in), whose ``traceparent`` the POST
        carries."""
        if not tracing.ENABLED:
            return await self.post(endpoint, event.id, body, attempted_at)
        attributes = {
            "http.request.method": "POST",
            "commerce.event_id": event.id,
            "commerce.event_type": event.type,
            "commerce.endpoint_id": endpoint.id,
            "commerce.delivery_attempt": attempts_before + 1,
        }
        with tracing.delivery_attempt(event.traceparent, attributes) as attempt:
            outcome = await self.post(endpoint, event.id, body, attempted_at, attempt.traceparent)
            attempt.finish(*outcome)
        return outcome
