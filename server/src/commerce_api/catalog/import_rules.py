"""The rules of an imported record, as plain Python checks: the rules of ``ProductCreate`` and
``ProductUpdate`` (``catalog/schemas.py``, the reference; a test holds the two in step), at a
fraction of their cost per record, with the import's own wording."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from commerce_api.catalog.schemas import MAX_CATEGORY_LENGTH, MAX_INVENTORY
from commerce_api.core.ids import looks_like
from commerce_api.core.money import AmountError, to_minor
from commerce_api.core.text import check_text

MAX_NAME_LENGTH = 200
MAX_DESCRIPTION_LENGTH = 5000
FIELDS = frozenset({"name", "description", "price", "category", "inventory_count"})
REQUIRED = ("name", "price", "category")
ID = "id"


class FieldError(ValueError):
    """One field of a record breaks a rule (``problem`` says which)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _text(field: str, value: Any, low: int, high: int, multiline: bool) -> str:
    if type(value) is not str:
        raise FieldError(field, "must be text")
    if not low <= len(value) <= high:
        raise FieldError(field, f"must be {low} to {high} characters long")
    try:
        return check_text(value, multiline=multiline)
    except ValueError as exc:
        raise FieldError(field, str(exc)) from None


def _name(value: Any) -> str:
    return _text("name", value, 1, MAX_NAME_LENGTH, False)


def _description(value: Any) -> str:
    return _text("description", value, 0, MAX_DESCRIPTION_LENGTH, True)


def _category(value: Any) -> str:
    return _text("category", value, 1, MAX_CATEGORY_LENGTH, False)


def _price(value: Any) -> int:
    try:
        return to_minor(value)
    except AmountError as exc:
        raise FieldError("price", str(exc)) from None


def _inventory(value: Any) -> int:
    # A whole float (2.0) counts as an integer, as JSON Schema says; 2.5, "2" and true do not.
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or not 0 <= value <= MAX_INVENTORY:
        raise FieldError("inventory_count", f"must be a whole number from 0 to {MAX_INVENTORY}")
    return value


# Each field: its column, and the check that gives the column's value.
_COLUMN_OF: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "name": ("name", _name),
    "description": ("description", _description),
    "price": ("price_minor", _price),
    "category": ("category", _category),
    "inventory_count": ("inventory_count", _inventory),
}


def _columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """The product columns of ``record``'s fields (the id aside), each checked."""
    columns: dict[str, Any] = {}
    for field, value in record.items():
        found = _COLUMN_OF.get(field)
        if found is None:
            if field == ID:
                continue
            raise FieldError(field, "is not a product field (" + ", ".join(sorted(FIELDS)) + ")")
        if value is None:
            raise FieldError(field, "must not be null; omit the field to keep its value")
        column, check = found
        columns[column] = check(value)
    return columns


def new_product_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """The columns of a product to create (``description`` "" and ``inventory_count`` 0 unless
    given)."""
    for field in REQUIRED:
        if field not in record:
            raise FieldError(field, "is required to create a product (or give an `id`)")
    return {"description": "", "inventory_count": 0, **_columns(record)}


def changed_columns(record: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The id of the product a record changes, and the columns it sets."""
    product_id = record[ID]
    if not isinstance(product_id, str) or not looks_like("prod", product_id):
        raise FieldError(ID, f"{product_id!r} is not a product id")
    return product_id, _columns(record)


def csv_value(field: str, text: str) -> Any:
    """The value of a CSV cell: the text, or the number it spells (``price``,
    ``inventory_count``)."""
    if field == "price":
        try:
            return Decimal(text.strip())
        except ArithmeticError:
            raise FieldError(field, "must be a number, such as 19.99") from None
    if field == "inventory_count":
        try:
            return int(text)
        except ValueError:
            raise FieldError(field, "must be a whole number, such as 12") from None
    return text
