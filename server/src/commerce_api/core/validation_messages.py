"""Our wording for what the request validator found: one pydantic error → (parameter, message).

pydantic's own messages ("Input should be a valid string") describe its types, not our API, and
change between its releases; the message here is built from the error's documented ``type`` and
``ctx`` only. Our validators' ``ValueError`` texts are ours already and are kept. Where the
problem sits (a query parameter or a JSON body field) is known from ``loc``: a hint about
query-string encoding is given for a query parameter only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# A custom error type (``PydanticCustomError``) raised by our timestamp rule; its message says
# where to put the zone, and a query parameter gets the ``%2B`` hint.
TIMESTAMP_FORMAT = "timestamp_format"
TIMESTAMP_RULE = "must be an RFC 3339 timestamp with its time zone, such as `2026-11-21T08:12:41Z`"
_QUERY_PLUS_HINT = " (in a query string, send the `+` of an offset as `%2B`)"

_QUOTED = re.compile(r"'([^']*)'")
_JSON_POSITION = re.compile(r"line (\d+) column (\d+)")


def parameter_path(loc: Sequence[str | int]) -> str:
    """``('body', 'items', 2, 'quantity')`` → ``items[2].quantity``."""
    parts = list(loc)
    if parts and parts[0] in {"body", "query", "path", "header"}:
        where = parts.pop(0)
        if not parts:
            return "body" if where == "body" else str(where)
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "body"


def _one_of(ctx: Mapping[str, Any]) -> str:
    values = _QUOTED.findall(str(ctx.get("expected", "")))
    if not values:
        return "is not one of the accepted values"
    return "must be one of " + ", ".join(f"`{value}`" for value in values)


def _number(value: object) -> str:
    """``100000000.0`` → ``100000000``: a bound as a person writes it."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _items(count: object) -> str:
    return f"{count} item" + ("" if count == 1 else "s")


def _characters(count: object) -> str:
    return f"{count} character" + ("" if count == 1 else "s")


# type → the rule broken, in our words ("must be …"), from the error's ``ctx``.
_RULES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "string_type": lambda _: "must be a string",
    "int_type": lambda _: "must be a whole number",
    "int_parsing": lambda _: "must be a whole number",
    "int_from_float": lambda _: "must be a whole number",
    "float_type": lambda _: "must be a number",
    "float_parsing": lambda _: "must be a number",
    "finite_number": lambda _: "must be a finite number",
    "bool_type": lambda _: "must be `true` or `false`",
    "bool_parsing": lambda _: "must be `true` or `false`",
    "list_type": lambda _: "must be a list",
    "dict_type": lambda _: "must be an object",
    "model_type": lambda _: "must be an object",
    "model_attributes_type": lambda _: "must be an object",
    "none_required": lambda _: "must be null",
    "literal_error": _one_of,
    "enum": _one_of,
    "string_too_short": lambda ctx: (
        "must not be empty"
        if ctx.get("min_length") == 1
        else f"must have at least {_characters(ctx.get('min_length'))}"
    ),
    "string_too_long": lambda ctx: f"must have at most {_characters(ctx.get('max_length'))}",
    "too_short": lambda ctx: (
        "must not be empty"
        if ctx.get("min_length") == 1
        else f"must have at least {_items(ctx.get('min_length'))}"
    ),
    "too_long": lambda ctx: f"must have at most {_items(ctx.get('max_length'))}",
    "greater_than": lambda ctx: f"must be greater than {_number(ctx.get('gt'))}",
    "greater_than_equal": lambda ctx: f"must be at least {_number(ctx.get('ge'))}",
    "less_than": lambda ctx: f"must be less than {_number(ctx.get('lt'))}",
    "less_than_equal": lambda ctx: f"must be at most {_number(ctx.get('le'))}",
    "multiple_of": lambda ctx: f"must be a multiple of {_number(ctx.get('multiple_of'))}",
    "string_pattern_mismatch": lambda _: "is not in the accepted form",
    "timezone_aware": lambda _: TIMESTAMP_RULE,
    "datetime_type": lambda _: TIMESTAMP_RULE,
    "datetime_parsing": lambda _: TIMESTAMP_RULE,
    "datetime_from_date_parsing": lambda _: TIMESTAMP_RULE,
    "datetime_object_invalid": lambda _: TIMESTAMP_RULE,
    TIMESTAMP_FORMAT: lambda _: TIMESTAMP_RULE,
}


def describe(error: Mapping[str, Any]) -> tuple[str, str, bool]:
    """``(parameter, message, malformed)`` for one pydantic error; ``malformed`` when the body
    is not JSON at all (nothing to correct field by field)."""
    loc = tuple(error.get("loc", ()))
    kind = str(error.get("type", ""))
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    param = parameter_path(loc)
    if kind == "json_invalid":  # where the parser stopped, not its words
        at = _JSON_POSITION.search(str(ctx.get("error", "")))
        where = f" (at line {at.group(1)}, column {at.group(2)})" if at else ""
        return "body", f"The request body is not valid JSON{where}.", True
    if kind == "missing":
        if param == "body":
            return "body", "A JSON request body is required.", False
        return param, f"Missing required parameter `{param}`.", False
    if kind == "extra_forbidden":
        return param, f"Unknown parameter `{param}`.", False
    rule = _RULES.get(kind)
    if rule is not None:
        text = rule(ctx)
    elif kind in {"value_error", "assertion_error"}:  # our validators' own words
        text = str(error.get("msg", "")).removeprefix("Value error, ")
        text = text.removeprefix("Assertion failed, ")
    else:  # a type this table does not know yet: say which value, not pydantic's words
        text = "is not a valid value"
    if kind in {TIMESTAMP_FORMAT, "timezone_aware", "datetime_parsing"} and loc[:1] == ("query",):
        text += _QUERY_PLUS_HINT
    if param == "body":
        return "body", f"The request body is invalid: it {text}.", False
    return param, f"Invalid value for `{param}`: {text}.", False
