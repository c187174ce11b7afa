"""Accounts and keys: creation, listing, revocation, and authenticating a request's key."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from commerce_api.accounts import repository
from commerce_api.accounts.keys import (
    MAX_KEY_LENGTH,
    generate_key,
    hash_key,
    hashes_match,
    key_environment,
)
from commerce_api.core.errors import forbidden, unauthorized
from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.settings import Environment, Tier
from commerce_api.storage.executor import Executor

# client: an account's secret key (its orders, webhooks, events, the catalogue); admin: the
# operator's; publishable: an account's key that only reads the catalogue, for storefronts.
Role = Literal["client", "admin", "publishable"]


class AccountNotFound(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the key, its account (None for operator keys) and role."""

    key_id: str
    account_id: str | None
    role: Role
    tier: Tier

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def is_publishable(self) -> bool:
        return self.role == "publishable"

    @property
    def scope(self) -> str:
        """What idempotency keys are scoped to: the account, or an operator key itself."""
        return self.account_id or self.key_id


@dataclass(frozen=True, slots=True)
class CreatedKey:
    id: str
    account_id: str | None
    role: Role
    secret: str


@dataclass(frozen=True, slots=True)
class AccountInfo:
    id: str
    name: str
    tier: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class KeyInfo:
    id: str
    account_id: str | None
    role: str
    prefix: str
    last4: str
    created_at: datetime
    revoked_at: datetime | None


async def create_account(conn: Executor, name: str, tier: Tier = "development") -> str:
    account_id = new_id("acct")
    await repository.insert_account(conn, id=account_id, name=name, tier=tier, created_at=utcnow())
    return account_id


async def list_accounts(conn: Executor) -> list[AccountInfo]:
    """Every account, oldest first."""
    return [AccountInfo(**row._mapping) for row in await repository.list_accounts(conn)]


async def create_key(
    conn: Executor,
    environment: Environment,
    *,
    account_id: str | None,
    role: Role = "client",
) -> CreatedKey:
    """Issue a key. Client and publishable keys need an account; admin (operator) keys may
    have none."""
    if account_id is not None and await repository.get_account(conn, account_id) is None:
        raise AccountNotFound(account_id)
    if role != "admin" and account_id is None:
        raise ValueError(f"a {role} key belongs to an account")
    key = generate_key(environment, publishable=role == "publishable")
    key_id = new_id("key")
    await repository.insert_key(
        conn,
        id=key_id,
        account_id=account_id,
        role=role,
        prefix=key.prefix,
        last4=key.last4,
        key_hash=key.key_hash,
        created_at=utcnow(),
    )
    return CreatedKey(id=key_id, account_id=account_id, role=role, secret=key.secret)


async def list_keys(conn: Executor) -> list[KeyInfo]:
    return [KeyInfo(**row._mapping) for row in await repository.list_keys(conn)]


async def revoke_key(conn: Executor, key_id: str, at: datetime | None = None) -> bool:
    return await repository.revoke_key(conn, key_id, at or utcnow())


def key_lookup_hash(token: str, environment: Environment) -> str:
    """The hash to look a key up by, or a 401 for a key that cannot be valid here."""
    issued_for = key_environment(token)
    if issued_for is None or len(token) > MAX_KEY_LENGTH:
        raise unauthorized("Invalid API key.", "Authorization")
    if issued_for != environment:
        raise unauthorized(
            f"This is a {environment} instance; {token[: token.index('_', 3) + 1]}… keys are "
            f"for {issued_for}. Use a key issued by this instance.",
            "Authorization",
            reason="wrong_environment",
        )
    return hash_key(token)


def principal_from_row(row: Any, computed_hash: str) -> Principal:
    """The principal for a looked-up key row, or a 401: unknown and revoked keys get the same
    answer."""
    if row is None or not hashes_match(row.key_hash, computed_hash) or row.revoked_at is not None:
        raise unauthorized("Invalid API key (unknown or revoked).", "Authorization")
    tier: Tier = "production" if row.tier == "production" or row.tier is None else "development"
    role: Role = row.role if row.role in ("admin", "publishable") else "client"
    return Principal(key_id=row.id, account_id=row.account_id, role=role, tier=tier)


def secret_key_principal(principal: Principal) -> Principal:
    """``principal``, unless its key is publishable: those read the catalogue and nothing else
    (a 403 that says so; ``http.dependencies.catalog_principal`` is the one way past it)."""
    if principal.is_publishable:
        raise forbidden(
            "Publishable keys (pk_…) may only read the catalogue (products and categories). "
            "Call this endpoint from your server with a secret key (sk_…).",
            reason="publishable_key_not_allowed",
        )
    return principal
