"""``client.events``: your account's events and the state of their webhook deliveries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime

from commerce_client._pagination import (
    MAX_PAGE_SIZE,
    NewestFirstQuery,
    Page,
    aiterate_after,
    iterate_after,
    parse_page,
)
from commerce_client.resources._base import AsyncResource, SyncResource, path
from commerce_client.types.event import Event, EventWithDeliveries

__all__ = ["AsyncEvents", "Events"]


def _query(
    type: str | None,
    order_id: str | None,
    created_gte: datetime | str | None,
    created_lt: datetime | str | None,
) -> NewestFirstQuery:
    return NewestFirstQuery({"type": type, "order_id": order_id}, created_gte, created_lt)


class Events(SyncResource):
    def list(
        self,
        *,
        type: str | None = None,
        order_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        starting_after: str | None = None,
    ) -> Page[Event]:
        """One page of events, newest first; ``type`` such as ``"order.created"``,
        ``order_id`` for one order's events, ``starting_after`` for the events after that one
        (the last id of the page before)."""
        query = _query(type, order_id, created_gte, created_lt)
        return self._page(query.params(limit=limit, offset=offset, starting_after=starting_after))

    def list_all(
        self,
        *,
        type: str | None = None,
        order_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[Event]:
        """Every matching event, newest first, fetching pages (by cursor) as the iteration
        reaches them: events recorded meanwhile do not shift them, so each event comes once."""
        query = _query(type, order_id, created_gte, created_lt)
        return iterate_after(
            lambda after: self._page(query.params(limit=page_size, starting_after=after))
        )

    def _page(self, params: dict[str, str | int | None]) -> Page[Event]:
        return parse_page(self._client._request("GET", "/events", params=params), Event.from_dict)

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
        self,
        *,
        type: str | None = None,
        order_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        starting_after: str | None = None,
    ) -> Page[Event]:
        """See :meth:`Events.list`."""
        query = _query(type, order_id, created_gte, created_lt)
        return await self._page(
            query.params(limit=limit, offset=offset, starting_after=starting_after)
        )

    def list_all(
        self,
        *,
        type: str | None = None,
        order_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> AsyncIterator[Event]:
        """See :meth:`Events.list_all` (``async for``)."""
        query = _query(type, order_id, created_gte, created_lt)
        return aiterate_after(
            lambda after: self._page(query.params(limit=page_size, starting_after=after))
        )

    async def _page(self, params: dict[str, str | int | None]) -> Page[Event]:
        body = await self._client._request("GET", "/events", params=params)
        return parse_page(body, Event.from_dict)

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
