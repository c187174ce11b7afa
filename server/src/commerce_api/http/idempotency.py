"""``Idempotency-Key``'s HTTP side: the header read and validated, a POST run under its key
(for the routes, ``routing.StrictRoute``, and the fast lane alike), a response stored as the
key's outcome and a stored outcome answered (``Idempotent-Replayed: true``). What a key is and
when it is replayed is ``commerce_api.idempotency`` (its service and repository)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import invalid_request
from commerce_api.http.context import context
from commerce_api.http.dependencies import current_principal, get_services
from commerce_api.http.errors import render_exception
from commerce_api.http.services import RequestServices
from commerce_api.idempotency import service
from commerce_api.idempotency.service import HEADER, KEY_PATTERN, MAX_KEY_LENGTH, StoredResponse
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database


def read_key(request: Request) -> str | None:
    """The request's idempotency key, validated; None when absent."""
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not KEY_PATTERN.fullmatch(key):
        raise invalid_request(
            f"`{HEADER}` must be 1 to {MAX_KEY_LENGTH} printable ASCII characters, such as a UUID.",
            HEADER,
        )
    return key


def render(outcome: StoredResponse) -> Response:
    """A key's stored outcome as the response to answer."""
    return Response(outcome.body, status_code=outcome.status, headers=dict(outcome.headers))


def outcome_of(response: Response) -> StoredResponse:
    """A response as the key's outcome."""
    return StoredResponse(response.status_code, response.headers, bytes(response.body))


async def lookup(
    db: Database, secret_box: SecretBox, keyed: service.KeyedRequest
) -> Response | None:
    """The stored response for the key, replayed; None to run the request
    (``service.lookup``)."""
    stored = await service.lookup(db, secret_box, keyed)
    return None if stored is None else render(stored)


async def record(conn: AsyncConnection, request: Request, response: Response) -> None:
    """Store ``response`` for the request's key, inside the caller's transaction
    (``service.store``).

    No-op for requests without a key. Raises (rolling the caller back) ``KeyTaken`` if
    another request with the key recorded it first, ``KeyConflict`` if it is in use.
    """
    pending = context(request.scope).claim
    if pending is None:
        return
    secret_box = request.app.state.services.secret_box
    await service.store(conn, secret_box, pending.keyed, outcome_of(response))
    pending.recorded = True


async def record_apart(
    db: Database, secret_box: SecretBox, pending: service.Pending, response: Response
) -> Response:
    """Store a response that changed nothing (an error) as the key's, in a transaction of its
    own; the response to give: this one, or the one another request recorded first."""
    taken = await service.record_apart(db, secret_box, pending, outcome_of(response))
    return response if taken is None else render(taken)


async def claim(
    db: Database, secret_box: SecretBox, keyed: service.KeyedRequest
) -> service.Claim | Response:
    """Claim the key for this request, or the stored response to answer (``service.claim``)."""
    claimed = await service.claim(db, secret_box, keyed)
    return render(claimed) if isinstance(claimed, StoredResponse) else claimed


async def record_separately(
    db: Database, secret_box: SecretBox, claim_: service.Claim, response: Response
) -> None:
    """Store ``response`` in the key this request claimed."""
    await service.record_separately(db, secret_box, claim_, outcome_of(response))


async def run_keyed(
    handler: Callable[[Request], Coroutine[Any, Any, Response]], request: Request, key: str
) -> Response:
    """Run a route's POST under its ``Idempotency-Key`` (see ``commerce_api.idempotency``): a
    stored outcome replayed, else the handler run and its answer stored with its change (or
    apart, for an error that changed nothing)."""
    services = get_services(request)
    db, secret_box = services.db, services.secret_box
    keyed = await _keyed_request(request, key)
    stored = await lookup(db, secret_box, keyed)
    if stored is not None:
        return stored
    # Nothing is written before the handler: it records the key with its change (so a crash
    # or a 5xx leaves no claim behind to refuse the retry).
    pending = service.Pending(keyed)
    context(request.scope).claim = pending
    try:
        response = await handler(request)
    except service.KeyTaken as taken:  # another request with the key committed first
        return render(taken.stored(secret_box))
    except service.KeyConflict:
        raise
    except Exception as exc:
        rendered = await render_exception(request, exc)
        if rendered is None or _retry_later(rendered.status_code):
            raise
        response = rendered
    if _retry_later(response.status_code) or pending.recorded:
        return response
    return await record_apart(db, secret_box, pending, response)


def _retry_later(status: int) -> bool:
    """An answer that says "try again later" (429, 5xx) is not the key's result: it is not
    stored, so a retry with the same key runs the request (as Stripe does)."""
    return status == 429 or status >= 500


async def run_self_managed_route(
    handler: Callable[[Request], Coroutine[Any, Any, Response]], request: Request, key: str
) -> Response:
    """Run a route's POST whose endpoint claims and records its key in its own write
    (``routing.manages_idempotency``)."""
    keyed = await _keyed_request(request, key)
    return await run_self_managed(get_services(request), request, keyed, lambda: handler(request))


async def run_self_managed(
    services: RequestServices,
    request: Request,
    keyed: service.KeyedRequest,
    run: Callable[[], Awaitable[Response]],
) -> Response:
    """Run a POST whose endpoint claims and records its key in its own write (``run``, for the
    routes and the fast lane alike); a 4xx raised before it got there (a validation error) is
    stored here, as :func:`run_keyed` would."""
    context(request.scope).keyed = keyed
    try:
        return await run()
    except service.KeyConflict:
        raise
    except Exception as exc:
        rendered = await render_exception(request, exc)
        if rendered is None or _retry_later(rendered.status_code):
            raise
    claimed = await claim(services.db, services.secret_box, keyed)
    if isinstance(claimed, Response):
        return claimed
    await record_separately(services.db, services.secret_box, claimed, rendered)
    return rendered


async def _keyed_request(request: Request, key: str) -> service.KeyedRequest:
    principal = await current_principal(request)
    return keyed_request(
        principal, key, request.method, request.url.path, request.url.query, await request.body()
    )


def keyed_request(
    principal: Principal, key: str, method: str, path: str, query: str, body: bytes
) -> service.KeyedRequest:
    """The caller's scope, the key, and what makes this request "the same" as another."""
    fingerprint = service.fingerprint(method, path, query, body)
    return service.KeyedRequest(principal.scope, key, fingerprint)
