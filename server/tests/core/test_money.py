"""Money: exact conversion between JSON numbers and integer minor units."""

from __future__ import annotations

import re
from decimal import Decimal

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from commerce_api.core.money import MAX_PRICE_MINOR, AmountError, to_major, to_minor

_JSON_AMOUNT = re.compile(r"^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$")


@pytest.mark.parametrize(
    ("value", "minor"),
    [
        (19.99, 1999),
        (0.1, 10),
        (0.07, 7),
        (0.01, 1),
        (1e6, 100_000_000),
        (0, 0),
        (0.0, 0),
        (5, 500),
        (1_000_000, 100_000_000),
        (0.3, 30),
        (1.1, 110),
        (99_999_999.99, 9_999_999_999),
        (100_000_000, MAX_PRICE_MINOR),
        (Decimal("19.99"), 1999),
        (Decimal("0.10"), 10),
    ],
)
def test_to_minor_is_exact(value: float | int | Decimal, minor: int) -> None:
    result = to_minor(value)
    assert result == minor
    assert type(result) is int


@pytest.mark.parametrize(
    "value",
    [19.999, 0.001, 1.005, 0.1 + 0.2, Decimal("0.001"), Decimal("1.234")],
)
def test_to_minor_rejects_more_than_two_decimals(value: float | Decimal) -> None:
    with pytest.raises(AmountError, match="two decimal places"):
        to_minor(value)


@pytest.mark.parametrize("value", [-0.01, -1, -19.99, Decimal("-5")])
def test_to_minor_rejects_negative_amounts(value: float | int | Decimal) -> None:
    with pytest.raises(AmountError, match="negative"):
        to_minor(value)


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), float("-inf"), Decimal("NaN"), Decimal("Infinity")],
)
def test_to_minor_rejects_non_finite_numbers(value: float | Decimal) -> None:
    with pytest.raises(AmountError, match="finite"):
        to_minor(value)


@pytest.mark.parametrize("value", [True, False, "19.99", "1", None, [1], {"amount": 1}, b"1"])
def test_to_minor_rejects_non_numbers(value: object) -> None:
    with pytest.raises(AmountError, match="must be a number"):
        to_minor(value)


@pytest.mark.parametrize("value", [100_000_000.01, 100_000_001, 1e9, 1e300])
def test_to_minor_rejects_amounts_above_the_maximum(value: float | int) -> None:
    with pytest.raises(AmountError, match="at most"):
        to_minor(value)


def test_amount_error_is_a_value_error() -> None:
    assert issubclass(AmountError, ValueError)


@pytest.mark.parametrize(
    ("minor", "text"),
    [
        (0, b"0"),
        (1, b"0.01"),
        (7, b"0.07"),
        (10, b"0.1"),
        (100, b"1"),
        (1999, b"19.99"),
        (100_000_000, b"1000000"),
        (9_999_999_999, b"99999999.99"),
        (MAX_PRICE_MINOR, b"100000000"),
    ],
)
def test_to_major_renders_exact_json_numbers(minor: int, text: bytes) -> None:
    assert orjson.dumps(to_major(minor)) == text


def test_to_major_of_whole_amounts_is_an_int() -> None:
    assert to_major(1900) == 19
    assert type(to_major(1900)) is int
    assert type(to_major(1999)) is float


@settings(max_examples=1000, deadline=None)
@given(st.integers(min_value=0, max_value=MAX_PRICE_MINOR))
@example(0)
@example(1)
@example(MAX_PRICE_MINOR)
@example(MAX_PRICE_MINOR - 1)
@example(2**53 // 10**6)
def test_every_amount_round_trips_exactly(minor: int) -> None:
    major = to_major(minor)
    assert to_minor(major) == minor
    text = orjson.dumps(major).decode()
    assert _JSON_AMOUNT.match(text), text
    assert Decimal(text) == Decimal(minor) / 100
    # And back through JSON parsing, as a client would send it.
    assert to_minor(orjson.loads(text)) == minor
