"""The routes the fast lane (``fastlane.py``) serves, derived once at start-up from their
declarations (``http/declaration.py``): the path pattern, the dependencies the fast lane
provides, the body model, and a pydantic ``TypeAdapter`` per path and query parameter, built
from the same field FastAPI builds its own from, with a memoised parser of query strings.
The validators run when a request brings a path or query string not yet memoised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from copy import deepcopy
from dataclasses import dataclass
from functools import lru_cache
from re import Pattern
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from starlette.responses import Response

from commerce_api.http.declaration import (
    Parameter,
    declaration,
    path_parameter_names,
    path_pattern,
)
from commerce_api.http.dependencies import (
    catalog_principal,
    current_principal,
    request_context,
    request_services,
)
from commerce_api.http.routing import key_handling, served_first_as


class Unserved(Exception):
    """The request is not in its plain, valid form: the full stack answers it."""


# What an endpoint's dependency gets, by the dependency function it declares.
_PROVIDED: dict[Callable[..., Any], str] = {
    request_services: "services",
    current_principal: "principal",  # a secret key's caller
    catalog_principal: "catalog_principal",  # any key's, publishable ones included
    request_context: "context",
}

# Defaults that are the same object for every request without harm.
_IMMUTABLE = (type(None), bool, int, float, str, bytes)


def _validator(field: FieldInfo) -> TypeAdapter[Any]:
    """The validator FastAPI builds for a parameter's field: its type with its constraints
    (``metadata``) and markers, as pydantic documents ``Annotated[int, Field(ge=1)]``."""
    if field.discriminator is not None:
        raise TypeError("the fast lane validates parameters without a discriminator")
    annotated: Any = field.annotation
    if field.metadata:
        annotated = Annotated[(annotated, *field.metadata)]
    return TypeAdapter(annotated)


@dataclass(frozen=True, slots=True)
class _Validated:
    """A path or query parameter, with its validator and (for a query) its default."""

    name: str  # the endpoint's argument
    alias: str  # its name in the request
    validator: TypeAdapter[Any]
    field: FieldInfo

    @classmethod
    def of(cls, parameter: Parameter) -> _Validated:
        return cls(parameter.name, parameter.alias, _validator(parameter.field), parameter.field)

    def validate(self, raw: str) -> Any:
        """The value FastAPI gives the endpoint for ``raw``; ``Unserved`` if it refuses it."""
        try:
            return self.validator.validate_python(raw)
        except ValidationError:
            raise Unserved from None

    @property
    def constant_default(self) -> bool:
        """Whether the default is one value every request may share (FastAPI gives each a
        copy, and validates it first when the field says ``validate_default``)."""
        field = self.field
        return (
            not field.is_required()
            and field.default_factory is None
            and not field.validate_default
            and type(field.default) in _IMMUTABLE
        )

    def default(self) -> Any:
        """The argument of an optional parameter the request leaves out, as FastAPI gives it:
        the field's default (its factory called), copied, validated if the field says so."""
        value = deepcopy(self.field.get_default(call_default_factory=True))
        if self.field.validate_default:
            try:
                return self.validator.validate_python(value)
            except ValidationError:
                raise Unserved from None
        return value


# A query string's arguments: those shared by every request with that string, and the
# parameters whose default each request gets afresh (a factory's, a mutable one).
_Query = tuple[dict[str, Any], tuple[_Validated, ...]]


@dataclass(frozen=True, slots=True)
class ServedRoute:
    """One served route, as its declaration gives it."""

    method: str
    template: str
    path: Pattern[str]
    fixed: bool  # no path parameters: the path is the template
    endpoint: Callable[..., Awaitable[Response]]
    query: Callable[[bytes], _Query | None]
    path_parameters: tuple[_Validated, ...]  # those the endpoint takes
    body: type[BaseModel] | None
    body_name: str | None
    request_name: str | None
    provided: dict[str, str]  # endpoint argument → what the fast lane gives it
    places_orders: bool
    key_handling: str | None  # how it runs under an Idempotency-Key (``routing.key_handling``)

    @classmethod
    def of(cls, route: APIRoute) -> ServedRoute:
        declared = declaration(route.endpoint, route.path)
        if declared.others or route.dependencies:
            raise TypeError(f"the fast lane gives {route.path} no {declared.others or 'extras'}")
        provided: dict[str, str] = {}
        for name, call in declared.dependencies:
            what = _PROVIDED.get(call)
            if what is None:
                raise TypeError(f"the fast lane cannot provide {call} to {route.path}")
            provided[name] = what
        body: type[BaseModel] | None = None
        body_name = None
        if declared.body:
            ((body_name, model),) = declared.body
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise TypeError(f"the fast lane validates bodies with a model: {route.path}")
            body = model
        (method,) = route.methods or (None,)
        assert method is not None, route.path
        in_path = path_parameter_names(route.path)
        if any(parameter.alias not in in_path for parameter in declared.path):
            raise TypeError(f"a path parameter's alias is not in {route.path}")
        places_orders = served_first_as(route.endpoint) == "orders"
        if places_orders and (in_path or declared.query):
            # Its Idempotency-Key's fingerprint is taken of the template, without a query.
            raise TypeError(
                f"the fast lane places orders at a path without parameters: {route.path}"
            )
        return cls(
            method=method,
            template=route.path,
            path=path_pattern(route.path),
            fixed=not in_path,
            endpoint=route.endpoint,
            query=_query_parser([_Validated.of(parameter) for parameter in declared.query]),
            path_parameters=tuple(_Validated.of(parameter) for parameter in declared.path),
            body=body,
            body_name=body_name,
            request_name=declared.request,
            provided=provided,
            places_orders=places_orders,
            key_handling=key_handling(route),
        )


def _query_parser(parameters: list[_Validated]) -> Callable[[bytes], _Query | None]:
    """The query string's arguments, validated by the route's own fields, or None when the
    string is not in its plain valid form. Memoised: integrations poll with the same few query
    strings."""
    by_alias = {parameter.alias: parameter for parameter in parameters}

    @lru_cache(maxsize=4096)
    def parse(query_string: bytes) -> _Query | None:
        try:
            pairs = parse_qsl(
                query_string.decode("ascii"),
                keep_blank_values=True,
                strict_parsing=bool(query_string),
                errors="strict",
            )
        except (UnicodeDecodeError, ValueError):
            return None
        given = dict(pairs)
        if len(given) != len(pairs) or not given.keys() <= by_alias.keys():
            return None
        arguments: dict[str, Any] = {}
        fresh: list[_Validated] = []
        try:
            for alias, parameter in by_alias.items():
                if alias in given:
                    arguments[parameter.name] = parameter.validate(given[alias])
                elif parameter.constant_default:
                    arguments[parameter.name] = parameter.field.default
                elif parameter.field.is_required():
                    return None
                else:
                    fresh.append(parameter)
        except Unserved:
            return None
        return arguments, tuple(fresh)

    return parse
