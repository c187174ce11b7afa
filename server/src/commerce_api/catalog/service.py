"""Catalogue use cases. Rows become wire dicts here; money leaves as JSON numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from commerce_api.accounts.service import Principal
from commerce_api.audit import service as audit
from commerce_api.catalog import repository
from commerce_api.catalog.schemas import ProductCreate, ProductSort, ProductUpdate
from commerce_api.core.errors import not_found
from commerce_api.core.ids import looks_like, new_id
from commerce_api.core.money import to_major, to_minor
from commerce_api.core.pagination import page
from commerce_api.core.timestamps import format_optional_timestamp, format_timestamp, utcnow
from commerce_api.storage.executor import Executor


def list_item(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "description": row.description,
        "price": to_major(row.price_minor),
        "category": row.category,
        "created_at": format_timestamp(row.created_at),
    }


def product_detail(row: Any) -> dict[str, Any]:
    item = list_item(row)
    item["inventory_count"] = row.inventory_count
    item["updated_at"] = format_timestamp(row.updated_at)
    return item


def product_not_found(product_id: str) -> Exception:
    return not_found(f"No product with id `{product_id}`.", "id")


async def list_products(
    conn: Executor,
    *,
    category: str | None,
    limit: int,
    offset: int,
    sort: ProductSort = "created_at",
) -> dict[str, Any]:
    """One page of active products in ``sort`` order (then created_at, id). ``limit`` is
    already clamped. (A search, ``q``, is the read path's: ``ReadPath.search``.)"""
    total = await repository.count_active(conn, category)
    rows = (
        await repository.page_active(conn, category, limit, offset, sort) if offset < total else []
    )
    return page([list_item(row) for row in rows], total, limit, offset)


def category_item(name: str, product_count: int) -> dict[str, Any]:
    return {"name": name, "product_count": product_count}


async def list_categories(conn: Executor) -> dict[str, Any]:
    """Every category of active products, by name, with how many there are."""
    rows = await repository.active_categories(conn)
    return {"data": [category_item(row.category, row.product_count) for row in rows]}


async def get_product(conn: Executor, product_id: str) -> dict[str, Any]:
    """A write's response, read in its transaction. Clients' reads go through the read path
    (``ReadPath.product``), which runs the same statement without the engine."""
    row = await repository.get_active(conn, product_id) if looks_like("prod", product_id) else None
    if row is None:
        raise product_not_found(product_id)
    return product_detail(row)


def _column_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    values = {key: value for key, value in fields.items() if key != "price"}
    if "price" in fields:
        values["price_minor"] = to_minor(fields["price"])
    return values


def _new_product_row(data: ProductCreate, product_id: str | None = None) -> dict[str, Any]:
    now = utcnow()
    return {
        "id": product_id or new_id("prod"),
        **_column_values(data.model_dump()),
        "created_at": now,
        "updated_at": now,
    }


def audited(row: Mapping[str, Any]) -> dict[str, Any]:
    """A product's fields as the audit trail shows them (the API's names and units)."""
    return {
        "name": row["name"],
        "description": row["description"],
        "price": to_major(row["price_minor"]),
        "category": row["category"],
        "inventory_count": row["inventory_count"],
    }


def audited_change(before: Any, values: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The fields ``values`` change in the product row ``before`` (an archived product
    restored by an import: its ``archived_at`` too)."""
    old = dict(before._mapping)
    new = {**old, **values}
    changes = audit.changed(audited(old), audited(new))
    if "archived_at" in values and old["archived_at"] != values["archived_at"]:
        changes["archived_at"] = [
            format_optional_timestamp(old["archived_at"]),
            format_optional_timestamp(values["archived_at"]),
        ]
    return changes


async def create_product(
    conn: Executor, principal: Principal | None, data: ProductCreate
) -> dict[str, Any]:
    """Add a product; audited as ``product.create`` by ``principal`` (None: the CLI)."""
    row = _new_product_row(data)
    await repository.insert(conn, row)
    await audit.record(
        conn,
        audit.actor_of(principal),
        "product.create",
        ("product", row["id"]),
        audit.created(audited(row)),
    )
    return await get_product(conn, row["id"])


async def update_product(
    conn: Executor, principal: Principal | None, product_id: str, data: ProductUpdate
) -> dict[str, Any]:
    """Change some fields; audited as ``product.update`` with each changed field's old and
    new value (nothing recorded when no value changes)."""
    values = {**_column_values(data.changes()), "updated_at": utcnow()}
    before = (
        await repository.get_for_change(conn, product_id, active=True)
        if looks_like("prod", product_id)
        else None
    )
    if before is None or not await repository.update_active(conn, product_id, values):
        raise product_not_found(product_id)
    changes = audited_change(before, values)
    if changes:
        actor = audit.actor_of(principal)
        await audit.record(conn, actor, "product.update", ("product", product_id), changes)
    return await get_product(conn, product_id)


async def archive_product(conn: Executor, principal: Principal | None, product_id: str) -> None:
    """Hide a product from the catalogue; audited as ``product.archive``."""
    now = utcnow()
    if not looks_like("prod", product_id) or not await repository.archive(conn, product_id, now):
        raise product_not_found(product_id)
    await audit.record(
        conn,
        audit.actor_of(principal),
        "product.archive",
        ("product", product_id),
        {"archived_at": [None, format_timestamp(now)]},
    )
