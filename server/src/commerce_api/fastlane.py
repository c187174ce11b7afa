"""The fast lane: answers the requests that carry the load — the two catalogue reads clients
poll (``GET /v1/products``, ``GET /v1/products/{id}``) and ``POST /v1/orders`` —
before any framework code runs (``CommerceAPI.__call__`` asks it first), because Starlette's and
FastAPI's layers, routing, dependency injection and validation cost several times what the
answer itself does.

It does everything the full stack does for such a request, in one place: authentication (the
key cache, exact on revocation), rate limiting with its headers (a 429 when over quota), the
request id, the metrics and the request log; for an order, the body's validation with the same
pydantic model. Only the plain, valid form of each request is answered here; anything else — an
unknown or malformed parameter, a missing or bad key, an invalid body, an unknown id, a stale
cache, an error of any kind before the answer is decided — goes on to the full stack before
anything is sent or counted (with the body it read handed back), and the routes own every
error message. So the two paths cannot disagree on an error; on a success they send the same
bytes (the tests run against both). The one error answered here is the outcome of an order
the order desk already ran (out of stock, a key conflict, a crash): running it again would not do.
"""

from __future__ import annotations

import logging
import time
from functools import lru_cache
from urllib.parse import parse_qsl

import orjson
from starlette.types import Message, Receive, Scope, Send

from commerce_api import idempotency
from commerce_api.accounts.service import Principal, bearer_token
from commerce_api.catalog.schemas import MAX_CATEGORY_LENGTH
from commerce_api.dependencies import Services
from commerce_api.errors import MAX_BODY_BYTES, APIError
from commerce_api.ids import new_request_id
from commerce_api.middleware import identity_headers, unexpected_failure
from commerce_api.observability.middleware import RequestObserver
from commerce_api.orders.placement import OrderRequest, Outcome
from commerce_api.orders.schemas import OrderCreate
from commerce_api.orders.service import check_units, line_positions
from commerce_api.pagination import DEFAULT_PAGE_SIZE, MAX_OFFSET, clamp
from commerce_api.ratelimit.limiter import Decision
from commerce_api.ratelimit.middleware import decide, rejection
from commerce_api.readpath.service import ReadPath

logger = logging.getLogger("commerce_api.readpath")

LIST_PATH = "/v1/products"
DETAIL_PREFIX = "/v1/products/"
DETAIL_ROUTE = "/v1/products/{id}"
ORDERS_PATH = "/v1/orders"
_JSON = (b"content-type", b"application/json")
# A request with a body is left to the full stack (which enforces the body-size limit).
_BODY_HEADERS = frozenset({b"content-length", b"transfer-encoding"})


