"""``client.events``: your account's events and the state of their webhook deliveries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from commerce_client._pagination import (
    MAX_PAGE_SIZE,
    Page,
    aiterate_pages,
    iterate_pages,
    parse_page,
)
from commerce_client.resources._base import AsyncResource, SyncResource, path
from commerce_client.types.event import Event, EventWithDeliveries

__all__ = ["AsyncEvents", "Events"]


def _params(type: str | None, limit: int | None, offset: int | None) -> dict[str, str | int | None]:
    return {"type": type, "limit": limit, "offset": offset}


class Events(SyncResource):
    def list(
        self, *, type: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> Page[Event]:
        """One page of events, oldest first; ``type`` such as ``"order.created"``."""
        body = self._client._request("GET", "/events", params=_params(type, limit, offset))
        return parse_page(body, Event.from_dict)

    def list_all(
        self, *, type: str | None = None, page_size: int = MAX_PAGE_SIZE
    ) -> Iterator[Event]:
        return iterate_pages(lambda offset: self.list(type=type, limit=page_size, offset=offset))

    def get(self, id: str) -> EventWithDeliveries:
        """One event, with the state of its delivery to each endpoint."""
        return EventWithDeliveries.from_dict(self._client._request("GET", path("/events/{}", id)))

    def redeliver(self, id: str, *, idempotency_key: str | None = None) -> EventWithDeliveries:
        """Deliver the event again to its endpoints (for example after fixing a receiver)."""
        return EventWithDeliveries.from_dict(
            self._client._request(
                "POST", path("/events/{}/redeliver", id), idempotency_key=idempotency_key
            )
        )


class AsyncEvents(AsyncResource):
    async def list(
        self, *, type: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> Page[Event]:
        """One page of events, oldest first; ``type`` such as ``"order.created"``."""
        body = await self._client._request("GET", "/events", params=_params(type, limit, offset))
        return parse_page(body, Event.from_dict)

    def list_all(
        self, *, type: str | None = None, page_size: int = MAX_PAGE_SIZE
    ) -> AsyncIterator[Event]:
        return aiterate_pages(lambda offset: self.list(type=type, limit=page_size, offset=offset))

    async def get(self, id: str) -> EventWithDeliveries:
        """One event, with the state of its delivery to each endpoint."""
        return EventWithDeliveries.from_dict(
            await self._client._request("GET", path("/events/{}", id))
        )

    async def redeliver(
        self, id: str, *, idempotency_key: str | None = None
    ) -> EventWithDeliveries:
        """See :meth:`Events.redeliver`."""
        return EventWithDeliveries.from_dict(
            await self._client._request(
                "POST", path("/events/{}/redeliver", id), idempotency_key=idempotency_key
            )
        )
