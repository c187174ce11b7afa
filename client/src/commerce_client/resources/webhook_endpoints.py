"""``client.webhook_endpoints``: register the URLs your account's events are delivered to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from typing import Any

from commerce_client._pagination import (
    MAX_PAGE_SIZE,
    Page,
    aiterate_pages,
    iterate_pages,
    parse_page,
    timestamp_param,
)
from commerce_client._types import NOT_GIVEN, NotGiven
from commerce_client.resources._base import AsyncResource, SyncResource, path
from commerce_client.types.webhook_endpoint import WebhookEndpoint, WebhookEndpointWithSecret

__all__ = ["AsyncWebhookEndpoints", "WebhookEndpoints"]


def _create_body(url: str, events: Sequence[str] | None, description: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"url": url}
    if events is not None:
        body["events"] = list(events)
    if description is not None:
        body["description"] = description
    return body


def _update_body(
    url: str | NotGiven,
    events: Sequence[str] | NotGiven,
    description: str | NotGiven | None,
    enabled: bool | NotGiven,
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "url": url,
        "events": events if isinstance(events, NotGiven) else list(events),
        "description": description,
        "enabled": enabled,
    }
    return {name: value for name, value in fields.items() if not isinstance(value, NotGiven)}


def _recover_body(since: datetime | str) -> dict[str, Any]:
    return {"since": timestamp_param(since, "since")}


def _page_params(limit: int | None, offset: int | None) -> dict[str, str | int | None]:
    return {"limit": limit, "offset": offset}


class WebhookEndpoints(SyncResource):
    def create(
        self,
        *,
        url: str,
        events: Sequence[str] | None = None,
        description: str | None = None,
        idempotency_key: str | None = None,
    ) -> WebhookEndpointWithSecret:
        """Register ``url`` for ``events`` (all types when omitted). The result's ``secret``
        (``whsec_…``) is shown only now: store it to verify deliveries."""
        body = _create_body(url, events, description)
        return WebhookEndpointWithSecret.from_dict(
            self._client._request(
                "POST", "/webhook_endpoints", json=body, idempotency_key=idempotency_key
            )
        )

    def list(self, *, limit: int | None = None, offset: int | None = None) -> Page[WebhookEndpoint]:
        body = self._client._request(
            "GET", "/webhook_endpoints", params=_page_params(limit, offset)
        )
        return parse_page(body, WebhookEndpoint.from_dict)

    def list_all(self, *, page_size: int = MAX_PAGE_SIZE) -> Iterator[WebhookEndpoint]:
        return iterate_pages(lambda offset: self.list(limit=page_size, offset=offset))

    def get(self, id: str) -> WebhookEndpoint:
        return WebhookEndpoint.from_dict(
            self._client._request("GET", path("/webhook_endpoints/{}", id))
        )

    def update(
        self,
        id: str,
        *,
        url: str | NotGiven = NOT_GIVEN,
        events: Sequence[str] | NotGiven = NOT_GIVEN,
        description: str | NotGiven | None = NOT_GIVEN,
        enabled: bool | NotGiven = NOT_GIVEN,
    ) -> WebhookEndpoint:
        """Change the given fields; the others keep their value. ``enabled=True`` re-enables an
        endpoint the API disabled."""
        body = _update_body(url, events, description, enabled)
        return WebhookEndpoint.from_dict(
            self._client._request("PATCH", path("/webhook_endpoints/{}", id), json=body)
        )

    def delete(self, id: str) -> None:
        self._client._request("DELETE", path("/webhook_endpoints/{}", id))

    def rotate_secret(
        self, id: str, *, idempotency_key: str | None = None
    ) -> WebhookEndpointWithSecret:
        """A new signing secret (returned once). For 24 hours deliveries are signed with both
        the old and the new secret, so your receiver can switch without missing events."""
        return WebhookEndpointWithSecret.from_dict(
            self._client._request(
                "POST",
                path("/webhook_endpoints/{}/rotate_secret", id),
                idempotency_key=idempotency_key,
            )
        )

    def recover(self, id: str, since: datetime | str, *, idempotency_key: str | None = None) -> int:
        """After an outage of your receiver: send again, now, every delivery to this endpoint
        that failed (given up, or waiting for a retry) for an event created at or after
        ``since`` (timezone-aware, or RFC 3339 text); returns how many. Raises
        :class:`ConflictError` (reason ``endpoint_disabled``) for a disabled endpoint: re-enable
        it with ``update(id, enabled=True)`` first."""
        body = self._client._request(
            "POST",
            path("/webhook_endpoints/{}/recover", id),
            json=_recover_body(since),
            idempotency_key=idempotency_key,
        )
        recovered: int = body["recovered"]
        return recovered


class AsyncWebhookEndpoints(AsyncResource):
    async def create(
        self,
        *,
        url: str,
        events: Sequence[str] | None = None,
        description: str | None = None,
        idempotency_key: str | None = None,
    ) -> WebhookEndpointWithSecret:
        """See :meth:`WebhookEndpoints.create`."""
        body = _create_body(url, events, description)
        return WebhookEndpointWithSecret.from_dict(
            await self._client._request(
                "POST", "/webhook_endpoints", json=body, idempotency_key=idempotency_key
            )
        )

    async def list(
        self, *, limit: int | None = None, offset: int | None = None
    ) -> Page[WebhookEndpoint]:
        body = await self._client._request(
            "GET", "/webhook_endpoints", params=_page_params(limit, offset)
        )
        return parse_page(body, WebhookEndpoint.from_dict)

    def list_all(self, *, page_size: int = MAX_PAGE_SIZE) -> AsyncIterator[WebhookEndpoint]:
        return aiterate_pages(lambda offset: self.list(limit=page_size, offset=offset))

    async def get(self, id: str) -> WebhookEndpoint:
        return WebhookEndpoint.from_dict(
            await self._client._request("GET", path("/webhook_endpoints/{}", id))
        )

    async def update(
        self,
        id: str,
        *,
        url: str | NotGiven = NOT_GIVEN,
        events: Sequence[str] | NotGiven = NOT_GIVEN,
        description: str | NotGiven | None = NOT_GIVEN,
        enabled: bool | NotGiven = NOT_GIVEN,
    ) -> WebhookEndpoint:
        """See :meth:`WebhookEndpoints.update`."""
        body = _update_body(url, events, description, enabled)
        return WebhookEndpoint.from_dict(
            await self._client._request("PATCH", path("/webhook_endpoints/{}", id), json=body)
        )

    async def delete(self, id: str) -> None:
        await self._client._request("DELETE", path("/webhook_endpoints/{}", id))

    async def rotate_secret(
        self, id: str, *, idempotency_key: str | None = None
    ) -> WebhookEndpointWithSecret:
        """See :meth:`WebhookEndpoints.rotate_secret`."""
        return WebhookEndpointWithSecret.from_dict(
            await self._client._request(
                "POST",
                path("/webhook_endpoints/{}/rotate_secret", id),
                idempotency_key=idempotency_key,
            )
        )

    async def recover(
        self, id: str, since: datetime | str, *, idempotency_key: str | None = None
    ) -> int:
        """See :meth:`WebhookEndpoints.recover`."""
        body = await self._client._request(
            "POST",
            path("/webhook_endpoints/{}/recover", id),
            json=_recover_body(since),
            idempotency_key=idempotency_key,
        )
        recovered: int = body["recovered"]
        return recovered
