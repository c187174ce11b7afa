"""``Idempotency-Key`` for POST requests, held in the database so it works across processes.

1. *Look up* (:func:`lookup`): a key already used for a different request (fingerprint) → 422;
   one that finished → its stored outcome is replayed (``Idempotent-Replayed: true``);
   otherwise the request runs (:class:`Pending`) — nothing is written before it does.
2. *Record*: the route stores the key with its outcome in the same transaction as the change
   it made (:func:`store`), so "change committed" and "response recorded" cannot come apart.
   If another request with the key got there first (it inserted the row: on PostgreSQL the
   insert waits for that request's commit), this one's transaction rolls back and the other's
   outcome is replayed (:class:`KeyTaken`). Outcomes that changed nothing (errors) are
   recorded afterwards the same way, in a transaction of their own (:func:`record_apart`).
3. A 5xx or a crash leaves nothing behind — no change, no key (the route's transaction rolled
   back), so a retry with the key runs at once (issue 32: a committed claim used to refuse it
   with 409 for its 60 s lease after a crash).

Keys are scoped to the account and kept 24 hours; :func:`prune` deletes older ones.

Orders claim their key in the order's own transaction too: their batch locks the key's row,
decides with :func:`verdict` and stores the outcome (``orders/placement.py``). An order's
validation error is stored with :func:`claim` and :func:`record_separately`. A row left in
flight (by an older version) is taken over once its lease has expired.

An outcome is a :class:`StoredResponse` (status, headers, body): what the request edge
(``http/idempotency.py``) renders, never a framework's response.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.core.errors import APIError
from commerce_api.core.timestamps import utcnow
from commerce_api.idempotency import repository
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Database

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
RETENTION = timedelta(hours=24)
# A claim older than this with no recorded response belongs to a request that died; its
# transaction rolled back, so it is safe to take over. Far above any request's duration.
LEASE = timedelta(seconds=60)
KEY_PATTERN = re.compile(f"[\\x20-\\x7e]{{1,{MAX_KEY_LENGTH}}}")
_KEPT_HEADERS = ("content-type", "location")


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A key's outcome: the status, headers (lower-case names) and body to answer with."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class KeyedRequest:
    """A request's ``Idempotency-Key``: the account (scope), the key, the request's print."""

    scope: str
    key: str
    fingerprint: str


@dataclass(slots=True)
class Pending:
    """A keyed POST running without a claim: :func:`store` stores its key with its outcome
    in the change's own transaction."""

    keyed: KeyedRequest
    recorded: bool = False


@dataclass(slots=True)
class Claim:
    scope: str
    key: str
    locked_at: datetime
    recorded: bool = False


class KeyTaken(Exception):
    """Another request with the key finished first: roll back, replay its stored outcome."""

    def __init__(self, row: Any) -> None:
        super().__init__("the Idempotency-Key was recorded by another request first")
        self.row = row

    def stored(self, secret_box: SecretBox) -> StoredResponse:
        return replay(self.row, secret_box)


class KeyConflict(APIError):
    """The key cannot be used for this request now (422 reused, 409 in flight). Never stored."""


Verdict = Literal["replay", "take_over", "reset"]


def fingerprint(method: str, path: str, query: str, body: bytes) -> str:
    """What makes two requests "the same": method, path, query and body (JSON key order and
    whitespace do not count)."""
    try:
        canonical = orjson.dumps(orjson.loads(body), option=orjson.OPT_SORT_KEYS) if body else b""
    except orjson.JSONDecodeError:
        canonical = body
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), query.encode(), canonical):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def verdict(row: Any, fingerprint: str, now: datetime) -> Verdict:
    """What to do with a request whose key is already in the table: replay the stored
    outcome, take over an abandoned claim, start afresh (the key expired), or — raised — 422
    for a different request under the same key, 409 while the first is still in flight."""
    expired = row.created_at < now - RETENTION
    if not expired and row.fingerprint != fingerprint:
        raise KeyConflict(
            422,
            "invalid_request",
            f"This `{HEADER}` was already used with a different request. Use a new key "
            "for a new request.",
            HEADER,
            reason="idempotency_key_reused",
        )
    if expired:
        return "reset"
    if row.state == "in_flight":
        if row.locked_at < now - LEASE:
            return "take_over"
        raise _in_flight()
    return "replay"


def replay(row: Any, secret_box: SecretBox) -> StoredResponse:
    """A key row's stored outcome, marked as a replay."""
    body = secret_box.decrypt_bytes(row.response_body)
    return StoredResponse(row.response_status, replayed_headers(row.response_headers), body)


def replayed_headers(stored: dict[str, str] | None) -> dict[str, str]:
    """A stored outcome's headers (lower-case names), marked as a replay."""
    return {**(stored or {}), REPLAYED_HEADER.lower(): "true"}


def stored_values(
    status: int, headers: Mapping[str, str], body: bytes, secret_box: SecretBox
) -> dict[str, Any]:
    """The columns of a finished key: the outcome, its body encrypted at rest (a stored body
    can carry a secret, such as a new webhook endpoint's ``whsec_…``)."""
    return {
        "state": "done",
        "response_status": status,
        "response_headers": {name: headers[name] for name in _KEPT_HEADERS if name in headers},
        "response_body": secret_box.encrypt_bytes(body),
    }


