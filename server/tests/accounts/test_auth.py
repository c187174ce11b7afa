"""API keys: roles, revocation, environments, and storage as a hash only."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import select

from commerce_api.accounts import service as accounts
from commerce_api.accounts.service import CreatedKey
from commerce_api.settings import Environment, Settings
from commerce_api.storage.db import Database
from commerce_api.storage.tables import api_keys
from tests.helpers import bearer, serving
from tests.http.test_error_contract import assert_error

PRODUCT: dict[str, object] = {"name": "Mug", "price": 8.5, "category": "kitchen"}


async def issue_key(
    db: Database,
    environment: Environment = "sandbox",
    role: accounts.Role = "client",
) -> CreatedKey:
    async with db.write() as conn:
        account_id = None
        if role == "client":
            account_id = await accounts.create_account(conn, "Auth test", "development")
        return await accounts.create_key(conn, environment, account_id=account_id, role=role)


def assert_unauthorized(response: httpx.Response) -> str:
    error = assert_error(response, 401, "unauthorized", "Authorization")
    assert response.headers.get("www-authenticate") == "Bearer"
    return error["message"]


@pytest.fixture
async def production_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a production instance on the same database."""
    async with serving(settings.model_copy(update={"environment": "production"})) as http:
        yield http


# --- roles -------------------------------------------------------------------------------------


