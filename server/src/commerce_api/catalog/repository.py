"""Queries for products. Active products are those not archived.

The reads of active products are declared here once, as statements: the read path
(``readpath/reader.py``) runs the same statements compiled to SQL text, without the engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Select,
    String,
    Text,
    UnaryExpression,
    any_,
    bindparam,
    column,
    func,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.engine import Row

from commerce_api.catalog.schemas import ProductSort
from commerce_api.storage import freshness
from commerce_api.storage.executor import Executor
from commerce_api.storage.instance import ensure_value
from commerce_api.storage.tables import products

LIST_COLUMNS = (
    products.c.id,
    products.c.name,
    products.c.description,
    products.c.price_minor,
    products.c.category,
    products.c.created_at,
)
DETAIL_COLUMNS = (*LIST_COLUMNS, products.c.inventory_count, products.c.updated_at)
ACTIVE = products.c.archived_at.is_(None)
LIST_ORDER = (products.c.created_at, products.c.id)


def _active_by_id(id_condition: ColumnElement[bool]) -> Select[Any]:
    return select(*DETAIL_COLUMNS).where(id_condition, ACTIVE)


ACTIVE_PRODUCT = _active_by_id(products.c.id == bindparam("id"))
"""One active product by ``id``."""
ACTIVE_PRODUCTS = _active_by_id(products.c.id == any_(bindparam("ids", type_=ARRAY(Text))))
"""The active ones among a list of ``ids`` (PostgreSQL only: ``id = ANY(ids)``)."""

KEY_COLUMNS = (
    products.c.id,
    products.c.name,
    products.c.price_minor,
    products.c.category,
    products.c.created_at,
)
ACTIVE_KEYS = select(*KEY_COLUMNS).where(ACTIVE).order_by(*LIST_ORDER)
"""Every active product's place in each order (no description), in list order: what the
in-memory catalogue is built from (``readpath.catalog_cache``)."""
ACTIVE_KEYS_AFTER = (
    select(*KEY_COLUMNS)
    .where(
        ACTIVE,
        tuple_(products.c.created_at, products.c.id)
        > tuple_(bindparam("created_at", type_=products.c.created_at.type), bindparam("id")),
    )
    .order_by(*LIST_ORDER)
    .limit(bindparam("limit", type_=BigInteger))
)
"""``ACTIVE_KEYS`` a page at a time: after the product ``(:created_at, :id)``, ``:limit`` at
most (PostgreSQL: plain statements, where a cursor would leave a named prepared statement on a
pooler's server connection)."""
CHANGES = (
    select(*KEY_COLUMNS, products.c.archived_at, products.c.change_seq, products.c.description)
    .where(
        tuple_(products.c.change_seq, products.c.id)
        > tuple_(bindparam("seq", type_=BigInteger), bindparam("id", type_=String))
    )
    .order_by(products.c.change_seq, products.c.id)
    .limit(bindparam("limit", type_=BigInteger))
    .offset(bindparam("skip", type_=BigInteger))  # 0: SQLite's LIMIT always comes with one
)
"""The products written by catalogue changes after the product ``:id`` of change ``:seq``,
in (change, id) order, ``:limit`` at most: the change feed, read a page at a time (with the
description, which the in-memory search indexes)."""
ACTIVE_TEXTS = select(products.c.id, products.c.name, products.c.description).where(ACTIVE)
"""Every active product's words, in no order: what the in-memory search is built from."""
ACTIVE_TEXTS_AFTER = (
    select(products.c.id, products.c.name, products.c.description, products.c.created_at)
    .where(
        ACTIVE,
        tuple_(products.c.created_at, products.c.id)
        > tuple_(bindparam("created_at", type_=products.c.created_at.type), bindparam("id")),
    )
    .order_by(*LIST_ORDER)
    .limit(bindparam("limit", type_=BigInteger))
)
"""``ACTIVE_TEXTS`` a page at a time, in list order after the product ``(:created_at, :id)``
(PostgreSQL): the active products' index in that order serves each page, whatever the
planner knows of the table (in id order, a generic plan read the whole index per page)."""
COUNT_ACTIVE = select(func.count()).select_from(products).where(ACTIVE)
"""How many products are active."""
LIST_ITEMS_SQLITE = select(*LIST_COLUMNS).where(
    products.c.id.in_(select(column("value")).select_from(func.json_each(bindparam("ids"))))
)
"""The list fields of the products whose ids are in the JSON array ``:ids`` (SQLite)."""
LIST_ITEMS_POSTGRESQL = select(*LIST_COLUMNS).where(
    products.c.id == any_(bindparam("ids", type_=ARRAY(Text)))
)
"""The list fields of the products whose ids are in ``:ids`` (PostgreSQL)."""


def active_conditions(category: ColumnElement[str] | str | None) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [ACTIVE]
    if category is not None:
        conditions.append(products.c.category == category)
    return conditions


def by_code_point(dialect: str, column: ColumnElement[str]) -> ColumnElement[str]:
    """``column`` compared by code point, as SQLite and Python compare text, on PostgreSQL
    too (whose default is the database's locale)."""
    return column.collate("C") if dialect == "postgresql" else column


def list_order(dialect: str, sort: ProductSort) -> tuple[UnaryExpression[Any], ...]:
    """The ``ORDER BY`` of a sort: its key, then (created_at, id); ``-key`` is the exact
    reverse of ``key``."""
    key = sort.removeprefix("-")
    first: tuple[ColumnElement[Any], ...] = ()
    if key == "price":
        first = (products.c.price_minor,)
    elif key == "name":
        first = (by_code_point(dialect, products.c.name),)
    columns = (*first, *LIST_ORDER)
    if sort.startswith("-"):
        return tuple(column.desc() for column in columns)
    return tuple(column.asc() for column in columns)


async def count_active(conn: Executor, category: str | None) -> int:
    total = await conn.scalar(
        select(func.count()).select_from(products).where(*active_conditions(category))
    )
    return int(total or 0)


async def page_active(
    conn: Executor,
    category: str | None,
    limit: int,
    offset: int,
    sort: ProductSort = "created_at",
) -> Sequence[Row[Any]]:
    dialect = conn.dialect.name
    result = await conn.execute(
        select(*LIST_COLUMNS)
        .where(*active_conditions(category))
        .order_by(*list_order(dialect, sort))
        .limit(limit)
        .offset(offset)
    )
    return result.all()


async def active_categories(conn: Executor) -> Sequence[Row[Any]]:
    """Each category of active products with their count (``category``, ``product_count``),
    by name (code point order)."""
    result = await conn.execute(
        select(products.c.category, func.count().label("product_count"))
        .where(ACTIVE)
        .group_by(products.c.category)
        .order_by(by_code_point(conn.dialect.name, products.c.category))
    )
    return result.all()


async def get_active(conn: Executor, product_id: str) -> Row[Any] | None:
    """Through the engine, for a write's response (it must see its own uncommitted row; the
    read path's connections cannot)."""
    row: Row[Any] | None = (await conn.execute(ACTIVE_PRODUCT, {"id": product_id})).first()
    return row


_FOR_CHANGE = select(*DETAIL_COLUMNS, products.c.archived_at).where(
    products.c.id == bindparam("id")
)
# FOR NO KEY UPDATE, as the order desk locks products: the row's values before a change stay
# what the change replaces (the audit trail's old values), without waiting for order lines.
_FOR_CHANGE_LOCKED = _FOR_CHANGE.with_for_update(key_share=True)


async def get_for_change(conn: Executor, product_id: str, *, active: bool) -> Row[Any] | None:
    """A product about to change (``active``: only if not archived), locked until the commit
    on PostgreSQL (SQLite's write transaction already excludes every other writer)."""
    row: Row[Any] | None = (await conn.execute(_FOR_CHANGE_LOCKED, {"id": product_id})).first()
    if row is not None and active and row.archived_at is not None:
        return None
    return row


# Every write below changes what the in-memory catalogue shows, so each takes a change number
# (``next_change``) in the same transaction and stamps the rows it writes with it. Stock
# changes by orders do not: list items carry no inventory_count.

# The counter of catalogue changes: one row, so catalogue writers on PostgreSQL take turns on
# its lock from this statement to their commit — a change number is visible only once every
# smaller one is (a reader that sees change n has seen every row of the changes before it).
_NEXT_CHANGE = text(
    "UPDATE instance_values SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT)"
    " WHERE name = 'catalog_version' RETURNING value"  # freshness.CATALOG
)


async def next_change(conn: Executor) -> int:
    """The number of this transaction's catalogue change: every product row it writes carries
    it (``change_seq``), and every process's catalogue applies those rows once it sees the
    counter move (``readpath.catalog_index``)."""
    seq = await conn.scalar(_NEXT_CHANGE)
    if seq is None:  # a database no server has opened yet: the counter starts here
        await ensure_value(conn, freshness.CATALOG, "0")
        seq = await conn.scalar(_NEXT_CHANGE)
    await freshness.touch(conn, freshness.CATALOG)
    return int(seq)


async def insert(conn: Executor, values: Mapping[str, Any]) -> None:
    seq = await next_change(conn)
    await conn.execute(products.insert().values(**values, change_seq=seq))


async def insert_many(conn: Executor, rows: Sequence[Mapping[str, Any]]) -> None:
    if rows:
        seq = await next_change(conn)
        await conn.execute(products.insert(), [{**row, "change_seq": seq} for row in rows])


async def update_active(conn: Executor, product_id: str, values: Mapping[str, Any]) -> bool:
    seq = await next_change(conn)
    result = await conn.execute(
        update(products)
        .where(products.c.id == product_id, ACTIVE)
        .values(**values, change_seq=seq)
        .returning(products.c.id)
    )
    return result.first() is not None


async def update_any(
    conn: Executor, product_id: str, values: Mapping[str, Any], seq: int | None = None
) -> bool:
    """Update a product, archived or not; stamped with ``seq`` (the caller's change, taken
    once for several writes) or a change of its own."""
    if seq is None:
        seq = await next_change(conn)
    result = await conn.execute(
        update(products)
        .where(products.c.id == product_id)
        .values(**values, change_seq=seq)
        .returning(products.c.id)
    )
    return result.first() is not None


async def archive(conn: Executor, product_id: str, at: datetime) -> bool:
    return await update_active(conn, product_id, {"archived_at": at, "updated_at": at})


async def count_all(conn: Executor) -> int:
    return int(await conn.scalar(select(func.count()).select_from(products)) or 0)
