"""Catalogue products."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, Self

from commerce_client import _parse

__all__ = ["Product", "ProductListItem", "ProductSort"]

ProductSort = Literal["created_at", "-created_at", "price", "-price", "name"]
"""The orders of ``products.list(sort=…)``: ``-`` is descending; ``created_at`` is the
default."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProductListItem:
    """A product as listed by ``products.list()``; ``products.get()`` adds stock and
    ``updated_at``."""

    id: str
    name: str
    description: str
    price: Decimal
    """Exact decimal amount, at most two fraction digits, in the deployment's currency."""
    category: str
    created_at: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**_list_item_fields(data))


@dataclass(frozen=True, slots=True, kw_only=True)
class Product(ProductListItem):
    """One product, with its current stock."""

    inventory_count: int
    """Units in stock right now."""
    updated_at: datetime

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            **_list_item_fields(data),
            inventory_count=data["inventory_count"],
            updated_at=_parse.timestamp(data["updated_at"]),
        )


def _list_item_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": data["id"],
        "name": data["name"],
        "description": data["description"],
        "price": _parse.money(data["price"]),
        "category": data["category"],
        "created_at": _parse.timestamp(data["created_at"]),
    }
