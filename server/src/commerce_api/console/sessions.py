"""Console sessions and CSRF tokens.

Signing in with an admin key starts a session: a random token (``secrets.token_urlsafe``) in
an HttpOnly, SameSite=Strict cookie (Secure in production), of which the database keeps only
the SHA-256, so sessions hold across processes and workers. Every console request reads the
session with its key's current state: a revoked key, a signed-out session or one idle longer
than ``COMMERCE_CONSOLE_IDLE_SECONDS`` is gone at once, in every process.

Every state-changing form carries a CSRF token, compared in constant time: for a session, an
HMAC of its token (nothing more to store, and only the cookie's holder can compute it); for the
sign-in form, which has no session yet, a random value that must equal a cookie's (double
submit).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from commerce_api.accounts.service import Principal
from commerce_api.audit import service as audit
from commerce_api.console.repository import sessions as session_queries
from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Database

SESSION_COOKIE = "commerce_console_session"
SIGN_IN_COOKIE = "commerce_console_sign_in"
COOKIE_PATH = "/dashboard"
CSRF_FIELD = "csrf_token"
# last_seen_at is written at most once a minute (a read per request, not a write), and at most
# a quarter of the idle time apart: a session may so end up to that much before its idle time
# has passed since the very last request.
TOUCH_INTERVAL = timedelta(seconds=60)


def touch_interval(idle_seconds: int) -> timedelta:
    return min(TOUCH_INTERVAL, timedelta(seconds=idle_seconds / 4))


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in operator: the admin key's principal and the forms' CSRF token."""

    principal: Principal
    csrf_token: str


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def csrf_token_for(session_token: str) -> str:
    return hmac.new(session_token.encode(), b"commerce-console-csrf", hashlib.sha256).hexdigest()


def tokens_match(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())


def new_sign_in_token() -> str:
    return secrets.token_urlsafe(32)


async def start_session(db: Database, key_id: str, idle_seconds: int) -> str:
    """A new session for ``key_id``, audited (``key.sign_in``); its token (for the cookie
    only). Clears idle sessions."""
    token = secrets.token_urlsafe(32)
    now = utcnow()
    async with db.write() as conn:
        await session_queries.delete_idle_sessions(conn, now - timedelta(seconds=idle_seconds))
        await session_queries.insert_session(
            conn, token_hash=hash_token(token), key_id=key_id, now=now
        )
        await audit.record(conn, audit.Actor("key", key_id), "key.sign_in", ("key", key_id))
    return token


async def resume_session(db: Database, token: str, idle_seconds: int) -> ConsoleSession | None:
    """The session of a cookie's token, or None when it has ended (and it is then deleted)."""
    token_hash = hash_token(token)
    now = utcnow()
    async with db.read() as conn:
        row = await session_queries.session_with_key(conn, token_hash)
    if row is None:
        return None
    idle = now - row.last_seen_at
    if row.revoked_at is not None or row.role != "admin" or idle > timedelta(seconds=idle_seconds):
        await end_session(db, token)
        return None
    if idle > touch_interval(idle_seconds):
        async with db.write() as conn:
            await session_queries.touch_session(conn, token_hash, now)
    principal = Principal(
        key_id=row.key_id, account_id=row.account_id, role="admin", tier="production"
    )
    return ConsoleSession(principal=principal, csrf_token=csrf_token_for(token))


async def end_session(db: Database, token: str) -> None:
    async with db.write() as conn:
        await session_queries.delete_session(conn, hash_token(token))


async def sign_out(db: Database, token: str, key_id: str) -> None:
    """End the session of ``token`` at its operator's request, audited (``key.sign_out``; a
    session that ends by itself, idle or its key revoked, is not a sign-out)."""
    async with db.write() as conn:
        await session_queries.delete_session(conn, hash_token(token))
        await audit.record(conn, audit.Actor("key", key_id), "key.sign_out", ("key", key_id))
