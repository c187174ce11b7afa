"""``Idempotency-Key``'s HTTP side: the header read and validated, a response stored as the
key's outcome and a stored outcome answered (``Idempotent-Replayed: true``). What a key is and
when it is replayed is ``commerce_api.idempotency`` (its service and repository)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from commerce_api.core.errors import invalid_request
from commerce_api.http.context import context
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
