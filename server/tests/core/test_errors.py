"""Validation errors name the offending parameter the way a client spells it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from commerce_api.core.errors import describe_validation_error, parameter_path, validation_error


@pytest.mark.parametrize(
    ("loc", "expected"),
    [
        (("body", "items", 2, "quantity"), "items[2].quantity"),
        (("body", "items", 0, "quantity"), "items[0].quantity"),
        (("body", "shipping_address", "country"), "shipping_address.country"),
        (("body", "customer_id"), "customer_id"),
        (("body",), "body"),
        ((), "body"),
        (("query", "limit"), "limit"),
        (("query",), "query"),
        (("path", "id"), "id"),
        (("header", "Idempotency-Key"), "Idempotency-Key"),
        (("items", 3), "items[3]"),
        (("body", "items", 1), "items[1]"),
        (("body", "matrix", 1, 2), "matrix[1][2]"),
        (("body", "a", "b", "c"), "a.b.c"),
        (("name",), "name"),
        ((0, "name"), "[0].name"),
    ],
)
def test_parameter_path(loc: tuple[str | int, ...], expected: str) -> None:
    assert parameter_path(loc) == expected


def test_missing_parameter_is_named() -> None:
    message, details = describe_validation_error(
        {"type": "missing", "loc": ("body", "items", 0, "quantity"), "msg": "Field required"}
    )
    assert details == "items[0].quantity"
    assert "`items[0].quantity`" in message
    assert "Missing" in message


def test_missing_body() -> None:
    message, details = describe_validation_error(
        {"type": "missing", "loc": ("body",), "msg": "Field required"}
    )
    assert details == "body"
    assert "body is required" in message


def test_unknown_parameter_is_named() -> None:
    message, details = describe_validation_error(
        {"type": "extra_forbidden", "loc": ("body", "status"), "msg": "Extra inputs"}
    )
    assert details == "status"
    assert message == "Unknown parameter `status`."


def test_invalid_value_names_the_parameter_and_the_reason() -> None:
    message, details = describe_validation_error(
        {
            "type": "value_error",
            "loc": ("body", "price"),
            "msg": "Value error, must have at most two decimal places",
        }
    )
    assert details == "price"
    assert message == "Invalid value for `price`: must have at most two decimal places."


def test_invalid_query_parameter() -> None:
    message, details = describe_validation_error(
        {"type": "int_parsing", "loc": ("query", "limit"), "msg": "Input should be an integer"}
    )
    assert details == "limit"
    assert "`limit`" in message


def test_invalid_json_body() -> None:
    message, details = describe_validation_error(
        {"type": "json_invalid", "loc": ("body", 12), "ctx": {"error": "Expecting value"}}
    )
    assert details == "body"
    assert message == "The request body is not valid JSON (Expecting value)."
    message, _ = describe_validation_error({"type": "json_invalid", "loc": ("body", 0)})
    assert message == "The request body is not valid JSON."


def test_invalid_body_as_a_whole() -> None:
    message, details = describe_validation_error(
        {"type": "model_type", "loc": ("body",), "msg": "Input should be an object"}
    )
    assert details == "body"
    assert "Input should be an object" in message


class _Item(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    product_id: str
    quantity: int


class _Order(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    items: list[_Item]


def _errors(payload: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as info:
        _Order.model_validate(payload)
    return [dict(error) for error in info.value.errors()]


def test_real_pydantic_errors_are_described() -> None:
    errors = _errors({"items": [{"product_id": "p", "quantity": 1}, {"product_id": "p"}]})
    message, details = describe_validation_error({**errors[0], "loc": ("body", *errors[0]["loc"])})
    assert details == "items[1].quantity"
    assert message == "Missing required parameter `items[1].quantity`."

    errors = _errors({"items": [{"product_id": "p", "quantity": "2"}]})
    message, details = describe_validation_error({**errors[0], "loc": ("body", *errors[0]["loc"])})
    assert details == "items[0].quantity"
    assert message.startswith("Invalid value for `items[0].quantity`:")


def test_validation_error_counts_further_problems() -> None:
    first = {"type": "missing", "loc": ("body", "a"), "msg": "Field required"}
    second = {"type": "missing", "loc": ("body", "b"), "msg": "Field required"}
    third = {"type": "missing", "loc": ("body", "c"), "msg": "Field required"}

    error = validation_error([first])
    assert (error.status, error.code, error.details) == (400, "invalid_request", "a")
    assert error.message == "Missing required parameter `a`."

    assert validation_error([first, second]).message.endswith("(1 more problem found.)")
    assert validation_error([first, second, third]).message.endswith("(2 more problems found.)")
    empty = validation_error([])
    assert (empty.status, empty.details) == (400, "body")
