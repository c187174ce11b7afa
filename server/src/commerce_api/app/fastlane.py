"""The fast lane: answers the requests that carry the load — the catalogue reads clients poll
and ``POST /v1/orders`` — before any framework code runs (``CommerceAPI.__call__`` asks it
first), because Starlette's and FastAPI's layers, routing, dependency injection and validation
cost several times what the answer itself does.

It holds no list of paths, parameters or headers of its own. The routes it serves say so
(``routing.served_first``, beside ``@router.get``), and from each route's declaration it takes the
method and path, the query parameters with their validators, the body model and the
dependencies the endpoint needs; then it calls the route's own endpoint function, and the
request pipeline (``pipeline.py``) finishes the answer as it finishes every other.

Only the plain, valid form of a request is answered here; anything else — an unknown or
malformed parameter, a missing or bad key, an invalid body, an error raised by the endpoint,
a failure of any kind before the answer is decided — goes on to the full stack before anything
is sent or counted (with the body it read handed back), and the routes own every error
message. A route marked ``places_orders`` is the exception: once its body is valid and the
request counted, whatever its endpoint returns or raises is answered here (rendered by the
same functions as the routes' handlers), because the order desk has run: running the request
again would not do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from re import Pattern
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Message, Receive, Scope, Send

from commerce_api.core.errors import MAX_BODY_BYTES, APIError, error_response
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
from commerce_api.http.routing import keyed_request, run_self_managed, served_first_as

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


@dataclass(frozen=True, slots=True)
class _Route:
    """One served route, as its declaration gives it."""

    method: str
    template: str
    path: Pattern[str]
    fixed: bool  # no path parameters: the path is the template
    endpoint: Callable[..., Awaitable[Response]]
    query: Callable[[bytes], dict[str, Any] | None]
    path_value: Callable[[str, str], tuple[Any, bool]]
    body: type[BaseModel] | None
    body_name: str | None
    request_name: str | None
    provided: dict[str, str]  # endpoint argument → what the fast lane gives it
    places_orders: bool

    @classmethod
    def of(cls, route: APIRoute) -> _Route:
        dependant = route.dependant
        provided: dict[str, str] = {}
        for sub in dependant.dependencies:
            what = _PROVIDED.get(sub.call)  # type: ignore[arg-type]
            if what is None or sub.name is None:
                raise TypeError(f"the fast lane cannot provide {sub.call} to {route.path}")
            provided[sub.name] = what
        body: type[BaseModel] | None = None
        body_name = None
        if dependant.body_params:
            (param,) = dependant.body_params
            model = param.field_info.annotation
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise TypeError(f"the fast lane validates bodies with a model: {route.path}")
            body, body_name = model, param.name
        (method,) = route.methods or (None,)
        assert method is not None, route.path
        return cls(
            method=method,
            template=route.path,
            path=route.path_regex,
            fixed=not route.param_convertors,
            endpoint=route.endpoint,
            query=_query_parser(dependant.query_params),
            path_value=_path_validator(dependant.path_params),
            body=body,
            body_name=body_name,
            request_name=dependant.request_param_name,
            provided=provided,
            places_orders=served_first_as(route.endpoint) == "orders",
        )


def _query_parser(params: Sequence[Any]) -> Callable[[bytes], dict[str, Any] | None]:
    """The query string's arguments, validated by the route's own fields (FastAPI's
    ``ModelField``s), or None when the string is not in its plain valid form. Memoised:
    integrations poll with the same few query strings."""
    fields = {param.alias: param for param in params}

    @lru_cache(maxsize=4096)
    def parse(query_string: bytes) -> dict[str, Any] | None:
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
        if len(given) != len(pairs) or not given.keys() <= fields.keys():
            return None
        arguments: dict[str, Any] = {}
        for alias, field in fields.items():
            if alias not in given:
                arguments[field.name] = field.get_default()
                continue
            value, errors = field.validate(given[alias], {}, loc=("query", alias))
            if errors:
                return None
            arguments[field.name] = value
        return arguments

    return parse


def _path_validator(params: Sequence[Any]) -> Callable[[str, str], tuple[Any, bool]]:
    """A path parameter's value by the route's own field (memoised: clients read the same
    products again and again), and whether it is valid."""
    fields = {param.name: param for param in params}

    @lru_cache(maxsize=4096)
    def validate(name: str, raw: str) -> tuple[Any, bool]:
        value, errors = fields[name].validate(raw, {}, loc=("path", name))
        return value, not errors

    return validate


class FastLane:
    def __init__(self, services: Services, pipeline: Pipeline, routes: Sequence[BaseRoute]) -> None:
        self.services = services
        self.pipeline = pipeline
        self.routes = [
            _Route.of(route)
            for route in routes
            if isinstance(route, APIRoute) and served_first_as(route.endpoint) is not None
        ]
        # (method, path) → the route and its path parameters: a route without parameters by its
        # template; one with them as requests name it (memoised: clients poll the same paths).
        self._fixed: dict[tuple[str, str], tuple[_Route, dict[str, str]]] = {
            (route.method, route.template): (route, {}) for route in self.routes if route.fixed
        }
        self._matched = dict(self._fixed)
        self._patterned = [route for route in self.routes if not route.fixed]

    def _match(self, method: str, path: str) -> tuple[_Route, dict[str, str]] | None:
        for route in self._patterned:
            if route.method == method and (match := route.path.match(path)) is not None:
                if len(self._matched) >= MAX_MATCHED_PATHS:
                    self._matched = dict(self._fixed)
                found = self._matched[method, path] = (route, match.groupdict())
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
        route, path_params = found
        started = time.perf_counter()
        if route.places_orders:
            return await self._place_order(route, scope, receive, send, started)
        try:
            response = await route.endpoint(
                **await self._arguments(route, scope, receive, path_params, None)
            )
        except (_Unserved, APIError):  # not its plain form, or the endpoint's own error:
            return receive  # the routes answer it
        except Exception:
            # The full stack meets the same failure and answers it in the contract's envelope.
            logger.exception("the fast lane failed; the request takes the routes")
            return receive
        await self._answer(route, scope, send, started, response)
        return None

    async def _arguments(
        self,
        route: _Route,
        scope: Scope,
        receive: Receive,
        path_params: dict[str, str],
        body: BaseModel | None,
        headers: dict[bytes, bytes] | None = None,
    ) -> dict[str, Any]:
        """The endpoint's arguments, as FastAPI would give them for the plain valid form of the
        request; ``_Unserved`` for any other form. ``headers``: the request's, when the caller
        has already read them (``_headers``)."""
        parsed = route.query(scope.get("query_string", b""))
        if parsed is None:
            raise _Unserved
        arguments = dict(parsed)  # the parsed query is memoised and shared: never fill it in
        if headers is None:
            headers = request_headers(scope)
        if headers is None or (route.body is None and declares_body(headers)):
            raise _Unserved  # a body where none is declared, a repeated header: the routes decide
        for name, raw in path_params.items():
            value, valid = route.path_value(name, raw)
            if not valid:
                raise _Unserved
            arguments[name] = value
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
        return arguments

    def _answer(
        self, route: _Route, scope: Scope, send: Send, started: float, response: Response
    ) -> Awaitable[None]:
        """The pipeline's answer with the endpoint's response (no coroutine of its own)."""
        body = bytes(response.body)
        return self.pipeline.answer(
            scope, send, route.template, started, response.status_code, body, own_headers(response)
        )

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
        except APIError as exc:  # out of stock, an unknown product, a key conflict
            response = error_response(exc)
        except Exception as exc:
            status, failure, failure_headers = unexpected_failure(exc, ctx.request_id)
            await self.pipeline.answer(
                scope, send, route.template, started, status, failure, failure_headers
            )
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