def _number(text: str, low: int, high: int) -> int | None:
    if not (0 < len(text) <= 16 and text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if low <= value <= high else None


@lru_cache(maxsize=4096)
def _list_query(query_string: bytes) -> tuple[str | None, int, int] | None:
    """(category, limit, offset) for a plain valid query; None for anything else.

    Memoised: integrations poll with the same few query strings.
    """
    if not query_string:
        return None, DEFAULT_PAGE_SIZE, 0
    try:
        pairs = parse_qsl(
            query_string.decode("ascii"),
            keep_blank_values=True,
            strict_parsing=True,
            errors="strict",
        )
    except (UnicodeDecodeError, ValueError):
        return None
    params = dict(pairs)
    if len(params) != len(pairs) or not params.keys() <= {"limit", "offset", "category"}:
        return None
    limit = _number(params.get("limit", str(DEFAULT_PAGE_SIZE)), 1, 10**15)
    offset = _number(params.get("offset", "0"), 0, MAX_OFFSET)
    category = params.get("category")
    if limit is None or offset is None:
        return None
    if category is not None and not (
        0 < len(category) <= MAX_CATEGORY_LENGTH
        and category.isprintable()
        and category.encode("utf-8", "strict")
    ):
        return None
    return category, clamp(limit), offset


class FastLane:
    def __init__(self, services: Services, observer: RequestObserver) -> None:
        self.read_path: ReadPath = services.read_path
        self.limiter = services.rate_limiter
        self.observer = observer
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """None when the request was answered here; else the ``receive`` the full stack must
        read the request from (the original, or one that first replays what was read)."""
        method = scope["method"]
        path: str = scope["path"]
        if method == "POST":
            if path == ORDERS_PATH:
                return await self._place_order(scope, receive, send)
            return receive
        if method != "GET":
            return receive
        if path == LIST_PATH:
            route = LIST_PATH
        elif path.startswith(DETAIL_PREFIX) and "/" not in path[len(DETAIL_PREFIX) :]:
            route = DETAIL_ROUTE
        else:
            return receive
        started = time.perf_counter()
        scope.setdefault("state", {})
        try:
            if route is LIST_PATH:
                body = await self._list(scope)
            else:
                body = await self._detail(scope, path[len(DETAIL_PREFIX) :])
        except Exception:
            # The full stack meets the same failure and answers it in the contract's envelope.
            logger.exception("the fast lane failed; the request takes the routes")
            return receive
        if body is None:
            return receive
        await self._answer(scope, send, route, started, 200, body, [])
        return None

    async def _answer(
        self,
        scope: Scope,
        send: Send,
        route: str,
        started: float,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        decision: Decision | None = None,
    ) -> None:
        """Send the answer with the request id and the rate-limit headers, count it and log
        it. The request is counted against its quota here unless ``decision`` says it was
        already; over quota, the answer is the 429 instead."""
        state = scope["state"]
        request_id = state.get("request_id") or new_request_id()
        state["request_id"] = request_id
        headers = [_JSON, (b"content-length", b""), *headers]
        if self.limiter.settings.rate_limit_enabled:
            principal = state["principal"]
            if decision is None:
                decision = await decide(self.limiter, scope, principal)
            if not decision.allowed:
                status, body, headers = 429, rejection(decision, principal), headers[:2]
            headers += decision.headers()
        headers += identity_headers(request_id)
        headers[1] = (b"content-length", str(len(body)).encode())
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        self.observer.observe(scope, route, status, time.perf_counter() - started)

    async def _authenticated(self, scope: Scope) -> bool:
        """True when the caller has a valid key (its principal is then in the request state)."""
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                if authorization is not None:
                    return False  # two Authorization headers: the routes decide
                authorization = value
            elif name in _BODY_HEADERS:
                return False
        return await self._authenticate(scope, authorization) is not None

    async def _authenticate(self, scope: Scope, authorization: bytes | None) -> Principal | None:
        if authorization is None:
            return None
        state = scope["state"]
        try:
            token = bearer_token(authorization.decode("latin-1"))
            principal = await self.read_path.authenticate(token, state)
        except APIError:
            return None
        state["principal"] = principal
        return principal

    async def _list(self, scope: Scope) -> bytes | None:
        query = _list_query(scope.get("query_string", b""))
        if query is None or not await self._authenticated(scope):
            return None
        return await self.read_path.page(scope["state"], *query)

    async def _detail(self, scope: Scope, product_id: str) -> bytes | None:
        if scope.get("query_string") or not await self._authenticated(scope):
            return None
        return await self.read_path.product_body(scope["state"], product_id)

    async def _place_order(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """``POST /v1/orders``: validate, then place it in the next batch."""
        if scope.get("query_string"):
            return receive
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        found: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in _ORDER_HEADERS:
                if name in found:
                    return receive  # a repeated header: the routes decide
                found[name] = value
        if found.get(b"content-type") != b"application/json" or b"transfer-encoding" in found:
            return receive
        try:
            size = int(found.get(b"content-length", b""))
        except ValueError:
            return receive
        key = found.get(b"idempotency-key")
        key_text = None if key is None else key.decode("latin-1")
        if not 0 < size <= MAX_BODY_BYTES or (
            key_text is not None and not idempotency.KEY_PATTERN.fullmatch(key_text)
        ):
            return receive
        try:
            principal = await self._authenticate(scope, found.get(b"authorization"))
        except Exception:
            logger.exception("the fast lane failed; the request takes the routes")
            return receive
        if principal is None:
            return receive
        body, messages = await _read_body(receive, size)
        if body is None:
            return _replaying(messages, receive)
        try:
            data = OrderCreate.model_validate(orjson.loads(body))
            line_positions(principal, data)
            check_units(data, self.services.settings)
        except Exception:  # the routes answer it, with the same model's error
            return _replaying(messages, receive)

        # From here on the request is answered here: counted, then placed (or refused).
        state["request_id"] = request_id = new_request_id()
        decision = None
        if self.limiter.settings.rate_limit_enabled:
            decision = await decide(self.limiter, scope, principal)
            if not decision.allowed:
                await self._answer(scope, send, ORDERS_PATH, started, 429, b"", [], decision)
                return None
        keyed = None
        if key_text is not None:
            print_ = idempotency.fingerprint("POST", ORDERS_PATH, "", body)
            keyed = idempotency.KeyedRequest(principal.scope, key_text, print_)
        failure_headers: list[tuple[bytes, bytes]] = []
        try:
            outcome = await self.services.orders.place(OrderRequest(principal, data, keyed))
        except APIError as exc:  # out of stock, an unknown product, a key conflict
            outcome = Outcome.of_error(exc)
        except Exception as exc:
            status, body, failure_headers = unexpected_failure(exc, request_id)
            outcome = Outcome(status, {}, body)
        headers = [
            (name.encode(), value.encode())
            for name, value in outcome.headers.items()
            if name != "content-type"  # _answer sends it
        ] + failure_headers
        await self._answer(
            scope, send, ORDERS_PATH, started, outcome.status, outcome.body, headers, decision
        )
        return None


_ORDER_HEADERS = frozenset(
    {b"authorization", b"content-type", b"content-length", b"idempotency-key", b"transfer-encoding"}
)


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