def _values(outcome: StoredResponse, secret_box: SecretBox) -> dict[str, Any]:
    return stored_values(outcome.status, outcome.headers, outcome.body, secret_box)


async def lookup(db: Database, secret_box: SecretBox, keyed: KeyedRequest) -> StoredResponse | None:
    """The stored outcome for the key, replayed; None to run the request (the key is new,
    expired, or an abandoned claim's). Raises :class:`KeyConflict` (422, or 409 in flight)."""
    async with db.read() as conn:
        row = await repository.find(conn, keyed.scope, keyed.key)
    if row is None or verdict(row, keyed.fingerprint, utcnow()) != "replay":
        return None
    return replay(row, secret_box)


async def store(
    conn: AsyncConnection, secret_box: SecretBox, keyed: KeyedRequest, outcome: StoredResponse
) -> None:
    """Store ``outcome`` as the key's, in the caller's transaction. Raises :class:`KeyTaken`
    when another request recorded the key first, :class:`KeyConflict` when the key is another
    request's or still in flight: either way the caller's transaction must roll back."""
    now = utcnow()
    values = _values(outcome, secret_box)
    identity = {"scope": keyed.scope, "key": keyed.key, "fingerprint": keyed.fingerprint}
    if await repository.insert_new(
        conn, {**identity, "locked_at": now, "created_at": now, **values}
    ):
        return
    row = await repository.find(conn, keyed.scope, keyed.key, lock=True)
    assert row is not None, "the insert found the key's row"
    found = verdict(row, keyed.fingerprint, now)
    if found == "replay":
        raise KeyTaken(row)
    created_at = now if found == "reset" else row.created_at
    await repository.overwrite(
        conn,
        keyed.scope,
        keyed.key,
        {"fingerprint": keyed.fingerprint, "locked_at": now, "created_at": created_at, **values},
    )


async def record_apart(
    db: Database, secret_box: SecretBox, pending: Pending, outcome: StoredResponse
) -> StoredResponse | None:
    """Store an outcome that changed nothing (an error) as the key's, in a transaction of its
    own; None when it was stored, else the outcome another request recorded first."""
    try:
        async with db.write() as conn:
            await store(conn, secret_box, pending.keyed, outcome)
    except KeyTaken as taken:
        return taken.stored(secret_box)
    pending.recorded = True
    return None


async def claim(db: Database, secret_box: SecretBox, keyed: KeyedRequest) -> Claim | StoredResponse:
    """Claim the key for this request, or answer from what is stored (see the module doc)."""
    scope, key, fingerprint = keyed.scope, keyed.key, keyed.fingerprint
    now = utcnow()
    async with db.write() as conn:
        claimed = {"state": "in_flight", "locked_at": now, "created_at": now}
        if await repository.insert_new(
            conn, {"scope": scope, "key": key, "fingerprint": fingerprint, **claimed}
        ):
            return Claim(scope, key, now)

        for _ in range(2):  # a take-over that lost a race reads the row once more
            row = await repository.find(conn, scope, key)
            assert row is not None, "keys are deleted only past their retention"
            found = verdict(row, fingerprint, now)
            if found == "replay":
                break
            if await _take_over(conn, row, fingerprint, now, reset=found == "reset"):
                return Claim(scope, key, now)
        else:
            raise _in_flight()
    return replay(row, secret_box)


async def _take_over(
    conn: AsyncConnection, row: Any, fingerprint: str, now: datetime, *, reset: bool
) -> bool:
    """Claim an expired key (a fresh start) or an abandoned claim; False if the row changed
    since ``row`` was read — another request took it over, or the request that held the claim
    finished after all (its state is part of the match: resetting a finished row would run its
    request a second time)."""
    return await repository.replace_if_unchanged(
        conn,
        row,
        {
            "fingerprint": fingerprint,
            "state": "in_flight",
            "locked_at": now,
            "created_at": now if reset else row.created_at,
            "response_status": None,
            "response_headers": None,
            "response_body": None,
        },
    )


async def record_separately(
    db: Database, secret_box: SecretBox, claim_: Claim, outcome: StoredResponse
) -> None:
    """Store ``outcome`` in the key this request claimed (:func:`claim`)."""
    async with db.write() as conn:
        values = _values(outcome, secret_box)
        await repository.finish_claim(conn, claim_.scope, claim_.key, claim_.locked_at, values)
    claim_.recorded = True


def _in_flight() -> APIError:
    return KeyConflict(
        409,
        "invalid_request",
        f"A request with this `{HEADER}` is still being processed. Retry in a moment.",
        HEADER,
        reason="idempotency_key_in_use",
    )


async def prune(db: Database) -> int:
    """Delete keys older than the retention period; returns how many."""
    async with db.write() as conn:
        return await repository.delete_created_before(conn, utcnow() - RETENTION)
