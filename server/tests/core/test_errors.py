"""Validation errors name the offending parameter the way a client spells it."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from commerce_api.core.errors import Problem, describe_validation_error, validation_error
from commerce_api.core.timestamps import Timestamp
from commerce_api.core.validation_messages import parameter_path


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
    assert message == "The request body is not valid JSON."
    message, _ = describe_validation_error(
        {
            "type": "json_invalid",
            "loc": ("body", 21),
            "ctx": {"error": "EOF while parsing an object at line 1 column 21"},
        }
    )
    assert message == "The request body is not valid JSON (at line 1, column 21)."
    message, _ = describe_validation_error({"type": "json_invalid", "loc": ("body", 0)})
    assert message == "The request body is not valid JSON."


def test_invalid_body_as_a_whole() -> None:
    message, details = describe_validation_error(
        {"type": "model_type", "loc": ("body",), "msg": "Input should be an object"}
    )
    assert details == "body"
    assert message == "The request body is invalid: it must be an object."


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


def test_validation_error_lists_every_problem() -> None:
    first = {"type": "missing", "loc": ("body", "a"), "msg": "Field required"}
    second = {"type": "extra_forbidden", "loc": ("body", "b"), "msg": "Extra inputs"}
    third = {"type": "int_parsing", "loc": ("body", "c"), "msg": "Input should be an integer"}

    error = validation_error([first])
    assert (error.status, error.code, error.details) == (400, "invalid_request", "a")
    assert error.message == "Missing required parameter `a`."
    assert error.problems == [Problem("a", "validation_failed", error.message)]

    error = validation_error([first, second, third])
    assert error.details == "a", "details keeps naming the first parameter"
    assert error.problems == [
        Problem("a", "validation_failed", "Missing required parameter `a`."),
        Problem("b", "validation_failed", "Unknown parameter `b`."),
        Problem("c", "validation_failed", "Invalid value for `c`: must be a whole number."),
    ]
    assert error.message.startswith("The request has 3 problems: ")
    assert all(problem.message in error.message for problem in error.problems)
    assert "more problem" not in error.message
    empty = validation_error([])
    assert (empty.status, empty.details) == (400, "body")


class _Everything(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
    name: str = Field(min_length=1, max_length=3)
    count: int = Field(ge=0, le=10)
    ratio: float = Field(gt=0, lt=1)
    flag: bool
    tags: list[str] = Field(min_length=1, max_length=2)
    kind: Literal["a", "b"]
    nested: _Item
    since: Timestamp


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"name": "", "count": -1, "ratio": 0, "flag": "yes", "tags": [], "kind": "c"},
        {"name": "abcd", "count": 11, "ratio": 1, "flag": 1, "tags": ["a", "b", "c"]},
        {"name": 1, "count": "1", "ratio": "x", "tags": "a", "nested": [], "since": 5},
        {"count": 2.5, "ratio": float("nan"), "nested": {"product_id": 1}, "since": "yesterday"},
    ],
)
def test_messages_are_in_our_words_never_pydantic_s(payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        _Everything.model_validate(payload)
    errors = [{**error, "loc": ("body", *error["loc"])} for error in info.value.errors()]
    error = validation_error(errors)
    assert len(error.problems) == len(errors)
    for problem in error.problems:
        assert problem.message.startswith(("Invalid value for `", "Missing required")), problem
        for pydantic_words in ("Input should", "String should", "List should", "Value error"):
            assert pydantic_words not in problem.message, problem
        assert "is not a valid value" not in problem.message, f"not in the table: {problem}"


def test_timestamp_hint_about_query_encoding_only_for_a_query_parameter() -> None:
    with pytest.raises(ValidationError) as info:
        _Everything.model_validate({"since": "2026-11-21T08:12:41 01:00"})
    (raw,) = [error for error in info.value.errors() if error["loc"] == ("since",)]
    in_body, _ = describe_validation_error({**raw, "loc": ("body", "since")})
    in_query, _ = describe_validation_error({**raw, "loc": ("query", "created_gte")})
    assert "RFC 3339" in in_body
    assert "RFC 3339" in in_query
    assert "query" not in in_body
    assert "%2B" not in in_body
    assert "%2B" in in_query
