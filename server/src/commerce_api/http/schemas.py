"""Schema pieces shared by every resource: strict request models, safe strings, errors."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from commerce_api.core.errors import ErrorCode, Reason
from commerce_api.core.text import check_text


@dataclass(frozen=True, slots=True)
class _TextRule:
    """Refuses control characters and invalid Unicode, and says so in the JSON schema."""

    multiline: bool

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        check = partial(check_text, multiline=self.multiline)
        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        target = handler.resolve_ref_schema(json_schema)
        target["pattern"] = MULTI_LINE_PATTERN if self.multiline else SINGLE_LINE_PATTERN
        return json_schema


SINGLE_LINE_PATTERN = "^[^\\x00-\\x1f\\x7f]*$"
MULTI_LINE_PATTERN = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]*$"

# Markers for ``Annotated[str, StringConstraints(...), SingleLine]``.
SingleLine = _TextRule(multiline=False)
MultiLine = _TextRule(multiline=True)


def _whole_number(value: object) -> object:
    # JSON Schema counts 2.0 as an integer, and so do we; 2.5, "2" and true stay refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# Marker for integer request fields: ``Annotated[int, Field(...), WholeNumber]``.
WholeNumber = BeforeValidator(_whole_number)


def drop_null_from_schema(
    schema: dict[str, Any], _model: object = None, *, keep: frozenset[str] = frozenset()
) -> None:
    """For PATCH bodies: optional fields may be omitted, but null is not accepted (except for
    the fields in ``keep``, where null clears the value)."""
    for name, prop in schema.get("properties", {}).items():
        if name in keep:
            continue
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


class ErrorProblem(ResponseModel):
    parameter: str = Field(
        description="The parameter at fault, as the request spells it: a body field "
        "(`items[0].quantity`), a query parameter (`status`) or a header (`Authorization`)."
    )
    reason: Reason = Field(description="Why, one of the reasons of the error's `reason` list.")
    message: str = Field(description="What is wrong with it and what to do, in a sentence.")


class ErrorDetail(ResponseModel):
    code: ErrorCode = Field(description="One of the five error codes of the specification.")
    reason: Reason = Field(
        description="Why, as a stable word a program can switch on (`insufficient_stock`, "
        "`invalid_transition`, `idempotency_key_in_use`, …); each reason has one status and "
        "one code. New reasons may be added: treat an unknown one by its `code`."
    )
    message: str = Field(description="A human-readable summary that says what to do.")
    details: str = Field(
        description="Specifics: the offending parameter (`items[0].quantity`; the first of "
        "several, all of them are in `problems`), or the request id for a server error."
    )
    problems: list[ErrorProblem] = Field(
        description="Every problem of the request, in the order found: several when several "
        "fields are wrong, one for a refusal about one parameter, none for a server error "
        "(5xx) or a rate limit."
    )


class ErrorResponse(ResponseModel):
    error: ErrorDetail


class Pagination(ResponseModel):
    total: int = Field(description="Total number of matching items.")
    limit: int = Field(description="Page size applied (a `limit` above 100 is clamped to 100).")
    offset: int = Field(description="Number of items skipped.")
    has_more: bool = Field(description="True when more items remain after this page.")
