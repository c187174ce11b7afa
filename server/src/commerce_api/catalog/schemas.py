"""Product schemas: the wire shapes of docs/specification.md (part 2), the admin request bodies."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, field_validator

from commerce_api.core.money import MAX_PRICE_MINOR, MINOR_PER_MAJOR, to_minor
from commerce_api.core.timestamps import TimestampText
from commerce_api.http.schemas import (
    MultiLine,
    Pagination,
    RequestModel,
    ResponseModel,
    SingleLine,
    WholeNumber,
    drop_null_from_schema,
)

MAX_INVENTORY = 2_147_483_647
MAX_CATEGORY_LENGTH = 100
MAX_SEARCH_LENGTH = 200

ProductSort = Literal["created_at", "-created_at", "price", "-price", "name"]
"""A product list's order: by that field, then (created_at, id); ``-field`` is the exact
reverse of ``field``."""


def _two_decimals(value: float) -> float:
    to_minor(value)  # raises with a precise message
    return value


ProductName = Annotated[str, StringConstraints(min_length=1, max_length=200), SingleLine]
Description = Annotated[str, StringConstraints(max_length=5000), MultiLine]
Category = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_CATEGORY_LENGTH), SingleLine
]
Price = Annotated[
    float,
    Field(
        ge=0,
        le=MAX_PRICE_MINOR / MINOR_PER_MAJOR,
        description="Decimal amount with at most two fraction digits, e.g. 19.99.",
        json_schema_extra={"multipleOf": 0.01},
    ),
    AfterValidator(_two_decimals),
]
Inventory = Annotated[int, Field(ge=0, le=MAX_INVENTORY), WholeNumber]


class ProductListItem(ResponseModel):
    id: str = Field(examples=["prod_8fJ2kLmN0pQrStUvWxYz1234"])
    name: str
    description: str
    price: float = Field(description="Decimal amount with at most two fraction digits.")
    category: str
    created_at: TimestampText = Field(description="ISO 8601 UTC timestamp.")


class Product(ProductListItem):
    inventory_count: int = Field(description="Units in stock right now.")
    updated_at: TimestampText = Field(description="ISO 8601 UTC timestamp.")


class ProductList(ResponseModel):
    data: list[ProductListItem]
    pagination: Pagination


class CategoryListItem(ResponseModel):
    name: str
    product_count: int = Field(description="Active (not archived) products in the category.")


class CategoryList(ResponseModel):
    data: list[CategoryListItem]


class ProductCreate(RequestModel):
    name: ProductName
    description: Description = ""
    price: Price
    category: Category
    inventory_count: Inventory = 0


class ProductUpdate(RequestModel):
    """Fields to change; omitted fields keep their value (null is not a value)."""

    model_config = ConfigDict(json_schema_extra=drop_null_from_schema)

    name: ProductName | None = None
    description: Description | None = None
    price: Price | None = None
    category: Category | None = None
    inventory_count: Inventory | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("must not be null; omit the field to keep its value")
        return value

    def changes(self) -> dict[str, object]:
        return self.model_dump(exclude_unset=True)
