"""Creating accounts, issuing and revoking API keys, audited: ``accounts`` sits below the audit
trail (every request authenticates through it), so the console and the CLI change accounts and
keys through these, which call ``accounts.service`` and record the change in the same
transaction. Never a secret or a key's hash in the trail: the role and the account only."""

from __future__ import annotations

from commerce_api.accounts import service as accounts
from commerce_api.accounts.service import Principal, Role
from commerce_api.audit.service import actor_of, created, record
from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.settings import Environment, Tier
from commerce_api.storage.executor import Executor


async def create_account(
    conn: Executor, principal: Principal | None, name: str, tier: Tier = "development"
) -> str:
    """``accounts.service.create_account``, audited as ``account.create`` by ``principal``
    (None: the CLI)."""
    account_id = await accounts.create_account(conn, name, tier)
    changes = created({"name": name, "tier": tier})
    await record(conn, actor_of(principal), "account.create", ("account", account_id), changes)
    return account_id


async def create_key(
    conn: Executor,
    principal: Principal | None,
    environment: Environment,
    *,
    account_id: str | None,
    role: Role = "client",
) -> accounts.CreatedKey:
    """``accounts.service.create_key``, audited as ``key.create`` by ``principal`` (None: the
    CLI)."""
    key = await accounts.create_key(conn, environment, account_id=account_id, role=role)
    changes = created({"role": key.role, "account_id": key.account_id})
    await record(conn, actor_of(principal), "key.create", ("key", key.id), changes)
    return key


async def revoke_key(conn: Executor, principal: Principal | None, key_id: str) -> bool:
    """``accounts.service.revoke_key``, audited as ``key.revoke`` when it revoked the key."""
    now = utcnow()
    if not await accounts.revoke_key(conn, key_id, now):
        return False
    changes = {"revoked_at": [None, format_timestamp(now)]}
    await record(conn, actor_of(principal), "key.revoke", ("key", key_id), changes)
    return True
