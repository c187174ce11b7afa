"""What an endpoint declares: its path and query parameters, body, ``Request`` and dependencies.

Read from the endpoint's signature and annotations as FastAPI reads them (its documented
markers: ``Annotated[..., Depends(...)]``, ``Query(...)``, a model as the body, ``Request``),
with pydantic's public ``FieldInfo``. The route class (``routing.StrictRoute``) and the fast
lane (``app/fastlane_routes.py``) both derive their work from it at start-up, never from
FastAPI's own copy of it.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import cache
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from fastapi import params
from fastapi.routing import APIRoute
from fastapi.security import SecurityScopes
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from starlette.background import BackgroundTasks
from starlette.requests import HTTPConnection
from starlette.responses import Response

_PATH_PARAMETER = re.compile(r"{([a-zA-Z_][a-zA-Z0-9_]*)(?::([a-zA-Z_][a-zA-Z0-9_]*))?}")
# Starlette's documented convertors whose matches this project's templates use.
_CONVERTOR_PATTERNS = {"str": "[^/]+", "path": ".*"}


def path_pattern(template: str) -> re.Pattern[str]:
    """The pattern a route's path template (``/v1/products/{id}``) matches, as Starlette's
    routing does: each ``{name}`` one path segment, captured as ``name``."""
    pattern, end = "^", 0
    for match in _PATH_PARAMETER.finditer(template):
        name, convertor = match.group(1), match.group(2) or "str"
        if convertor not in _CONVERTOR_PATTERNS:
            raise ValueError(f"{template}: the convertor `{convertor}` is not supported here")
        pattern += re.escape(template[end : match.start()])
        pattern += f"(?P<{name}>{_CONVERTOR_PATTERNS[convertor]})"
        end = match.end()
    return re.compile(pattern + re.escape(template[end:]) + "$")


def path_parameter_names(template: str) -> frozenset[str]:
    return frozenset(match.group(1) for match in _PATH_PARAMETER.finditer(template))


@dataclasses.dataclass(frozen=True, slots=True)
class Parameter:
    """A path or query parameter: the endpoint's argument, its name in the request, and its
    field (pydantic's ``FieldInfo``: the type, the constraints in ``metadata``, the default)."""

    name: str
    alias: str
    field: FieldInfo


@dataclasses.dataclass(frozen=True, slots=True)
class Declaration:
    """What an endpoint (or one of its dependencies) declares in its signature."""

    path: tuple[Parameter, ...]
    query: tuple[Parameter, ...]
    body: tuple[tuple[str, Any], ...]  # (argument, annotation): a model, a dict, a list …
    request: str | None  # the argument that gets the ``Request``
    dependencies: tuple[tuple[str, Callable[..., Any]], ...]  # (argument, dependency)
    others: tuple[str, ...]  # headers, cookies, forms, other injected objects


def route_declaration(route: APIRoute) -> Declaration:
    """The declaration of a route's endpoint, with the dependencies its decorator adds
    (``dependencies=[...]``, named by position: the endpoint gets none of their values)."""
    declared = declaration(route.endpoint, route.path)
    extra = tuple(
        (f"[{index}]", _dependency_call(depends, Any))
        for index, depends in enumerate(route.dependencies)
    )
    if not extra:
        return declared
    return dataclasses.replace(declared, dependencies=declared.dependencies + extra)


@cache
def declaration(call: Callable[..., Any], template: str) -> Declaration:
    """What ``call`` declares, a route's endpoint or a dependency, under the path ``template``."""
    if not inspect.isfunction(call):
        raise TypeError(f"{call!r}: declare endpoints and dependencies as functions")
    in_path = path_parameter_names(template)
    hints = get_type_hints(call, include_extras=True)
    path: list[Parameter] = []
    query: list[Parameter] = []
    body: list[tuple[str, Any]] = []
    request: str | None = None
    dependencies: list[tuple[str, Callable[..., Any]]] = []
    others: list[str] = []
    for name, parameter in inspect.signature(call).parameters.items():
        annotation = hints.get(name, Any)
        base, extras = annotation, []
        if get_origin(annotation) is Annotated:
            base, *extras = get_args(annotation)
        markers = [
            extra
            for extra in extras
            if isinstance(extra, params.Param | params.Body | params.Depends)
        ]
        marker: FieldInfo | params.Depends | None = markers[-1] if markers else None  # the last
        default = parameter.default
        if isinstance(default, params.Depends | FieldInfo):  # ``= Depends(…)``, ``= Query(…)``
            marker = default
        if isinstance(marker, params.Depends):
            dependencies.append((name, _dependency_call(marker, base)))
        elif marker is None and _is_subclass(base, HTTPConnection):
            request = name  # the ``Request``
        elif marker is None and _is_subclass(base, Response | BackgroundTasks | SecurityScopes):
            others.append(name)
        elif name in in_path:
            path.append(_parameter(name, annotation, inspect.Parameter.empty))
        elif isinstance(marker, params.Query) or (marker is None and not _is_complex(base)):
            query.append(_parameter(name, annotation, default))
        elif isinstance(marker, params.Param | params.Form | params.File):
            others.append(name)  # a header, a cookie, a form field
        else:
            body.append((name, base))
    return Declaration(
        tuple(path), tuple(query), tuple(body), request, tuple(dependencies), tuple(others)
    )


def _parameter(name: str, annotation: Any, default: Any) -> Parameter:
    field = FieldInfo.from_annotated_attribute(
        annotation, PydanticUndefined if default is inspect.Parameter.empty else default
    )
    if field.validation_alias is not None:
        raise TypeError(f"`{name}`: name the parameter with `alias`, not `validation_alias`")
    return Parameter(name, field.alias or name, field)


def _dependency_call(depends: params.Depends, annotation: Any) -> Callable[..., Any]:
    call = depends.dependency or annotation  # ``Depends()`` names its class by the annotation
    if not callable(call):
        raise TypeError(f"not a dependency: {call!r}")
    return call


def _is_subclass(annotation: Any, kinds: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, kinds)


def _is_complex(annotation: Any) -> bool:
    """Whether FastAPI reads an unmarked parameter of this type from the body (a model, a
    mapping, a sequence, a dataclass) rather than from the query."""
    origin = get_origin(annotation)
    if origin is Union or origin is UnionType:
        return any(_is_complex(arg) for arg in get_args(annotation))
    if origin is Annotated:
        return _is_complex(get_args(annotation)[0])
    kind = origin or annotation
    if _is_subclass(kind, str | bytes):
        return False
    return dataclasses.is_dataclass(kind) or _is_subclass(
        kind, BaseModel | Mapping | Sequence | AbstractSet
    )


def query_names(declared: Declaration, template: str) -> list[str]:
    """The query parameters an endpoint reads, its dependencies' included."""
    names = [parameter.alias for parameter in declared.query]
    for _, call in declared.dependencies:
        names.extend(query_names(declaration(call, template), template))
    return names


def takes_body_anywhere(declared: Declaration, template: str) -> bool:
    """Whether an endpoint or one of its dependencies reads a body."""
    return bool(declared.body) or any(
        takes_body_anywhere(declaration(call, template), template)
        for _, call in declared.dependencies
    )


def depends_on(declared: Declaration, template: str, dependency: Callable[..., Any]) -> bool:
    """Whether an endpoint needs ``dependency``, directly or through another."""
    return any(
        call is dependency or depends_on(declaration(call, template), template, dependency)
        for _, call in declared.dependencies
    )
