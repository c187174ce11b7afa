"""Accounts and API keys: creation, listing, revocation and authentication."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from commerce_api.accounts import repository
from commerce_api.accounts import service as accounts
from commerce_api.accounts.keys import hash_key
from commerce_api.core.errors import APIError
from commerce_api.core.ids import looks_like, new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.http.context import RequestContext
from commerce_api.http.request_head import bearer_token
from commerce_api.readpath.service import ReadPath
from commerce_api.storage.db import Database
from commerce_api.storage.tables import accounts as accounts_table
from commerce_api.storage.tables import api_keys
from tests.factories import new_account, new_key
from tests.helpers import Clock


async def insert_key(
    conn: Any, key_id: str, account_id: str, key_hash: str, created_at: datetime
) -> None:
    """A sandbox client key's row, written straight through the repository."""
    await repository.insert_key(
        conn,
        id=key_id,
        account_id=account_id,
        role="client",
        prefix="sk_sandbox_",
        last4="abcd",
        key_hash=key_hash,
        created_at=created_at,
    )


async def authenticate(
    db: Database, token: str, environment: str = "sandbox"
) -> accounts.Principal:
    """Through the read path, as every request is authenticated (a fresh key cache)."""
    read_path = await ReadPath.open(db, "production" if environment == "production" else "sandbox")
    try:
        return await read_path.authenticate(token, RequestContext("req_test"))
    finally:
        await read_path.close()


async def test_create_account(db: Database) -> None:
    before = utcnow()
    account_id = await new_account(db, "Acme Books", "production")
    after = utcnow()
    assert looks_like("acct", account_id)
    async with db.read() as conn:
        row = await repository.get_account(conn, account_id)
        assert await repository.find_account_by_name(conn, "Acme Books") == account_id
        assert await repository.find_account_by_name(conn, "Nobody") is None
        assert await repository.get_account(conn, new_id("acct")) is None
    assert row is not None
    assert (row.id, row.name, row.tier) == (account_id, "Acme Books", "production")
    async with db.read() as conn:
        created_at = await conn.scalar(
            select(accounts_table.c.created_at).where(accounts_table.c.id == account_id)
        )
    assert isinstance(created_at, datetime)
    assert before <= created_at <= after


async def test_account_tier_defaults_to_development(db: Database) -> None:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Default")
        row = await repository.get_account(conn, account_id)
    assert row is not None
    assert row.tier == "development"


async def test_create_client_key(db: Database) -> None:
    account_id = await new_account(db)
    key = await new_key(db, account_id)
    assert looks_like("key", key.id)
    assert key.account_id == account_id
    assert key.role == "client"
    assert key.secret.startswith("sk_sandbox_")
    async with db.read() as conn:
        stored = (await conn.execute(select(api_keys))).one()
    assert stored.key_hash == hash_key(key.secret)
    assert key.secret not in {str(value) for value in stored}


async def test_production_instance_issues_live_keys(db: Database) -> None:
    key = await new_key(db, role="admin", environment="production")
    assert key.secret.startswith("sk_live_")


async def test_client_key_needs_an_existing_account(db: Database) -> None:
    with pytest.raises(ValueError, match="belongs to an account"):
        await new_key(db, None)
    missing = new_id("acct")
    with pytest.raises(accounts.AccountNotFound):
        await new_key(db, missing)
    async with db.read() as conn:
        assert await accounts.list_keys(conn) == []


async def test_key_hash_is_unique(db: Database) -> None:
    account_id = await new_account(db)
    now = utcnow()

    async def insert_two() -> None:
        async with db.write() as conn:
            for key_id in (new_id("key"), new_id("key")):
                await insert_key(conn, key_id, account_id, "0" * 64, now)

    with pytest.raises(IntegrityError):
        await insert_two()


async def test_list_keys_fields(db: Database) -> None:
    account_id = await new_account(db)
    client = await new_key(db, account_id)
    admin = await new_key(db, role="admin")
    async with db.read() as conn:
        listed = await accounts.list_keys(conn)
    assert [info.id for info in listed] == [client.id, admin.id]
    first, second = listed
    assert isinstance(first, accounts.KeyInfo)
    assert (first.account_id, first.role, first.prefix, first.last4) == (
        account_id,
        "client",
        "sk_sandbox_",
        client.secret[-4:],
    )
    assert (second.account_id, second.role, second.last4) == (None, "admin", admin.secret[-4:])
    for info in listed:
        assert info.created_at.tzinfo is not None
        assert info.revoked_at is None
        assert {field.name for field in dataclasses.fields(info)} == {
            "id",
            "account_id",
            "role",
            "prefix",
            "last4",
            "created_at",
            "revoked_at",
        }
        assert client.secret not in repr(info)
        assert admin.secret not in repr(info)


async def test_list_keys_ordered_by_creation_then_id(db: Database) -> None:
    account_id = await new_account(db)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    ids = ["key_b", "key_a", "key_c"]
    async with db.write() as conn:
        for index, key_id in enumerate(ids):
            created_at = at if key_id != "key_c" else at - timedelta(seconds=1)
            await insert_key(conn, key_id, account_id, f"{index:064d}", created_at)
        listed = await accounts.list_keys(conn)
    assert [info.id for info in listed] == ["key_c", "key_a", "key_b"]


