"""What one request carries through the layers: one typed object, made once per request.

The request pipeline (``pipeline.py``) makes it when a request arrives, whichever path answers
it (the fast lane or the routes); every layer reads and fills the same fields — never string
keys in Starlette's ``scope["state"]``. Only this module knows where it is kept in the scope.
The request's id (``new_request_id``) is made here too, with its context.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import Scope

from commerce_api.core.ids import random_token

if TYPE_CHECKING:
    from commerce_api.accounts.service import Principal
    from commerce_api.core.errors import APIError
    from commerce_api.idempotency.service import KeyedRequest, Pending
    from commerce_api.ratelimit.limiter import Decision
    from commerce_api.storage.freshness import Versions


class _RequestIds:
    """Request ids: a random per-process prefix and a counter, ``req_`` + 24 characters.

    A request id only has to be unique, not unguessable (it names a request in logs and error
    bodies), so it costs a counter step instead of a CSPRNG draw on every response. The prefix
    (12 base62 characters, ~71 bits) keeps processes apart; a forked child draws its own
    (``os.register_at_fork``: no ``getpid`` system call per request).
    """

    def __init__(self) -> None:
        self._restart()
        os.register_at_fork(after_in_child=self._restart)

    def _restart(self) -> None:
        self._prefix = f"req_{random_token(12)}"
        self._counter: itertools.count[int] = itertools.count(1)

    def __call__(self) -> str:
        # 12 hex digits: 2**48 requests before the counter would widen the id.
        return f"{self._prefix}{next(self._counter):012x}"


new_request_id = _RequestIds()


@dataclass(slots=True)
class RequestContext:
    request_id: str
    # The caller, once authenticated; or why it could not be (both memoised for the request).
    principal: Principal | None = None
    auth_error: APIError | None = None
    # The change stamps the caches were checked against, read at most once per request.
    versions: Versions | None = None
    versions_read: bool = False
    # The rate limiter's decision for this request (its headers go on the answer).
    decision: Decision | None = None
    # An Idempotency-Key: the request it names (an order claims it in its own batch), or the
    # key every other POST records with its change (``idempotency.record``).
    keyed: KeyedRequest | None = None
    claim: Pending | None = None


_SCOPE_KEY = "commerce_api.http.context"


def context(scope: Scope) -> RequestContext:
    """The request's context, made on first use (a test may call a layer on its own)."""
    found: RequestContext | None = scope.get(_SCOPE_KEY)
    if found is None:
        found = scope[_SCOPE_KEY] = RequestContext(new_request_id())
    return found


def client_address(scope: Scope) -> str:
    """The request's client address (with trusted proxies, the one they forward); empty when
    the server gave none."""
    client = scope.get("client")
    return str(client[0]) if client else ""
