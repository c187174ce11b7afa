"""``client.products``: the catalogue (read by every key; changed with an admin key)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

from commerce_client._pagination import (
    MAX_PAGE_SIZE,
    Page,
    aiterate_pages,
    iterate_pages,
    parse_page,
)
from commerce_client._types import NOT_GIVEN, NotGiven
from commerce_client.resources._base import AsyncResource, SyncResource, path
from commerce_client.types.product import Product, ProductListItem, ProductSort

__all__ = ["AsyncProducts", "Products"]

Price = Decimal | int | float
"""An amount with at most two fraction digits: ``Decimal("19.99")`` (exact), or a number."""


def _params(
    category: str | None,
    q: str | None,
    sort: ProductSort | None,
    limit: int | None,
    offset: int | None,
) -> dict[str, str | int | None]:
    return {"category": category, "q": q, "sort": sort, "limit": limit, "offset": offset}


def _price(value: Price) -> float | int:
    """The JSON number of a price. A Decimal goes as the float whose shortest repr is its
    digits (``Decimal("19.99")`` → ``19.99``), which is what the API reads back."""
    if isinstance(value, bool) or not isinstance(value, Decimal | int | float):
        raise TypeError(f"price must be a Decimal or a number, got {value!r}")
    return float(value) if isinstance(value, Decimal) else value


def _create_body(
    name: str,
    price: Price,
    category: str,
    description: str | None,
    inventory_count: int | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "price": _price(price), "category": category}
    if description is not None:
        body["description"] = description
    if inventory_count is not None:
        body["inventory_count"] = inventory_count
    return body


def _update_body(
    name: str | NotGiven,
    description: str | NotGiven,
    price: Price | NotGiven,
    category: str | NotGiven,
    inventory_count: int | NotGiven,
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": name,
        "description": description,
        "price": price if isinstance(price, NotGiven) else _price(price),
        "category": category,
        "inventory_count": inventory_count,
    }
    return {field: value for field, value in fields.items() if not isinstance(value, NotGiven)}


class Products(SyncResource):
    def list(
        self,
        *,
        category: str | None = None,
        q: str | None = None,
        sort: ProductSort | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Page[ProductListItem]:
        """One page of active products, oldest first unless ``sort`` says otherwise
        (``"price"``, ``"-price"``, ``"name"``, ``"-created_at"``). ``q``: words to find in the
        name or description. ``limit`` defaults to 20 (max 100)."""
        body = self._client._request(
            "GET", "/products", params=_params(category, q, sort, limit, offset)
        )
        return parse_page(body, ProductListItem.from_dict)

    def list_all(
        self,
        *,
        category: str | None = None,
        q: str | None = None,
        sort: ProductSort | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[ProductListItem]:
        """Every matching product, fetching pages as the iteration reaches them."""
        return iterate_pages(
            lambda offset: self.list(
                category=category, q=q, sort=sort, limit=page_size, offset=offset
            )
        )

    def get(self, id: str) -> Product:
        """One product with its current ``inventory_count``; :class:`NotFoundError` if unknown."""
        return Product.from_dict(self._client._request("GET", path("/products/{}", id)))

    def create(
        self,
        *,
        name: str,
        price: Price,
        category: str,
        description: str | None = None,
        inventory_count: int | None = None,
        idempotency_key: str | None = None,
    ) -> Product:
        """Add a product to the catalogue (an admin key; :class:`PermissionDeniedError`
        otherwise). ``description`` defaults to empty, ``inventory_count`` to 0."""
        body = _create_body(name, price, category, description, inventory_count)
        return Product.from_dict(
            self._client._request("POST", "/products", json=body, idempotency_key=idempotency_key)
        )

    def update(
        self,
        id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        description: str | NotGiven = NOT_GIVEN,
        price: Price | NotGiven = NOT_GIVEN,
        category: str | NotGiven = NOT_GIVEN,
        inventory_count: int | NotGiven = NOT_GIVEN,
    ) -> Product:
        """Change the given fields (an admin key); the others keep their value.
        ``inventory_count`` sets the stock to that number."""
        body = _update_body(name, description, price, category, inventory_count)
        return Product.from_dict(
            self._client._request("PATCH", path("/products/{}", id), json=body)
        )

    def archive(self, id: str) -> None:
        """Hide a product from the catalogue (an admin key). Orders that include it keep their
        copy of its name and price."""
        self._client._request("DELETE", path("/products/{}", id))


class AsyncProducts(AsyncResource):
    async def list(
        self,
        *,
        category: str | None = None,
        q: str | None = None,
        sort: ProductSort | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Page[ProductListItem]:
        """See :meth:`Products.list`."""
        body = await self._client._request(
            "GET", "/products", params=_params(category, q, sort, limit, offset)
        )
        return parse_page(body, ProductListItem.from_dict)

    def list_all(
        self,
        *,
        category: str | None = None,
        q: str | None = None,
        sort: ProductSort | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> AsyncIterator[ProductListItem]:
        """Every matching product (``async for``), fetching pages as the iteration reaches them."""
        return aiterate_pages(
            lambda offset: self.list(
                category=category, q=q, sort=sort, limit=page_size, offset=offset
            )
        )

    async def get(self, id: str) -> Product:
        """One product with its current ``inventory_count``; :class:`NotFoundError` if unknown."""
        return Product.from_dict(await self._client._request("GET", path("/products/{}", id)))

    async def create(
        self,
        *,
        name: str,
        price: Price,
        category: str,
        description: str | None = None,
        inventory_count: int | None = None,
        idempotency_key: str | None = None,
    ) -> Product:
        """See :meth:`Products.create`."""
        body = _create_body(name, price, category, description, inventory_count)
        return Product.from_dict(
            await self._client._request(
                "POST", "/products", json=body, idempotency_key=idempotency_key
            )
        )

    async def update(
        self,
        id: str,
        *,
        name: str | NotGiven = NOT_GIVEN,
        description: str | NotGiven = NOT_GIVEN,
        price: Price | NotGiven = NOT_GIVEN,
        category: str | NotGiven = NOT_GIVEN,
        inventory_count: int | NotGiven = NOT_GIVEN,
    ) -> Product:
        """See :meth:`Products.update`."""
        body = _update_body(name, description, price, category, inventory_count)
        return Product.from_dict(
            await self._client._request("PATCH", path("/products/{}", id), json=body)
        )

    async def archive(self, id: str) -> None:
        """See :meth:`Products.archive`."""
        await self._client._request("DELETE", path("/products/{}", id))