async def test_revoke_sets_revoked_at_once(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(datetime(2026, 1, 1, 12, 0, tzinfo=UTC))  # the accounts' time, moved by hand
    monkeypatch.setattr(accounts, "utcnow", clock)
    account_id = await new_account(db)
    key = await new_key(db, account_id)
    other = await new_key(db, account_id)
    async with db.write() as conn:
        assert await accounts.revoke_key(conn, key.id)
    async with db.read() as conn:
        first = {info.id: info for info in await accounts.list_keys(conn)}
    revoked_at = first[key.id].revoked_at
    assert revoked_at is not None
    assert revoked_at.tzinfo is not None
    assert revoked_at == clock.now
    assert first[other.id].revoked_at is None
    clock.advance(1)
    async with db.write() as conn:
        assert await accounts.revoke_key(conn, key.id)  # still True: the key exists
    async with db.read() as conn:
        second = {info.id: info for info in await accounts.list_keys(conn)}
    assert second[key.id].revoked_at == revoked_at


async def test_revoke_unknown_key(db: Database) -> None:
    async with db.write() as conn:
        assert not await accounts.revoke_key(conn, new_id("key"))
        assert not await accounts.revoke_key(conn, "")


async def test_authenticate_returns_a_principal(db: Database) -> None:
    account_id = await new_account(db, tier="development")
    key = await new_key(db, account_id)
    principal = await authenticate(db, key.secret)
    assert principal == accounts.Principal(
        key_id=key.id, account_id=account_id, role="client", tier="development"
    )
    assert not principal.is_admin


async def test_authenticate_production_tier(db: Database) -> None:
    account_id = await new_account(db, tier="production")
    key = await new_key(db, account_id)
    principal = await authenticate(db, key.secret)
    assert principal.tier == "production"


async def test_authenticate_admin_key(db: Database) -> None:
    key = await new_key(db, role="admin")
    principal = await authenticate(db, key.secret)
    assert principal.role == "admin"
    assert principal.is_admin
    assert principal.account_id is None
    assert principal.key_id == key.id


async def test_authenticate_live_key_on_production_instance(db: Database) -> None:
    account_id = await new_account(db)
    key = await new_key(db, account_id, environment="production")
    principal = await authenticate(db, key.secret, environment="production")
    assert principal.key_id == key.id


def _assert_unauthorized(error: APIError) -> None:
    assert error.status == 401
    assert error.code == "unauthorized"
    assert error.details == "Authorization"
    assert error.headers == {"WWW-Authenticate": "Bearer"}


async def test_revoked_key_is_refused(db: Database) -> None:
    account_id = await new_account(db)
    key = await new_key(db, account_id)
    await authenticate(db, key.secret)
    async with db.write() as conn:
        await accounts.revoke_key(conn, key.id)
    with pytest.raises(APIError) as info:
        await authenticate(db, key.secret)
    _assert_unauthorized(info.value)
    assert key.secret not in info.value.message


@pytest.mark.parametrize(
    "token",
    [
        "sk_sandbox_" + "x" * 32,
        "sk_sandbox_",
        "sk_test_abc",
        "not-a-key",
        "",
        "sk_sandbox_" + "a" * 200,
    ],
)
async def test_unknown_key_is_refused(db: Database, token: str) -> None:
    account_id = await new_account(db)
    await new_key(db, account_id)
    with pytest.raises(APIError) as info:
        await authenticate(db, token)
    _assert_unauthorized(info.value)


async def test_revoked_and_unknown_keys_get_the_same_answer(db: Database) -> None:
    account_id = await new_account(db)
    key = await new_key(db, account_id)
    async with db.write() as conn:
        await accounts.revoke_key(conn, key.id)
    with pytest.raises(APIError) as revoked:
        await authenticate(db, key.secret)
    with pytest.raises(APIError) as unknown:
        await authenticate(db, "sk_sandbox_" + "y" * 32)
    assert revoked.value.message == unknown.value.message


async def test_key_of_another_environment_is_refused(db: Database) -> None:
    account_id = await new_account(db)
    live = await new_key(db, account_id, environment="production")
    with pytest.raises(APIError) as info:
        await authenticate(db, live.secret, environment="sandbox")
    _assert_unauthorized(info.value)
    assert "sk_live_" in info.value.message
    assert live.secret not in info.value.message
    sandbox = await new_key(db, account_id)
    with pytest.raises(APIError) as info:
        await authenticate(db, sandbox.secret, environment="production")
    _assert_unauthorized(info.value)
    assert "sk_sandbox_" in info.value.message
    assert sandbox.secret not in info.value.message


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer sk_sandbox_abc", "sk_sandbox_abc"),
        ("bearer   sk_sandbox_abc  ", "sk_sandbox_abc"),
        ("  BEARER sk_sandbox_abc", "sk_sandbox_abc"),
    ],
)
def test_bearer_token(header: str, token: str) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer   ", "Basic abc", "sk_sandbox_abc"])
def test_bearer_token_refuses_malformed_headers(header: str | None) -> None:
    with pytest.raises(APIError) as info:
        bearer_token(header)
    _assert_unauthorized(info.value)
