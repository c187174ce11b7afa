"""Exact money: integer minor units inside, JSON numbers with at most two decimals outside.

Amounts are stored and computed as integers (cents). They are rendered as a JSON number by
dividing by 100 as a float: the quotient of two exactly representable integers is the double
nearest to the decimal value, and Python (and orjson) print the shortest text that round-trips,
so 1999 renders as ``19.99`` exactly, for every amount below 2**53 minor units.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

MINOR_PER_MAJOR = 100
MAX_PRICE_MINOR = 100_000_000_00  # 100 million in major units; far below 2**53


class AmountError(ValueError):
    pass


def to_minor(value: object) -> int:
    """Parse a JSON number (int or float, never bool or string) into minor units."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise AmountError("must be a number, such as 19.99")
    try:
        # repr() of a float is the shortest text that round-trips: 19.99, not 19.989999…
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation as exc:  # pragma: no cover - floats are always finite here
        raise AmountError("must be a finite number") from exc
    if not amount.is_finite():
        raise AmountError("must be a finite number")
    minor = amount * MINOR_PER_MAJOR
    if minor != minor.to_integral_value():
        raise AmountError("must have at most two decimal places")
    if minor < 0:
        raise AmountError("must not be negative")
    if minor > MAX_PRICE_MINOR:
        raise AmountError(f"must be at most {MAX_PRICE_MINOR // MINOR_PER_MAJOR}")
    return int(minor)


def to_major(minor: int) -> float | int:
    """The JSON number for an amount in minor units (see the module docstring)."""
    if minor % MINOR_PER_MAJOR == 0:
        return minor // MINOR_PER_MAJOR
    return minor / MINOR_PER_MAJOR
