"""Catalogue categories, for a storefront's category menu."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

__all__ = ["Category"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Category:
    """A category with at least one active product."""

    name: str
    """What ``products.list(category=…)`` takes."""
    product_count: int
    """Active products in this category."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(name=data["name"], product_count=data["product_count"])
