"""Products and keys in the audit trail, on both backends: each change writes its row with its
actor and its fields' old and new values, in the change's transaction — a refused or failed
change leaves none."""

from __future__ import annotations

import json

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.accounts.service import CreatedKey, Principal
from commerce_api.audit import keys as audited_keys
from commerce_api.audit import repository as audit_repository
from commerce_api.audit.repository import AuditFilter
from commerce_api.catalog import importing
from commerce_api.catalog import service as catalog
from commerce_api.catalog.schemas import ProductUpdate
from commerce_api.core.pagination import WHOLE_LIST
from commerce_api.settings import Settings
from commerce_api.storage.db import Database
from tests import factories
from tests.audit.helpers import by, key_actor, trail
from tests.helpers import bearer


class Crash(Exception):
    """Injected after a change, inside its transaction."""


async def rows_in(conn: AsyncConnection, target_id: str) -> int:
    """The target's rows as the transaction ``conn`` sees them."""
    return await audit_repository.count(conn, AuditFilter(target_id, None, None, WHOLE_LIST))


def principal_of(key: CreatedKey) -> Principal:
    return Principal(key_id=key.id, account_id=key.account_id, role=key.role, tier="development")


async def test_product_create_update_archive_are_recorded_with_the_admin_key(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey
) -> None:
    product = await factories.create_product(client, admin.secret, price=12.5, inventory_count=3)
    pid = product["id"]
    changed = await client.patch(
        f"/v1/products/{pid}",
        json={"price": 10, "inventory_count": 7, "name": "Notebook"},  # the name is the same
        headers=bearer(admin.secret),
    )
    assert changed.status_code == 200, changed.text
    same = await client.patch(
        f"/v1/products/{pid}", json={"inventory_count": 7}, headers=bearer(admin.secret)
    )
    assert same.status_code == 200  # no value changed: nothing recorded
    archived = await client.delete(f"/v1/products/{pid}", headers=bearer(admin.secret))
    assert archived.status_code == 204

    rows = await trail(db, target_id=pid)
    assert [row["action"] for row in rows] == [
        "product.create",
        "product.update",
        "product.archive",
    ]
    assert {by(row) for row in rows} == {key_actor(admin.id)}
    assert all(row["target"] == {"type": "product", "id": pid} for row in rows)
    assert rows[0]["changes"] == {
        "name": [None, "Notebook"],
        "description": [None, ""],
        "price": [None, 12.5],
        "category": [None, "stationery"],
        "inventory_count": [None, 3],
    }
    assert rows[1]["changes"] == {"price": [12.5, 10], "inventory_count": [3, 7]}
    assert list(rows[2]["changes"]) == ["archived_at"]
    assert rows[2]["changes"]["archived_at"][0] is None


async def test_refused_product_changes_leave_no_row(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey
) -> None:
    product = await factories.create_product(client, admin.secret)
    before = await trail(db)
    invalid = await client.patch(
        f"/v1/products/{product['id']}", json={"price": -1}, headers=bearer(admin.secret)
    )
    assert invalid.status_code == 400
    unknown = await client.patch(
        "/v1/products/prod_unknown", json={"price": 1}, headers=bearer(admin.secret)
    )
    assert unknown.status_code == 404
    gone = await client.delete("/v1/products/prod_unknown", headers=bearer(admin.secret))
    assert gone.status_code == 404
    assert await trail(db) == before


async def test_a_crash_after_the_change_rolls_back_the_change_and_its_row(
    db: Database, admin: CreatedKey
) -> None:
    product_id = await factories.new_product(db, stock=5)

    async def update_then_crash() -> None:
        async with db.write() as conn:
            update = ProductUpdate.model_validate({"inventory_count": 50})
            await catalog.update_product(conn, principal_of(admin), product_id, update)
            assert await rows_in(conn, product_id) == 1  # written, not yet committed
            raise Crash

    with pytest.raises(Crash):
        await update_then_crash()
    assert await trail(db, target_id=product_id) == []
    async with db.read() as conn:
        assert (await catalog.get_product(conn, product_id))["inventory_count"] == 5

    async with db.write() as conn:  # and without the crash, both are kept
        update = ProductUpdate.model_validate({"inventory_count": 50})
        await catalog.update_product(conn, principal_of(admin), product_id, update)
    (row,) = await trail(db, target_id=product_id)
    assert row["changes"] == {"inventory_count": [5, 50]}


async def test_an_import_records_each_product_it_creates_and_changes_as_the_cli(
    db: Database,
) -> None:
    product_id = await factories.new_product(db, stock=1, price_minor=500)
    records = [
        {"id": product_id, "inventory_count": 9},
        {"name": "Pen", "price": 1.5, "category": "stationery", "inventory_count": 4},
    ]
    async with db.write() as conn:
        result = await importing.import_products(conn, None, records)
    assert (result.created, result.updated) == (1, 1)
    rows = await trail(db)
    assert {by(row) for row in rows} == {("system", "cli")}
    update, create = sorted(rows, key=lambda row: row["action"], reverse=True)
    assert update["action"] == "product.update"
    assert update["changes"] == {"inventory_count": [1, 9]}
    assert create["action"] == "product.create"
    assert create["changes"]["name"] == [None, "Pen"]

    with pytest.raises(importing.InvalidImport):  # all or nothing, its rows too
        async with db.write() as conn:
            await importing.import_products(conn, None, [records[1], {"id": "prod_nope"}])
    assert len(await trail(db)) == 2


async def test_keys_created_and_revoked_are_recorded_without_their_secret(
    db: Database, settings: Settings, admin: CreatedKey
) -> None:
    account_id = await factories.new_account(db)
    async with db.write() as conn:
        key = await audited_keys.create_key(
            conn, principal_of(admin), settings.environment, account_id=account_id
        )
    async with db.write() as conn:
        assert await audited_keys.revoke_key(conn, None, key.id)
    async with db.write() as conn:
        assert not await audited_keys.revoke_key(conn, None, "key_unknown")  # nothing recorded
    created, revoked = await trail(db, target_id=key.id)
    assert (created["action"], by(created)) == ("key.create", key_actor(admin.id))
    assert created["changes"] == {"role": [None, "client"], "account_id": [None, account_id]}
    assert (revoked["action"], by(revoked)) == ("key.revoke", ("system", "cli"))
    assert list(revoked["changes"]) == ["revoked_at"]
    text = json.dumps(await trail(db))
    assert key.secret not in text
    assert "hash" not in text
