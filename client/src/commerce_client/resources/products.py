"""``client.products``: the catalogue (read-only for client keys)."""

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
from commerce_client.types.product import Product, ProductListItem

__all__ = ["AsyncProducts", "Products"]


def _params(
    category: str | None, limit: int | None, offset: int | None
) -> dict[str, str | int | None]:
    return {"category": category, "limit": limit, "offset": offset}


class Products(SyncResource):
    def list(
        self, *, category: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> Page[ProductListItem]:
        """One page of active products, oldest first. ``limit`` defaults to 20 (max 100)."""
        body = self._client._request("GET", "/products", params=_params(category, limit, offset))
        return parse_page(body, ProductListItem.from_dict)

    def list_all(
        self, *, category: str | None = None, page_size: int = MAX_PAGE_SIZE
    ) -> Iterator[ProductListItem]:
        """Every matching product, fetching pages as the iteration reaches them."""
        return iterate_pages(
            lambda offset: self.list(category=category, limit=page_size, offset=offset)
        )

    def get(self, id: str) -> Product:
        """One product with its current ``inventory_count``; :class:`NotFoundError` if unknown."""
        return Product.from_dict(self._client._request("GET", path("/products/{}", id)))


class AsyncProducts(AsyncResource):
    async def list(
        self, *, category: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> Page[ProductListItem]:
        """One page of active products, oldest first. ``limit`` defaults to 20 (max 100)."""
        body = await self._client._request(
            "GET", "/products", params=_params(category, limit, offset)
        )
        return parse_page(body, ProductListItem.from_dict)

    def list_all(
        self, *, category: str | None = None, page_size: int = MAX_PAGE_SIZE
    ) -> AsyncIterator[ProductListItem]:
        """Every matching product (``async for``), fetching pages as the iteration reaches them."""
        return aiterate_pages(
            lambda offset: self.list(category=category, limit=page_size, offset=offset)
        )

    async def get(self, id: str) -> Product:
        """One product with its current ``inventory_count``; :class:`NotFoundError` if unknown."""
        return Product.from_dict(await self._client._request("GET", path("/products/{}", id)))
