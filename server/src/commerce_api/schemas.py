"""Schema pieces shared by every resource: strict request models, safe strings, errors."""

from __future__ import annotations

from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from commerce_api.errors import ErrorCode


def _check_text(value: str, *, multiline: bool) -> str:
    # NUL cannot be stored by PostgreSQL, and lone surrogates are not encodable as UTF-8:
    # refuse them here so they can never reach (and fail in) the database.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    allowed = "\n\r\t" if multiline else ""
    if any(ord(ch) < 32 and ch not in allowed for ch in value) or "\x7f" in value:
        raise ValueError("must not contain control characters")
    return value


def _single_line(value: str) -> str:
    return _check_text(value, multiline=False)


def _multi_line(value: str) -> str:
    return _check_text(value, multiline=True)


# Markers for ``Annotated[str, StringConstraints(...), SingleLine]``.
SingleLine = AfterValidator(_single_line)
MultiLine = AfterValidator(_multi_line)


def drop_null_from_schema(schema: dict[str, Any]) -> None:
    """For PATCH bodies: optional fields may be omitted, but null is not accepted."""
    for prop in schema.get("properties", {}).values():
        variants = prop.get("anyOf")
        if variants and {"type": "null"} in variants:
            rest = [v for v in variants if v != {"type": "null"}]
            prop.pop("anyOf")
            if len(rest) == 1:
                prop.update(rest[0])
            else:
                prop["anyOf"] = rest
        if prop.get("default", "") is None:
            prop.pop("default")


class RequestModel(BaseModel):
    """Base for request bodies: strict JSON types, unknown fields rejected."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class ResponseModel(BaseModel):
    """Base for documented response bodies (never used to validate our own output)."""


class ErrorDetail(ResponseModel):
    code: ErrorCode = Field(description="One of the five error codes of the specification.")
    message: str = Field(description="A human-readable summary that says what to do.")
    details: str = Field(
        description="Specifics: the offending parameter (`items[0].quantity`), or the request "
        "id for a server error."
    )


class ErrorResponse(ResponseModel):
    error: ErrorDetail


class Pagination(ResponseModel):
    total: int = Field(description="Total number of matching items.")
    limit: int = Field(description="Page size applied (a `limit` above 100 is clamped to 100).")
    offset: int = Field(description="Number of items skipped.")
    has_more: bool = Field(description="True when more items remain after this page.")
