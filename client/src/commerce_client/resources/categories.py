"""``client.categories``: the catalogue's categories (a storefront's category menu)."""

from __future__ import annotations

from typing import Any

from commerce_client.resources._base import AsyncResource, SyncResource
from commerce_client.types.category import Category

__all__ = ["AsyncCategories", "Categories"]


def _categories(body: Any) -> list[Category]:
    return [Category.from_dict(entry) for entry in body["data"]]


class Categories(SyncResource):
    def list(self) -> list[Category]:
        """Every category that has an active product, with how many it has (one request: the
        list is not paginated)."""
        return _categories(self._client._request("GET", "/categories"))


class AsyncCategories(AsyncResource):
    async def list(self) -> list[Category]:
        """See :meth:`Categories.list`."""
        return _categories(await self._client._request("GET", "/categories"))
