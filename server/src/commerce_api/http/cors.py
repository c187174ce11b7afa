"""CORS for the catalogue reads: a storefront's pages, served from one of the origins in
``COMMERCE_CORS_ORIGINS``, read products (and categories) with a publishable key.

Written here rather than taken from Starlette's ``CORSMiddleware``: that one is a middleware
around the routes, and the catalogue reads are answered before the routes, by the fast lane
(``app/fastlane.py``); put around the whole app instead, it would look at every request
(orders, webhooks, the console) and answer preflights on every path. This layer is asked first
(``CommerceAPI.__call__``), exists only when origins are configured (so without them no request
pays for it, and no answer has a CORS header), and covers only the paths of the routes that
admit publishable keys (``routing.admits_publishable_keys``), with their methods (a write on
the same path, ``POST /v1/products``, gets none of it):

- a preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) from a listed
  origin is answered here, 204, without a key, not counted against any quota and not in the
  request log or metrics (the pipeline is behind this layer): it carries no key to count it by,
  and browsers keep its answer for ``PREFLIGHT_MAX_AGE_SECONDS``;
- every other answer on those paths gets ``Vary: Origin`` (it depends on the origin), and for a
  listed origin ``Access-Control-Allow-Origin`` naming it and the headers a program may read
  (the request id, the rate limit's, ``Retry-After``): errors too, so a storefront sees them.

A request from an origin not listed is answered as it would be without CORS (a preflight: by
the routes, 405), and the browser keeps its answer from the page.
"""

from __future__ import annotations

from collections.abc import Iterable
from re import Pattern

from fastapi.routing import APIRoute
from starlette.types import Message, Scope, Send

from commerce_api.http.declaration import path_pattern

PREFLIGHT_MAX_AGE_SECONDS = 7200  # the most Chromium keeps (Firefox: a day)
ALLOWED_REQUEST_HEADERS = b"Authorization"
EXPOSED_HEADERS = (
    b"X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After"
)
_ORIGIN = b"origin"
_REQUEST_METHOD = b"access-control-request-method"
_VARY = (b"vary", b"Origin")


class CatalogCORS:
    """CORS on the paths of ``routes`` for ``origins`` (``scheme://host[:port]``, as browsers
    send them in ``Origin``)."""

    def __init__(self, origins: Iterable[str], routes: Iterable[APIRoute]) -> None:
        self.origins = frozenset(origin.encode("latin-1") for origin in origins)
        methods: dict[str, set[str]] = {}
        for route in routes:
            methods.setdefault(route.path, set()).update(route.methods or ())
        self._paths: list[tuple[Pattern[str], frozenset[str], bytes]] = [
            (path_pattern(template), frozenset(allowed), ", ".join(sorted(allowed)).encode())
            for template, allowed in methods.items()
        ]

    def _methods(self, path: str) -> tuple[frozenset[str], bytes] | None:
        """The methods a storefront may use on ``path`` (and their list for a preflight's
        answer), or None off the catalogue."""
        for pattern, methods, listed in self._paths:
            if pattern.match(path):
                return methods, listed
        return None

    async def sending(self, scope: Scope, send: Send) -> Send | None:
        """The ``send`` to answer this request through (``send`` itself off the catalogue), or
        None when this was a preflight from a listed origin, answered here."""
        found = self._methods(scope["path"])
        if found is None:
            return send
        methods, listed = found
        method = scope["method"]
        if method != "OPTIONS" and method not in methods:
            return send  # the catalogue's writes: not for a browser's page
        origin: bytes | None = None
        asks_method = False
        for name, value in scope["headers"]:
            if name == _ORIGIN:
                origin = value
            elif name == _REQUEST_METHOD:
                asks_method = True
        if origin is None or origin not in self.origins:
            return _adding(send, [_VARY])
        if method == "OPTIONS" and asks_method:
            headers = [
                (b"access-control-allow-origin", origin),
                (b"access-control-allow-methods", listed),
                (b"access-control-allow-headers", ALLOWED_REQUEST_HEADERS),
                (b"access-control-max-age", str(PREFLIGHT_MAX_AGE_SECONDS).encode()),
                _VARY,
                (b"content-length", b"0"),
            ]
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return None
        return _adding(
            send,
            [
                (b"access-control-allow-origin", origin),
                (b"access-control-expose-headers", EXPOSED_HEADERS),
                _VARY,
            ],
        )


def _adding(send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
    """``send`` that adds ``headers`` to the answer's head."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), *headers]
        await send(message)

    return send_with_headers
