"""The rules of an imported record, as plain Python checks: the rules of ``ProductCreate`` and
``ProductUpdate`` (``catalog/schemas.py``, the reference; a test holds the two in step), at a
fraction of their cost per record, with the import's own wording."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from commerce_api.catalog.schemas import MAX_CATEGORY_LENGTH, MAX_INVENTORY
from commerce_api.core.ids import looks_like
from commerce_api.core.money import MAX_PRICE_MINOR, MINOR_PER_MAJOR, AmountError, to_minor
from commerce_api.core.spreadsheet import neutralise_cell
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


@dataclass(slots=True)
class NewProducts:
    """New products' columns, a list each, in the records' order."""

    name: list[str] = dataclasses.field(default_factory=list)
    description: list[str] = dataclasses.field(default_factory=list)
    price_minor: list[int] = dataclasses.field(default_factory=list)
    category: list[str] = dataclasses.field(default_factory=list)
    inventory_count: list[int] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.name)

    def append(self, columns: Mapping[str, Any]) -> None:
        """One product's columns (:func:`new_product_columns`')."""
        self.name.append(columns["name"])
        self.description.append(columns["description"])
        self.price_minor.append(columns["price_minor"])
        self.category.append(columns["category"])
        self.inventory_count.append(columns["inventory_count"])

    def extend(self, more: NewProducts) -> None:
        self.name += more.name
        self.description += more.description
        self.price_minor += more.price_minor
        self.category += more.category
        self.inventory_count += more.inventory_count

    def columns(self) -> dict[str, list[Any]]:
        return {
            "name": self.name,
            "description": self.description,
            "price_minor": self.price_minor,
            "category": self.category,
            "inventory_count": self.inventory_count,
        }


# Cells that a column-wise check takes as they are: prices with two decimals (as every export
# writes them) and whole numbers short enough to be in range. Any other spelling (``19.9``,
# `` 19.99``, ``1e3``) goes through the record's own checks.
_PRICES = re.compile(r"\d{1,8}\.\d\d(?:,\d{1,8}\.\d\d)*")
_WHOLE_NUMBERS = re.compile(r"\d{1,9}(?:,\d{1,9})*")
# What an export puts before a cell that a spreadsheet would run (``restore_cell`` takes it off).
_PROTECTED = neutralise_cell("=").removesuffix("=")


def csv_new_products(header: Sequence[str], rows: Sequence[Sequence[str]]) -> NewProducts | None:
    """CSV rows (cells under ``header``) that create products, checked a column at a time: the
    columns that :func:`new_product_columns` gives them, if every cell is plainly valid (each
    check is one pass of C over a column). None if any might not be, or needs more than
    taking as it is (a cell an export protected from spreadsheets, an ``id`` column, a price
    written otherwise): then check them record by record, which says where and why."""
    width = len(header)
    if (
        not rows
        or ID in header
        or len(set(header)) != width
        or any(column not in header for column in REQUIRED)
        or any(len(row) != width for row in rows)
    ):
        return None
    cells = dict(zip(header, zip(*rows, strict=True), strict=True))
    for column in cells.values():
        joined = "\x00".join(column)
        if joined.startswith(_PROTECTED) or "\x00" + _PROTECTED in joined:  # restore_cell
            return None  # might take a character off
    count = len(rows)
    name = _plain_texts(cells["name"], 1, MAX_NAME_LENGTH, multiline=False)
    category = _plain_texts(cells["category"], 1, MAX_CATEGORY_LENGTH, multiline=False)
    description: list[str] | None = [""] * count
    if (given := cells.get("description")) is not None:
        description = _plain_texts(given, 0, MAX_DESCRIPTION_LENGTH, multiline=True)
    prices = ",".join(cells["price"])
    if name is None or category is None or description is None or not _PRICES.fullmatch(prices):
        return None
    # "19.99" → 1999: two decimals each (``_PRICES``), so the digits are the minor units.
    assert MINOR_PER_MAJOR == 100, "prices taken as written have two decimals"
    price_minor = list(map(int, prices.replace(".", "").split(",")))
    if len(price_minor) != count or max(price_minor) > MAX_PRICE_MINOR:
        return None
    inventory_count = [0] * count
    if (stocks := cells.get("inventory_count")) is not None:
        joined = ",".join(stocks)
        if not _WHOLE_NUMBERS.fullmatch(joined):
            return None
        inventory_count = list(map(int, joined.split(",")))
        if len(inventory_count) != count or max(inventory_count) > MAX_INVENTORY:
            return None
    return NewProducts(name, description, price_minor, category, inventory_count)


def _plain_texts(
    column: Sequence[str], low: int, high: int, *, multiline: bool
) -> list[str] | None:
    """``column`` if every cell passes :func:`_text`'s rules (``low`` to ``high`` characters,
    ``check_text``'s, which hold for all the cells if they hold for them joined), else None."""
    if min(map(len, column)) < low or max(map(len, column)) > high:
        return None
    try:
        check_text("".join(column), multiline=multiline)
    except ValueError:
        return None
    return list(column)