async def test_client_key_can_list_and_read_products(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    created = await client.post("/v1/products", json=PRODUCT, headers=bearer(admin_key))
    assert created.status_code == 201
    listed = await client.get("/v1/products", headers=bearer(client_key))
    assert listed.status_code == 200
    assert [item["id"] for item in listed.json()["data"]] == [created.json()["id"]]
    fetched = await client.get(f"/v1/products/{created.json()['id']}", headers=bearer(client_key))
    assert fetched.status_code == 200


async def test_client_key_cannot_write_the_catalogue(
    client: httpx.AsyncClient, admin_key: str, client_key: str
) -> None:
    created = await client.post("/v1/products", json=PRODUCT, headers=bearer(admin_key))
    path = f"/v1/products/{created.json()['id']}"
    for response in (
        await client.post("/v1/products", json=PRODUCT, headers=bearer(client_key)),
        await client.patch(path, json={"name": "X"}, headers=bearer(client_key)),
        await client.delete(path, headers=bearer(client_key)),
    ):
        error = assert_error(response, 403, "unauthorized")
        assert "admin" in error["message"]


async def test_admin_key_can_read_and_write_the_catalogue(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    created = await client.post("/v1/products", json=PRODUCT, headers=bearer(admin_key))
    assert created.status_code == 201
    path = f"/v1/products/{created.json()['id']}"
    listed = await client.get("/v1/products", headers=bearer(admin_key))
    assert listed.status_code == 200
    assert listed.json()["pagination"]["total"] == 1
    fetched = await client.get(path, headers=bearer(admin_key))
    assert fetched.status_code == 200
    patched = await client.patch(path, json={"name": "Cup"}, headers=bearer(admin_key))
    assert patched.status_code == 200
    assert patched.json()["name"] == "Cup"
    deleted = await client.delete(path, headers=bearer(admin_key))
    assert deleted.status_code == 204


async def test_bearer_scheme_is_case_insensitive(
    client: httpx.AsyncClient, client_key: str
) -> None:
    response = await client.get("/v1/products", headers={"Authorization": f"bearer {client_key}"})
    assert response.status_code == 200


# --- revocation --------------------------------------------------------------------------------


async def test_revoked_key_is_refused_on_the_next_request(
    client: httpx.AsyncClient, db: Database
) -> None:
    key = await issue_key(db)
    before = await client.get("/v1/products", headers=bearer(key.secret))
    assert before.status_code == 200
    async with db.write() as conn:
        assert await accounts.revoke_key(conn, key.id)
    after = await client.get("/v1/products", headers=bearer(key.secret))
    assert_unauthorized(after)


async def test_revoked_admin_key_can_no_longer_write(
    client: httpx.AsyncClient, db: Database
) -> None:
    key = await issue_key(db, role="admin")
    async with db.write() as conn:
        assert await accounts.revoke_key(conn, key.id)
    response = await client.post("/v1/products", json=PRODUCT, headers=bearer(key.secret))
    assert_unauthorized(response)


async def test_revoking_one_key_leaves_the_accounts_other_keys_working(
    client: httpx.AsyncClient, db: Database, settings: Settings
) -> None:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Rotation", "development")
        old = await accounts.create_key(conn, settings.environment, account_id=account_id)
        new = await accounts.create_key(conn, settings.environment, account_id=account_id)
    async with db.write() as conn:
        assert await accounts.revoke_key(conn, old.id)
    assert_unauthorized(await client.get("/v1/products", headers=bearer(old.secret)))
    assert (await client.get("/v1/products", headers=bearer(new.secret))).status_code == 200


async def test_revoked_and_unknown_keys_get_the_same_answer(
    client: httpx.AsyncClient, db: Database
) -> None:
    key = await issue_key(db)
    async with db.write() as conn:
        await accounts.revoke_key(conn, key.id)
    revoked = assert_unauthorized(await client.get("/v1/products", headers=bearer(key.secret)))
    unknown_secret = key.secret[:-4] + ("AAAA" if not key.secret.endswith("AAAA") else "BBBB")
    unknown = assert_unauthorized(await client.get("/v1/products", headers=bearer(unknown_secret)))
    assert revoked == unknown


# --- environments ------------------------------------------------------------------------------


@pytest.fixture
async def instance(
    request: pytest.FixtureRequest, settings: Settings
) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """An instance of the environment ``request.param``: (that environment, a client of it)."""
    environment: str = request.param
    async with serving(settings.model_copy(update={"environment": environment})) as http:
        yield environment, http


@pytest.mark.parametrize(
    ("instance", "environment", "prefix"),
    [("sandbox", "production", "sk_live_"), ("production", "sandbox", "sk_sandbox_")],
    indirect=["instance"],
)
async def test_a_key_of_the_other_environment_is_refused_saying_why(
    db: Database, instance: tuple[str, httpx.AsyncClient], environment: Environment, prefix: str
) -> None:
    instance_environment, http = instance
    key = await issue_key(db, environment=environment)
    assert key.secret.startswith(prefix)
    message = assert_unauthorized(await http.get("/v1/products", headers=bearer(key.secret)))
    assert instance_environment in message
    assert prefix in message
    assert key.secret not in message


async def test_live_key_works_on_production_instance(
    production_client: httpx.AsyncClient, db: Database
) -> None:
    key = await issue_key(db, environment="production")
    response = await production_client.get("/v1/products", headers=bearer(key.secret))
    assert response.status_code == 200


async def test_unknown_live_key_on_sandbox_instance_is_refused(
    client: httpx.AsyncClient,
) -> None:
    message = assert_unauthorized(
        await client.get("/v1/products", headers=bearer("sk_live_" + "Q" * 32))
    )
    assert "sandbox" in message


# --- storage -----------------------------------------------------------------------------------


async def test_keys_are_stored_only_as_a_sha256_hash(db: Database) -> None:
    issued = [
        await issue_key(db),
        await issue_key(db, role="admin"),
        await issue_key(db, environment="production"),
    ]
    async with db.read() as conn:
        rows = (await conn.execute(select(api_keys))).mappings().all()
    assert len(rows) == len(issued)
    by_id = {row["id"]: row for row in rows}
    for key in issued:
        row = by_id[key.id]
        for column, value in row.items():
            assert key.secret not in str(value), f"the secret is stored in {column}"
            # Nor its random part alone.
            random_part = key.secret.removeprefix(str(row["prefix"]))
            assert random_part not in str(value), f"the key's random part is in {column}"
        assert row["key_hash"] == hashlib.sha256(key.secret.encode()).hexdigest()
        assert row["last4"] == key.secret[-4:]
        assert key.secret.startswith(str(row["prefix"]))
        assert row["role"] == key.role
        assert row["revoked_at"] is None


async def test_key_secrets_are_unique_and_well_formed(db: Database) -> None:
    keys = [await issue_key(db) for _ in range(5)]
    secrets = {key.secret for key in keys}
    assert len(secrets) == 5
    for key in keys:
        assert key.secret.startswith("sk_sandbox_")
        assert key.id.startswith("key_")
        assert len(key.secret.removeprefix("sk_sandbox_")) >= 32
