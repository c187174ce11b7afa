"""The fast lane: answers the requests that carry the load — the catalogue reads clients poll
and ``POST /v1/orders`` — before any framework code runs (``CommerceAPI.__call__`` asks it
first), because Starlette's and FastAPI's layers, routing, dependency injection and validation
cost several times what the answer itself does.

It holds no list of paths, parameters or headers of its own. The routes it serves say so
(``routing.served_first``, beside ``@router.get``), and it reads each route's declaration by
public means only: the route's ``path`` and ``methods``, and its endpoint's signature
(``http/declaration.py``: the query parameters with their pydantic fields, the body model, the
dependencies the endpoint needs), once, at start-up (``fastlane_routes.py``). It matches paths
with a pattern compiled from the route's template, validates each parameter with a pydantic
``TypeAdapter`` built once from the same field FastAPI builds its own from, calls the route's
own endpoint function, and the request pipeline (``pipeline.py``) finishes the answer as it
finishes every other.

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
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from commerce_api.accounts.service import Principal, secret_key_principal
from commerce_api.app.fastlane_routes import ServedRoute, Unserved
from commerce_api.app.services import Services
from commerce_api.core.errors import MAX_BODY_BYTES, APIError
from commerce_api.http.context import RequestContext, context
from commerce_api.http.errors import render_exception
from commerce_api.http.idempotency import keyed_request, run_self_managed
from commerce_api.http.middleware import unexpected_failure
from commerce_api.http.pipeline import Pipeline
from commerce_api.http.request_body import read_body, replaying
from commerce_api.http.request_head import PlainHead, header_text, json_body_size, plain_head
from commerce_api.http.routing import KEY_IN_OWN_WRITE, served_first_as
from commerce_api.idempotency import service as idempotency

logger = logging.getLogger("commerce_api.readpath")

_KEY_HEADER = idempotency.HEADER.lower().encode()  # as ``PlainHead.headers`` names it


MAX_MATCHED_PATHS = 4096  # paths with parameters (a product's, say) whose match is kept


class FastLane:
    def __init__(self, services: Services, pipeline: Pipeline, routes: Sequence[BaseRoute]) -> None:
        self.services = services
        self.pipeline = pipeline
        self.routes = [
            ServedRoute.of(route)
            for route in routes
            if isinstance(route, APIRoute) and served_first_as(route.endpoint) is not None
        ]
        # (method, path) → the route and the endpoint's validated path arguments: a route
        # without parameters by its template; one with them as requests name it (memoised:
        # clients poll the same paths).
        self._fixed: dict[tuple[str, str], tuple[ServedRoute, dict[str, Any]]] = {
            (route.method, route.template): (route, {}) for route in self.routes if route.fixed
        }
        self._matched = dict(self._fixed)
        self._patterned = [route for route in self.routes if not route.fixed]

    def _match(self, method: str, path: str) -> tuple[ServedRoute, dict[str, Any] | None] | None:
        """The route ``path`` falls under and its path arguments (None: the route's field
        refuses one), or None when no served route matches."""
        for route in self._patterned:
            if route.method == method and (match := route.path.match(path)) is not None:
                values: dict[str, Any] = {}
                try:
                    for parameter in route.path_parameters:
                        values[parameter.name] = parameter.validate(match[parameter.alias])
                except Unserved:
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
        ctx = context(scope)
        if route.places_orders:
            return await self._place_order(route, scope, ctx, receive, send, started)
        try:
            arguments = await self._arguments(route, scope, ctx, receive, path_values, None)
        except Unserved:  # not its plain form: the routes answer it
            return receive
        except Exception:
            # Nothing ran yet: the full stack meets the same failure and answers it.
            logger.exception("the fast lane failed; the request takes the routes")
            return receive
        try:
            response = await route.endpoint(**arguments)
        except Exception as exc:  # the endpoint ran: its error is answered here
            await self._fail(route, scope, ctx, receive, send, started, exc)
            return None
        await self.pipeline.respond(scope, ctx, send, route.template, started, response)
        return None

    async def _arguments(
        self,
        route: ServedRoute,
        scope: Scope,
        ctx: RequestContext,
        receive: Receive,
        path_values: dict[str, Any],
        body: BaseModel | None,
        head: PlainHead | None = None,
    ) -> dict[str, Any]:
        """The endpoint's arguments, as FastAPI would give them for the plain valid form of the
        request; ``Unserved`` for any other form. ``head``: the request's, when the caller has
        already read it (``_place_order``)."""
        parsed = route.query(scope.get("query_string", b""))
        if parsed is None:
            raise Unserved
        shared, fresh = parsed
        arguments = dict(shared)  # the parsed query is memoised and shared: never fill it in
        if head is None:
            head = plain_head(scope)
        if head is None or (route.body is None and head.declares_body):
            raise Unserved  # a body where none is declared, a repeated header: the routes decide
        if path_values:
            arguments.update(path_values)
        for name, what in route.provided.items():
            if what == "services":
                arguments[name] = self.services
            elif what == "context":
                arguments[name] = ctx
            else:  # the caller, by the request's key; Unserved without a valid one, or with
                # a publishable key where the route needs a secret one (the routes refuse it)
                principal = await self._caller(ctx, head.token)
                if what == "principal":
                    try:
                        principal = secret_key_principal(principal)
                    except APIError:
                        raise Unserved from None
                arguments[name] = principal
        if route.request_name is not None:
            arguments[route.request_name] = Request(scope, receive)
        if route.body_name is not None:
            arguments[route.body_name] = body
        for parameter in fresh:  # last: a default factory runs only for a request served here
            arguments[parameter.name] = parameter.default()
        return arguments

    async def _caller(self, ctx: RequestContext, token: str | None) -> Principal:
        """The request's caller, asked of the key cache (the read path: nothing has asked before
        the fast lane) and kept in its context as ``request_head.authenticate`` keeps it, so
        that the routes, if they take the request after all, do not ask again; ``Unserved``
        without a valid key."""
        if token is None:
            raise Unserved  # no key, or not a bearer one: the routes say which
        try:
            principal = await self.services.read_path.authenticate(token, ctx)
        except APIError as exc:
            ctx.auth_error = exc
            raise Unserved from None
        ctx.principal = principal
        return principal

    async def _fail(
        self,
        route: ServedRoute,
        scope: Scope,
        ctx: RequestContext,
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
            await self.pipeline.respond(scope, ctx, send, route.template, started, rendered)
            return
        status, body, headers = unexpected_failure(exc, ctx.request_id)
        await self.pipeline.answer(scope, ctx, send, route.template, started, status, body, headers)

    async def _place_order(
        self,
        route: ServedRoute,
        scope: Scope,
        ctx: RequestContext,
        receive: Receive,
        send: Send,
        started: float,
    ) -> Receive | None:
        """``POST /v1/orders``: the body validated with the route's model, the request counted,
        then the route's endpoint called (under its ``Idempotency-Key`` as the routes run it);
        what it returns or raises is answered here."""
        head = plain_head(scope)
        size = None if head is None else json_body_size(head.headers)
        if head is None or size is None:
            return receive
        # A key, if the route reads one (as the routes run it: ``routing.key_handling``); the
        # fast lane runs only a route that claims its key in its own write under one.
        key_text = None if route.key_handling is None else header_text(head.headers, _KEY_HEADER)
        if not 0 < size <= MAX_BODY_BYTES or (
            key_text is not None
            and (
                route.key_handling != KEY_IN_OWN_WRITE
                or not idempotency.KEY_PATTERN.fullmatch(key_text)
            )
        ):
            return receive
        body, messages = await read_body(receive, size)
        if body is None:
            return replaying(messages, receive)
        replayed = replaying(messages, receive)
        try:
            assert route.body is not None
            data = route.body.model_validate(orjson.loads(body))
            arguments = await self._arguments(route, scope, ctx, replayed, {}, data, head)
        except Exception:  # the routes answer it (a bad key, the model's own error, …)
            return replayed

        # From here on the request is answered here: counted, then placed (or refused).
        if not await self.pipeline.admit(scope, ctx):
            await self.pipeline.answer(scope, ctx, send, route.template, started, 429, b"")
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
                # The request as the routes fingerprint it: no query string (the route
                # declares none), the path its template (it has no parameters).
                keyed = keyed_request(principal, key_text, route.method, route.template, "", body)
                response = await run_self_managed(
                    self.services, request, keyed, lambda: route.endpoint(**arguments)
                )
        except Exception as exc:  # out of stock, an unknown product, a key conflict, a failure
            await self._fail(route, scope, ctx, replayed, send, started, exc)
            return None
        await self.pipeline.respond(scope, ctx, send, route.template, started, response)
        return None
