"""``client.orders``: place, read, cancel and fulfil orders."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import datetime
from typing import Any

from commerce_client._pagination import (
    MAX_PAGE_SIZE,
    NewestFirstQuery,
    Page,
    aiterate_after,
    iterate_after,
    parse_page,
)
from commerce_client.resources._base import AsyncResource, SyncResource, path
from commerce_client.types.order import (
    Order,
    OrderItemParam,
    OrderStatus,
    ShippingAddressParam,
    TrackingParam,
)

__all__ = ["AsyncOrders", "Orders"]


def _create_body(
    customer_id: str, items: Iterable[OrderItemParam], shipping_address: ShippingAddressParam
) -> dict[str, Any]:
    return {
        "customer_id": customer_id,
        "items": [dict(item) for item in items],
        "shipping_address": dict(shipping_address),
    }


def _fulfill_body(tracking: TrackingParam | None) -> dict[str, Any] | None:
    """No body without tracking: the request is then the one clients have always sent."""
    return None if tracking is None else {"tracking": dict(tracking)}


def _query(
    status: OrderStatus | None,
    customer_id: str | None,
    created_gte: datetime | str | None,
    created_lt: datetime | str | None,
) -> NewestFirstQuery:
    return NewestFirstQuery({"status": status, "customer_id": customer_id}, created_gte, created_lt)


class Orders(SyncResource):
    def create(
        self,
        *,
        customer_id: str,
        items: Iterable[OrderItemParam],
        shipping_address: ShippingAddressParam,
        idempotency_key: str | None = None,
    ) -> Order:
        """Place an order; its stock is reserved at once (:class:`ConflictError` when there is
        not enough). Retried safely: one ``idempotency_key`` (generated when None) serves every
        retry of this call. Pass your own to make retries across calls or processes safe."""
        body = _create_body(customer_id, items, shipping_address)
        return Order.from_dict(
            self._client._request("POST", "/orders", json=body, idempotency_key=idempotency_key)
        )

    def get(self, id: str) -> Order:
        return Order.from_dict(self._client._request("GET", path("/orders/{}", id)))

    def list(
        self,
        *,
        status: OrderStatus | None = None,
        customer_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        starting_after: str | None = None,
    ) -> Page[Order]:
        """One page of your orders, newest first. ``limit`` defaults to 20 (max 100).
        ``starting_after``: the orders after this one (the last id of the page before);
        ``created_gte`` / ``created_lt``: a time range (aware ``datetime`` or RFC 3339)."""
        query = _query(status, customer_id, created_gte, created_lt)
        return self._page(query.params(limit=limit, offset=offset, starting_after=starting_after))

    def list_all(
        self,
        *,
        status: OrderStatus | None = None,
        customer_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[Order]:
        """Every matching order, newest first, fetching pages (by cursor) as the iteration
        reaches them: orders placed meanwhile do not shift them, so each order comes once."""
        query = _query(status, customer_id, created_gte, created_lt)
        return iterate_after(
            lambda after: self._page(query.params(limit=page_size, starting_after=after))
        )

    def _page(self, params: dict[str, str | int | None]) -> Page[Order]:
        return parse_page(self._client._request("GET", "/orders", params=params), Order.from_dict)

    def cancel(self, id: str, *, idempotency_key: str | None = None) -> Order:
        """Cancel a pending order and return its stock (:class:`ConflictError` otherwise)."""
        return Order.from_dict(
            self._client._request(
                "POST", path("/orders/{}/cancel", id), idempotency_key=idempotency_key
            )
        )

    def fulfill(
        self,
        id: str,
        *,
        tracking: TrackingParam | None = None,
        idempotency_key: str | None = None,
    ) -> Order:
        """Mark a pending order fulfilled: an admin key, or in the sandbox the owning client.
        ``tracking`` (``{"carrier", "number", "url"}``, ``url`` optional and https) says where
        the parcel is: it is on the order and in its ``order.fulfilled`` event."""
        return Order.from_dict(
            self._client._request(
                "POST",
                path("/orders/{}/fulfill", id),
                json=_fulfill_body(tracking),
                idempotency_key=idempotency_key,
            )
        )


class AsyncOrders(AsyncResource):
    async def create(
        self,
        *,
        customer_id: str,
        items: Iterable[OrderItemParam],
        shipping_address: ShippingAddressParam,
        idempotency_key: str | None = None,
    ) -> Order:
        """See :meth:`Orders.create`."""
        body = _create_body(customer_id, items, shipping_address)
        return Order.from_dict(
            await self._client._request(
                "POST", "/orders", json=body, idempotency_key=idempotency_key
            )
        )

    async def get(self, id: str) -> Order:
        return Order.from_dict(await self._client._request("GET", path("/orders/{}", id)))

    async def list(
        self,
        *,
        status: OrderStatus | None = None,
        customer_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        starting_after: str | None = None,
    ) -> Page[Order]:
        """See :meth:`Orders.list`."""
        query = _query(status, customer_id, created_gte, created_lt)
        return await self._page(
            query.params(limit=limit, offset=offset, starting_after=starting_after)
        )

    def list_all(
        self,
        *,
        status: OrderStatus | None = None,
        customer_id: str | None = None,
        created_gte: datetime | str | None = None,
        created_lt: datetime | str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> AsyncIterator[Order]:
        """See :meth:`Orders.list_all` (``async for``)."""
        query = _query(status, customer_id, created_gte, created_lt)
        return aiterate_after(
            lambda after: self._page(query.params(limit=page_size, starting_after=after))
        )

    async def _page(self, params: dict[str, str | int | None]) -> Page[Order]:
        body = await self._client._request("GET", "/orders", params=params)
        return parse_page(body, Order.from_dict)

    async def cancel(self, id: str, *, idempotency_key: str | None = None) -> Order:
        """See :meth:`Orders.cancel`."""
        return Order.from_dict(
            await self._client._request(
                "POST", path("/orders/{}/cancel", id), idempotency_key=idempotency_key
            )
        )

    async def fulfill(
        self,
        id: str,
        *,
        tracking: TrackingParam | None = None,
        idempotency_key: str | None = None,
    ) -> Order:
        """See :meth:`Orders.fulfill`."""
        return Order.from_dict(
            await self._client._request(
                "POST",
                path("/orders/{}/fulfill", id),
                json=_fulfill_body(tracking),
                idempotency_key=idempotency_key,
            )
        )
