"""The fast lane: answers the requests that carry the load — the catalogue reads clients poll
and ``POST /v1/orders`` — before any framework code runs (``CommerceAPI.__call__`` asks it
first), because Starlette's and FastAPI's layers, routing, dependency injection and validation
cost several times what the answer itself does.

It holds no list of paths, parameters or headers of its own. The routes it serves say so
(``routing.served_first``, beside ``@router.get``), and it reads each route's declaration by
public means only: the route's ``path`` and ``methods``, and its endpoint's signature
(``routing.declaration``: the query parameters with their pydantic fields, the body model, the
dependencies the endpoint needs). It matches paths with a pattern compiled from the route's
template, validates each parameter with a pydantic ``TypeAdapter`` built once from the same
field FastAPI builds its own from, calls the route's own endpoint function, and the request
pipeline (``pipeline.py``) finishes the answer as it finishes every other.

Only the plain, valid form of a request is taken: anything else — an unknown or malformed
parameter, a missing or bad key, a body where none is declared, an invalid order body, a
failure before the endpoint is called — goes on to the full stack before anything is sent or
counted (with the body it read handed back), and the routes own every such error message.
Once the endpoint has been called, whatever it returns or raises is answered here, in the
contract's envelope, by the functions the routes' handlers and error guard use
(``errors.render_exception``, ``middleware.unexpected_failure``): an endpoint runs once per
request. A route marked ``places_orders`` is also counted before its endpoint runs (the order
desk writes), under its ``Idempotency-Key`` as the routes run it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass
from functools import lru_cache
from re import Pattern
from typing import Annotated, Any
from urllib.parse import parse_qsl

import orjson
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Message, Receive, Scope, Send

from commerce_api.core.errors import MAX_BODY_BYTES, APIError, render_exception
from commerce_api.http import idempotency
from commerce_api.http.context import context
from commerce_api.http.dependencies import (
    Services,
    current_principal,
    request_context,
    request_services,
)
from commerce_api.http.middleware import unexpected_failure
from commerce_api.http.pipeline import (
    Pipeline,
    authenticate,
    authorization,
    declares_body,
    header_text,
    json_body_size,
    own_headers,
    request_headers,
)
from commerce_api.http.routing import (
    Parameter,
    declaration,
    keyed_request,
    path_parameter_names,
    path_pattern,
    run_self_managed,
    served_first_as,
)

logger = logging.getLogger("commerce_api.readpath")

_KEY_HEADER = idempotency.HEADER.lower().encode()  # as ``request_headers`` names it


MAX_MATCHED_PATHS = 4096  # paths with parameters (a product's, say) whose match is kept


class _Unserved(Exception):
    """The request is not in its plain, valid form: the full stack answers it."""


# What an endpoint's dependency gets, by the dependency function it declares.
_PROVIDED: dict[Callable[..., Any], str] = {
    request_services: "services",
    current_principal: "principal",
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
        """The value FastAPI gives the endpoint for ``raw``; ``_Unserved`` if it refuses it."""
        try:
            return self.validator.validate_python(raw)
        except ValidationError:
            raise _Unserved from None

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
                raise _Unserved from None
        return value


# A query string's arguments: those shared by every request with that string, and the
# parameters whose default each request gets afresh (a factory's, a mutable one).
_Query = tuple[dict[str, Any], tuple[_Validated, ...]]


@dataclass(frozen=True, slots=True)
class _Route:
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

    @classmethod
    def of(cls, route: APIRoute) -> _Route:
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
            places_orders=served_first_as(route.endpoint) == "orders",
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
        except _Unserved:
            return None
        return arguments, tuple(fresh)

    return parse


class FastLane:
    def __init__(self, services: Services, pipeline: Pipeline, routes: Sequence[BaseRoute]) -> None:
        self.services = services
        self.pipeline = pipeline
        self.routes = [
            _Route.of(route)
            for route in routes
            if isinstance(route, APIRoute) and served_first_as(route.endpoint) is not None
        ]
        # (method, path) → the route and the endpoint's validated path arguments: a route
        # without parameters by its template; one with them as requests name it (memoised:
        # clients poll the same paths).
        self._fixed: dict[tuple[str, str], tuple[_Route, dict[str, Any]]] = {
            (route.method, route.template): (route, {}) for route in self.routes if route.fixed
        }
        self._matched = dict(self._fixed)
        self._patterned = [route for route in self.routes if not route.fixed]

    def _match(self, method: str, path: str) -> tuple[_Route, dict[str, Any] | None] | None:
        """The route ``path`` falls under and its path arguments (None: the route's field
        refuses one), or None when no served route matches."""
        for route in self._patterned:
            if route.method == method and (match := route.path.match(path)) is not None:
                values: dict[str, Any] = {}
                try:
                    for parameter in route.path_parameters:
                        values[parameter.name] = parameter.validate(match[parameter.alias])
                except _Unserved:
                    return route, None  # not kept: the full stack answers it
                if len(self._matched) >= MAX_MATCHED_PATHS:
                    self._matched = dict(self._fixed)
                found = self._matched[method, path] = (route, values)
                return found
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """None when the request was answered here; else the ``receive`` the full stack must
        read the request from (the original, or one that first replays what was read)."""
        method = scope["method"]
        path: str = scope["path"]
        found = self._matched.get((method, path))
        if found is None:
            found = self._match(method, path)
            if found is None:
                return receive
        route, path_values = found
        if path_values is None:
            return receive  # a path parameter the route's field refuses
        started = time.perf_counter()
        if route.places_orders:
            return await self._place_order(route, scope, receive, send, started)
        try:
            arguments = await self._arguments(route, scope, receive, path_values, None)
        except _Unserved:  # not its plain form: the routes answer it
            return receive
        except Exception:
            # Nothing ran yet: the full stack meets the same failure and answers it.
            logger.exception("the fast lane failed; the request takes the routes")
            return receive
        try:
            response = await route.endpoint(**arguments)
        except Exception as exc:  # the endpoint ran: its error is answered here
            await self._fail(route, scope, receive, send, started, exc)
            return None
        await self._answer(route, scope, send, started, response)
        return None

    async def _arguments(
        self,
        route: _Route,
        scope: Scope,
        receive: Receive,
        path_values: dict[str, Any],
        body: BaseModel | None,
        headers: dict[bytes, bytes] | None = None,
    ) -> dict[str, Any]:
        """The endpoint's arguments, as FastAPI would give them for the plain valid form of the
        request; ``_Unserved`` for any other form. ``headers``: the request's, when the caller
        has already read them (``_place_order``)."""
        parsed = route.query(scope.get("query_string", b""))
        if parsed is None:
            raise _Unserved
        shared, fresh = parsed
        arguments = dict(shared)  # the parsed query is memoised and shared: never fill it in
        if headers is None:
            headers = request_headers(scope)
        if headers is None or (route.body is None and declares_body(headers)):
            raise _Unserved  # a body where none is declared, a repeated header: the routes decide
        if path_values:
            arguments.update(path_values)
        ctx = context(scope)
        for name, what in route.provided.items():
            if what == "services":
                arguments[name] = self.services
            elif what == "context":
                arguments[name] = ctx
            else:  # the caller, by the request's key; _Unserved without a valid one
                given = authorization(headers)
                if given is None:
                    raise _Unserved
                try:
                    arguments[name] = await authenticate(self.services.read_path, ctx, given)
                except APIError:
                    raise _Unserved from None
        if route.request_name is not None:
            arguments[route.request_name] = Request(scope, receive)
        if route.body_name is not None:
            arguments[route.body_name] = body
        for parameter in fresh:  # last: a default factory runs only for a request served here
            arguments[parameter.name] = parameter.default()
        return arguments

    def _answer(
        self, route: _Route, scope: Scope, send: Send, started: float, response: Response
    ) -> Awaitable[None]:
        """The pipeline's answer with the endpoint's response (no coroutine of its own)."""
        body = bytes(response.body)
        return self.pipeline.answer(
            scope, send, route.template, started, response.status_code, body, own_headers(response)
        )

    async def _fail(
        self,
        route: _Route,
        scope: Scope,
        receive: Receive,
        send: Send,
        started: float,
        exc: Exception,
    ) -> None:
        """Answer what the endpoint raised as the full stack would: an error the routes'
        handlers know in the contract's envelope (a 404, a 409), anything else as the error
        guard does (the logged 500, or the 503 of a full disk)."""
        rendered = await render_exception(Request(scope, receive), exc)
        if rendered is not None:
            await self._answer(route, scope, send, started, rendered)
            return
        status, body, headers = unexpected_failure(exc, context(scope).request_id)
        await self.pipeline.answer(scope, send, route.template, started, status, body, headers)

    async def _place_order(
        self, route: _Route, scope: Scope, receive: Receive, send: Send, started: float
    ) -> Receive | None:
        """``POST /v1/orders``: the body validated with the route's model, the request counted,
        then the route's endpoint called (under its ``Idempotency-Key`` as the routes run it);
        what it returns or raises is answered here."""
        headers = request_headers(scope)
        size = None if headers is None else json_body_size(headers)
        if headers is None or size is None:
            return receive
        key_text = header_text(headers, _KEY_HEADER)
        if not 0 < size <= MAX_BODY_BYTES or (
            key_text is not None and not idempotency.KEY_PATTERN.fullmatch(key_text)
        ):
            return receive
        body, messages = await _read_body(receive, size)
        if body is None:
            return _replaying(messages, receive)
        replayed = _replaying(messages, receive)
        ctx = context(scope)
        try:
            assert route.body is not None
            data = route.body.model_validate(orjson.loads(body))
            arguments = await self._arguments(route, scope, replayed, {}, data, headers)
        except Exception:  # the routes answer it (a bad key, the model's own error, …)
            return replayed

        # From here on the request is answered here: counted, then placed (or refused).
        if not await self.pipeline.admit(scope, ctx):
            await self.pipeline.answer(scope, send, route.template, started, 429, b"")
            return None
        request = (
            Request(scope, replayed)
            if route.request_name is None
            else arguments[route.request_name]  # the one the endpoint gets
        )
        try:
            if key_text is None:
                response = await route.endpoint(**arguments)
            else:
                principal = ctx.principal  # authenticated for the endpoint (_arguments)
                assert principal is not None, route.template
                keyed = keyed_request(principal, key_text, "POST", route.template, "", body)
                response = await run_self_managed(
                    self.services, request, keyed, lambda: route.endpoint(**arguments)
                )
        except Exception as exc:  # out of stock, an unknown product, a key conflict, a failure
            await self._fail(route, scope, replayed, send, started, exc)
            return None
        await self._answer(route, scope, send, started, response)
        return None


async def _read_body(receive: Receive, size: int) -> tuple[bytes | None, list[Message]]:
    """The body, if it is exactly the declared ``size``; the messages read, to hand back."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages  # the client went away
        chunk: bytes = message.get("body", b"")
        chunks.append(chunk)
        total += len(chunk)
        if total > size:
            return None, messages
        if not message.get("more_body", False):
            break
    return (b"".join(chunks) if total == size else None), messages


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first hands back the messages the fast lane already read."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
