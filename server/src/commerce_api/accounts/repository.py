"""Queries for accounts and API keys."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Row

from commerce_api.storage import freshness
from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import accounts, api_keys


async def insert_account(
    conn: Executor, *, id: str, name: str, tier: str, created_at: datetime
) -> None:
    await conn.execute(accounts.insert().values(id=id, name=name, tier=tier, created_at=created_at))


async def get_account(conn: Executor, account_id: str) -> Row[tuple[str, str, str]] | None:
    result = await conn.execute(
        select(accounts.c.id, accounts.c.name, accounts.c.tier).where(accounts.c.id == account_id)
    )
    return result.first()


async def list_accounts(conn: Executor) -> list[Row[tuple[str, str, str, datetime]]]:
    result = await conn.execute(
        select(accounts.c.id, accounts.c.name, accounts.c.tier, accounts.c.created_at).order_by(
            accounts.c.created_at, accounts.c.id
        )
    )
    return list(result.all())


async def find_account_by_name(conn: Executor, name: str) -> str | None:
    result = await conn.execute(
        select(accounts.c.id).where(accounts.c.name == name).order_by(accounts.c.created_at)
    )
    return result.scalars().first()


async def insert_key(
    conn: Executor,
    *,
    id: str,
    account_id: str | None,
    role: str,
    prefix: str,
    last4: str,
    key_hash: str,
    created_at: datetime,
) -> None:
    await conn.execute(
        api_keys.insert().values(
            id=id,
            account_id=account_id,
            role=role,
            prefix=prefix,
            last4=last4,
            key_hash=key_hash,
            created_at=created_at,
        )
    )


# The key a request's token names (by its hash), with its account's tier: what the read path
# authenticates with, compiled once for its drivers (``readpath/statements.py``).
KEY_BY_HASH = (
    select(
        api_keys.c.id,
        api_keys.c.account_id,
        api_keys.c.role,
        api_keys.c.key_hash,
        api_keys.c.revoked_at,
        accounts.c.tier,
    )
    .select_from(api_keys.outerjoin(accounts, accounts.c.id == api_keys.c.account_id))
    .where(api_keys.c.key_hash == bindparam("key_hash"))
)


async def find_key(conn: Executor, key_hash: str) -> Row[tuple[object, ...]] | None:
    """The key with this hash: its id, account, role and revocation time."""
    result = await conn.execute(
        select(api_keys.c.id, api_keys.c.account_id, api_keys.c.role, api_keys.c.revoked_at).where(
            api_keys.c.key_hash == key_hash
        )
    )
    return result.first()


async def list_keys(conn: Executor) -> list[Row[tuple[object, ...]]]:
    result = await conn.execute(
        select(
            api_keys.c.id,
            api_keys.c.account_id,
            api_keys.c.role,
            api_keys.c.prefix,
            api_keys.c.last4,
            api_keys.c.created_at,
            api_keys.c.revoked_at,
        ).order_by(api_keys.c.created_at, api_keys.c.id)
    )
    return list(result.all())


async def revoke_key(conn: Executor, key_id: str, revoked_at: datetime) -> bool:
    """Revoke a key; False when there is no such key. Revoking twice keeps the first time."""
    exists = await conn.scalar(select(api_keys.c.id).where(api_keys.c.id == key_id))
    if exists is None:
        return False
    await conn.execute(
        update(api_keys)
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=revoked_at)
    )
    await freshness.bump(conn, freshness.AUTH)  # every process drops its cached keys
    return True
