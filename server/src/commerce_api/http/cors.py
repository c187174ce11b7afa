"""CORS for the API: a storefront's pages, served from one of the origins in
``COMMERCE_CORS_ORIGINS``, call ``/v1`` from a browser — with a publishable key the catalogue
reads, and on every other route they see the refusal (``publishable_key_not_allowed``, an
unknown route, a quota) in the error envelope instead of "Failed to fetch".

Written here rather than taken from Starlette's ``CORSMiddleware``: that one is a middleware
around the routes, and catalogue reads are answered before the routes, by the fast lane
(``app/fastlane.py``); around the whole app it would also answer for the console and ``/docs``,
which are not for other origins. This layer is asked first (``CommerceAPI.__call__``), looks
only at ``/v1`` paths, and costs a request without origins configured one comparison (an
``OPTIONS`` two):

- a preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) from a listed
  origin is answered here, 204, without a key, not counted against any quota and not in the
  request log or metrics (the pipeline is behind this layer): it carries no key to count it by,
  and browsers keep its answer for ``PREFLIGHT_MAX_AGE_SECONDS``. It allows the path's methods
  (the asked one on a path no route has, so that the page sees the 404);
- a preflight from any other origin is refused, 403 ``origin_not_allowed`` in the envelope;
- every other ``/v1`` answer gets ``Vary: Origin`` when origins are configured (it depends on
  the origin), and for a listed origin ``Access-Control-Allow-Origin`` naming it and the headers
  a program may read (the request id, the rate limit's, ``Retry-After``): errors too;
- an origin refused (a preflight, or a request whose ``Origin`` is neither listed nor the
  server's own) is logged, one line per origin a minute at most, so that an operator sees which
  pages try to call the API.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from re import Pattern

from fastapi.routing import APIRoute
from starlette.types import Message, Scope, Send

from commerce_api.core.errors import error_body
from commerce_api.http.declaration import path_pattern
from commerce_api.http.middleware import send_refusal

PREFLIGHT_MAX_AGE_SECONDS = 7200  # the most Chromium keeps (Firefox: a day)
ALLOWED_REQUEST_HEADERS = b"Authorization, Content-Type, Idempotency-Key"
EXPOSED_HEADERS = (
    b"X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, "
    b"Idempotent-Replayed"
)
# A refused origin is logged at most once in this many seconds.
REFUSED_ORIGIN_LOG_SECONDS = 60.0
_MAX_REMEMBERED_ORIGINS = 10_000
_ORIGIN = b"origin"
_HOST = b"host"
_REQUEST_METHOD = b"access-control-request-method"
_VARY = (b"vary", b"Origin")

logger = logging.getLogger("commerce_api")


class RefusedOrigins:
    """The log of refused origins: one line per origin per ``every`` seconds at most."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._logged: dict[bytes, float] = {}

    def refused(self, origin: bytes, why: str) -> None:
        now = self.clock()
        last = self._logged.get(origin)
        if last is not None and now - last < self.every:
            return
        if len(self._logged) >= _MAX_REMEMBERED_ORIGINS:
            self._logged = {o: t for o, t in self._logged.items() if now - t < self.every}
        self._logged[origin] = now
        logger.warning(
            "CORS: refused %s from origin %s (not in COMMERCE_CORS_ORIGINS; "
            "at most one line per origin a minute)",
            why,
            origin.decode("latin-1"),
            extra={"origin": origin.decode("latin-1")},
        )


class ApiCORS:
    """CORS on the ``/v1`` paths of ``routes`` for ``origins`` (``scheme://host[:port]``, as
    browsers send them in ``Origin``; none: every preflight is refused)."""

    def __init__(self, origins: Iterable[str], routes: Iterable[APIRoute]) -> None:
        self.origins = frozenset(origin.encode("latin-1") for origin in origins)
        methods: dict[str, set[str]] = {}
        for route in routes:
            if route.path.startswith("/v1/"):
                methods.setdefault(route.path, set()).update(route.methods or ())
        self._paths: list[tuple[Pattern[str], bytes]] = [
            (path_pattern(template), ", ".join(sorted(allowed)).encode())
            for template, allowed in methods.items()
        ]
        self.refusals = RefusedOrigins(REFUSED_ORIGIN_LOG_SECONDS)

    def _methods(self, path: str) -> bytes | None:
        """The methods listed for ``path`` (None: no route has it)."""
        for pattern, listed in self._paths:
            if pattern.match(path):
                return listed
        return None

    async def sending(self, scope: Scope, send: Send) -> Send | None:
        """The ``send`` to answer this request through, or None when it was a preflight,
        answered here."""
        method = scope["method"]
        if not scope["path"].startswith("/v1/") or (not self.origins and method != "OPTIONS"):
            return send
        origin: bytes | None = None
        host = b""
        asks: bytes | None = None
        for name, value in scope["headers"]:
            if name == _ORIGIN:
                origin = value
            elif name == _HOST:
                host = value
            elif name == _REQUEST_METHOD:
                asks = value
        if origin is None:
            return _adding(send, [_VARY]) if self.origins else send
        listed = origin in self.origins
        if method == "OPTIONS" and asks is not None:
            if not listed:
                self.refusals.refused(origin, "a preflight")
                await self._refuse_preflight(scope, send, origin)
                return None
            await self._answer_preflight(scope, send, origin, asks)
            return None
        if not listed:
            if origin.partition(b"://")[2] != host:  # the server's own pages (/docs) need none
                self.refusals.refused(origin, "a cross-origin request")
            return _adding(send, [_VARY])
        allow = (b"access-control-allow-origin", origin)
        return _adding(send, [allow, (b"access-control-expose-headers", EXPOSED_HEADERS), _VARY])

    async def _answer_preflight(self, scope: Scope, send: Send, origin: bytes, asks: bytes) -> None:
        headers = [
            (b"access-control-allow-origin", origin),
            (b"access-control-allow-methods", self._methods(scope["path"]) or asks),
            (b"access-control-allow-headers", ALLOWED_REQUEST_HEADERS),
            (b"access-control-max-age", str(PREFLIGHT_MAX_AGE_SECONDS).encode()),
            _VARY,
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _refuse_preflight(scope: Scope, send: Send, origin: bytes) -> None:
        message = (
            f"Pages from {origin.decode('latin-1')} may not call this API from a browser: the "
            "operator has not listed that origin."
        )
        body = error_body("unauthorized", "origin_not_allowed", message, "Origin")
        await send_refusal(scope, send, 403, body, [_VARY])


def _adding(send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
    """``send`` that adds ``headers`` to the answer's head."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), *headers]
        await send(message)

    return send_with_headers
