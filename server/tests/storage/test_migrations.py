"""Migrations: idempotent, at head, matching ``storage.tables``, safe to run concurrently."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.accounts import service as accounts
from commerce_api.catalog import search_repository as catalog_search
from commerce_api.orders import search_repository
from commerce_api.storage import migrations
from commerce_api.storage.db import Database
from commerce_api.storage.tables import in_metadata, metadata, orders
from tests.conftest import POSTGRES_ADMIN_URL, _asyncpg_dsn
from tests.helpers import head_revision

EXPECTED_COLUMNS = {
    "accounts": {"id", "name", "tier", "created_at"},
    "api_keys": {
        "id",
        "account_id",
        "role",
        "prefix",
        "last4",
        "key_hash",
        "created_at",
        "revoked_at",
    },
    "products": {
        "id",
        "name",
        "description",
        "price_minor",
        "category",
        "inventory_count",
        "created_at",
        "updated_at",
        "archived_at",
        "change_seq",
    },
}
NULLABLE = {
    "accounts": set[str](),
    "api_keys": {"account_id", "revoked_at"},
    "products": {"archived_at"},
}


def expected_columns(table: str, url: str) -> set[str]:
    """A table's columns (the same on both backends since 0012 moved PostgreSQL's words off
    the products' rows)."""
    del url
    return EXPECTED_COLUMNS[table]


async def current_version(db: Database) -> list[str]:
    async with db.read() as conn:
        result = await conn.execute(text("SELECT version_num FROM alembic_version"))
        values: list[Any] = list(result.scalars())
    return [str(value) for value in values]


def _describe(sync_conn: Connection) -> dict[str, Any]:
    inspector = inspect(sync_conn)
    return {
        "tables": set(inspector.get_table_names()),
        "columns": {
            table: {column["name"]: column for column in inspector.get_columns(table)}
            for table in EXPECTED_COLUMNS
        },
        "indexes": {
            table: {index["name"] for index in inspector.get_indexes(table)}
            for table in EXPECTED_COLUMNS
        },
    }


def _schema_diff(sync_conn: Connection) -> list[Any]:
    context = MigrationContext.configure(
        sync_conn, opts={"compare_type": True, "include_name": in_metadata}
    )
    return list(compare_metadata(context, metadata))


async def test_alembic_version_is_head(db: Database) -> None:
    assert await current_version(db) == [head_revision()]


def test_the_file_names_give_alembics_head() -> None:
    """``migrations.head_revision`` reads the head from the file names, without alembic: each
    file starts with its revision, and the newest is alembic's head."""
    from alembic.script import ScriptDirectory

    scripts = list(ScriptDirectory.from_config(migrations.alembic_config()).walk_revisions())
    assert [Path(script.path).name[:5] for script in scripts] == [
        f"{script.revision}_" for script in scripts
    ]
    assert migrations.head_revision() == head_revision()


async def test_migrate_reads_the_revision_and_does_nothing_at_head(
    empty_database_url: str,
) -> None:
    db = Database(empty_database_url)
    try:
        async with db.read() as conn:
            assert await conn.run_sync(migrations.current_revision) is None
        applied = await db.migrate()
        assert applied[0] == "0001"
        assert applied[-1] == head_revision()
        async with db.read() as conn:
            assert await conn.run_sync(migrations.current_revision) == head_revision()
        assert await db.migrate() == []
    finally:
        await db.dispose()


async def test_migrate_is_idempotent_and_keeps_data(db: Database) -> None:
    async with db.write() as conn:
        account_id = await accounts.create_account(conn, "Keeps")
    await db.migrate()
    await db.migrate()
    assert await current_version(db) == [head_revision()]
    async with db.read() as conn:
        result = await conn.execute(text("SELECT name FROM accounts"))
        names: list[Any] = list(result.scalars())
        found = await conn.scalar(
            text("SELECT id FROM accounts WHERE id = :id"), {"id": account_id}
        )
    assert list(names) == ["Keeps"]
    assert found == account_id


async def test_tables_have_the_expected_columns(db: Database) -> None:
    async with db.read() as conn:
        schema = await conn.run_sync(_describe)
    assert set(EXPECTED_COLUMNS) | {"alembic_version"} <= schema["tables"]
    for table in EXPECTED_COLUMNS:
        assert set(schema["columns"][table]) == expected_columns(table, str(db.url)), table
        nullable = {name for name, info in schema["columns"][table].items() if info["nullable"]}
        assert nullable == NULLABLE[table], table
    assert "ix_api_keys_account_id" in schema["indexes"]["api_keys"]
    assert {"ix_products_active_order", "ix_products_active_category_order"} <= schema["indexes"][
        "products"
    ]


async def test_migrated_schema_matches_the_table_definitions(db: Database) -> None:
    async with db.read() as conn:
        diff = await conn.run_sync(_schema_diff)
    assert diff == []


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param(
            "INSERT INTO accounts (id, name, tier, created_at) "
            "VALUES ('acct_x', 'x', 'gold', CURRENT_TIMESTAMP)",
            id="an-unknown-tier",
        ),
        pytest.param(
            "INSERT INTO api_keys (id, account_id, role, prefix, last4, key_hash, created_at) "
            "VALUES ('key_x', NULL, 'client', 'sk_sandbox_', 'abcd', 'h', CURRENT_TIMESTAMP)",
            id="a-client-key-without-an-account",
        ),
    ],
)
async def test_check_constraints_are_enforced(db: Database, statement: str) -> None:
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(text(statement))


# --- concurrent migrations on a fresh, empty database --------------------------------------------


async def _migrate_concurrently(url: str, tasks: int = 3) -> None:
    databases = [Database(url) for _ in range(tasks)]
    try:
        # Let every task finish before disposing of any engine, then report the first failure.
        results = await asyncio.gather(
            *(database.migrate() for database in databases), return_exceptions=True
        )
    finally:
        for database in databases:
            await database.dispose()
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def _check_migrated(url: str) -> None:
    database = Database(url)
    try:
        assert await current_version(database) == [head_revision()]
        async with database.read() as conn:
            schema = await conn.run_sync(_describe)
            diff = await conn.run_sync(_schema_diff)
    finally:
        await database.dispose()
    for table in EXPECTED_COLUMNS:
        assert set(schema["columns"][table]) == expected_columns(table, url)
    assert diff == []


async def test_concurrent_migrations_on_an_empty_database(
    empty_database_url: str, tmp_path: Path
) -> None:
    """Three tasks, each with its own Database object, migrate one new database at once.

    The race on SQLite is in opening the file, so try several new files (each attempt takes
    a few milliseconds); one database suffices on PostgreSQL.
    """
    urls = [empty_database_url]
    if empty_database_url.startswith("sqlite"):
        urls += [f"sqlite:///{tmp_path / f'fresh-{attempt}.db'}" for attempt in range(29)]
    for url in urls:
        await _migrate_concurrently(url)
        await _check_migrated(url)
    # And once more, concurrently, on a migrated database.
    await _migrate_concurrently(empty_database_url)
    await _check_migrated(empty_database_url)


async def test_concurrent_migrations_on_a_migrated_database(database_url: str) -> None:
    await _migrate_concurrently(database_url)
    await _check_migrated(database_url)


def _migrate_to(revision: str) -> Callable[[Connection], None]:
    """For ``conn.run_sync``: upgrade to ``revision``, or down to it from a ``-`` prefix."""
    from alembic import command

    from commerce_api.storage.migrations import alembic_config

    def run(sync_conn: Connection) -> None:
        if revision.startswith("-"):
            command.downgrade(alembic_config(sync_conn), revision[1:])
        else:
            command.upgrade(alembic_config(sync_conn), revision)

    return run


ACCOUNT_ROW = (
    "INSERT INTO accounts (id, name, tier, created_at) VALUES ('acct_1', 'a', 'development', "
    "'2026-01-01 00:00:00')"
)

Check = Callable[[AsyncConnection], Awaitable[None]]


async def _round_trip(url: str, before: str, rows: Sequence[str], up: Check, down: Check) -> None:
    """On a new database at revision ``before``, insert ``rows``; migrate to head, where ``up``
    checks them and the schema is the tables'; then back to ``before``, where ``down`` does."""
    database = Database(url)
    try:
        async with database.write() as conn:
            await conn.run_sync(_migrate_to(before))
            for row in rows:
                await conn.execute(text(row))
        async with database.write() as conn:
            await conn.run_sync(_migrate_to("head"))
        async with database.read() as conn:
            await up(conn)
            assert not await conn.run_sync(_schema_diff)
        async with database.write() as conn:
            await conn.run_sync(_migrate_to(f"-{before}"))
        async with database.read() as conn:
            await down(conn)
    finally:
        await database.dispose()


async def test_0004_keeps_endpoints_and_deliveries_both_ways(empty_database_url: str) -> None:
    """0004 swaps the endpoint's failure count for ``failing_since`` in place: endpoints and the
    deliveries whose foreign keys point at them survive the upgrade and the downgrade."""
    rows = [
        ACCOUNT_ROW,
        "INSERT INTO events (id, account_id, type, data, created_at) VALUES ('evt_1', 'acct_1', "
        "'order.created', '{}', '2026-01-01 00:00:00')",
        "INSERT INTO webhook_endpoints (id, account_id, url, event_types, enabled, "
        "consecutive_failures, secret_encrypted, created_at, updated_at) VALUES ('we_1', "
        "'acct_1', 'https://example.com/h', '[]', true, 7, 'x', '2026-01-01 00:00:00', "
        "'2026-01-01 00:00:00')",
        "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, created_at, "
        "updated_at) VALUES ('evt_1', 'we_1', 'pending', 0, '2026-01-01 00:00:00', "
        "'2026-01-01 00:00:00')",
    ]

    async def up(conn: AsyncConnection) -> None:
        endpoint = (await conn.execute(text("SELECT * FROM webhook_endpoints"))).one()
        assert (endpoint.id, endpoint.failing_since) == ("we_1", None)
        assert "consecutive_failures" not in endpoint._fields
        assert await conn.scalar(text("SELECT count(*) FROM webhook_deliveries")) == 1

    async def down(conn: AsyncConnection) -> None:
        endpoint = (await conn.execute(text("SELECT * FROM webhook_endpoints"))).one()
        assert (endpoint.id, endpoint.consecutive_failures) == ("we_1", 0)
        assert await conn.scalar(text("SELECT count(*) FROM webhook_deliveries")) == 1

    await _round_trip(empty_database_url, "0003", rows, up, down)


async def test_0006_gives_the_events_written_before_it_their_order_id(
    empty_database_url: str,
) -> None:
    """0006 adds ``events.order_id`` (the list's ``order_id`` filter) and fills it in from each
    event's ``data``; down again, the column goes and the events stay."""
    rows = [ACCOUNT_ROW] + [
        "INSERT INTO events (id, account_id, type, data, created_at) VALUES "
        f"('{event_id}', 'acct_1', 'order.created', "
        f'\'{{"id": "{order_id}", "status": "pending"}}\', '
        "'2026-01-01 00:00:00')"
        for event_id, order_id in [("evt_1", "ord_1"), ("evt_2", "ord_2")]
    ]

    async def up(conn: AsyncConnection) -> None:
        found = await conn.execute(text("SELECT id, order_id FROM events ORDER BY id"))
        assert [tuple(row) for row in found] == [("evt_1", "ord_1"), ("evt_2", "ord_2")]

    async def down(conn: AsyncConnection) -> None:
        assert await conn.scalar(text("SELECT count(*) FROM events")) == 2

    await _round_trip(empty_database_url, "0005", rows, up, down)


async def test_0008_gives_the_orders_and_events_before_it_their_exact_version(
    empty_database_url: str,
) -> None:
    """0008 adds ``orders.version``: a pending order had no change (1), any other one (2); an
    ``order.created`` event's ``data`` gets version 1, a fulfilment's or cancel's 2. Down again,
    the column and the events' ``version`` go and the rows stay."""
    when = "'2026-01-01 00:00:00'"
    orders = [
        "INSERT INTO orders (id, account_id, status, customer_id, "
        "shipping_address, total_minor, currency, created_at, updated_at) "
        f"VALUES ('{order_id}', 'acct_1', '{status}', 'c', '{{}}', 0, 'USD', "
        f"{when}, {when})"
        for order_id, status in [("ord_1", "pending"), ("ord_2", "fulfilled")]
    ]
    events = [
        "INSERT INTO events (id, account_id, type, data, created_at, order_id) "
        f"VALUES ('{event_id}', 'acct_1', '{type_}', "
        f"'{{\"id\": \"{order_id}\"}}', {when}, '{order_id}')"
        for event_id, type_, order_id in [
            ("evt_1", "order.created", "ord_2"),
            ("evt_2", "order.fulfilled", "ord_2"),
        ]
    ]

    async def up(conn: AsyncConnection) -> None:
        versions = await conn.execute(text("SELECT id, version FROM orders ORDER BY id"))
        assert [tuple(row) for row in versions] == [("ord_1", 1), ("ord_2", 2)]
        data = await conn.execute(text("SELECT data FROM events ORDER BY id"))
        assert [_json(row.data) for row in data] == [
            {"id": "ord_2", "version": 1},
            {"id": "ord_2", "version": 2},
        ]

    async def down(conn: AsyncConnection) -> None:
        data = await conn.execute(text("SELECT data FROM events ORDER BY id"))
        assert [_json(row.data) for row in data] == [{"id": "ord_2"}, {"id": "ord_2"}]
        assert await conn.scalar(text("SELECT count(*) FROM orders")) == 2

    await _round_trip(empty_database_url, "0007", [ACCOUNT_ROW, *orders, *events], up, down)


def _json(value: Any) -> Any:
    """A JSON column read with plain SQL: text on SQLite, already decoded by asyncpg or not."""
    return json.loads(value) if isinstance(value, str) else value


async def test_0009_indexes_the_products_before_it_for_search(empty_database_url: str) -> None:
    """0009 adds each backend's full-text index and fills it with the products already there
    (archived ones too: an import may restore them); the triggers (SQLite) or the generated
    column (PostgreSQL) keep it in step from then on. Down again, the index goes and the
    products stay."""
    when = "'2026-01-01 00:00:00'"
    rows = [
        "INSERT INTO products (id, name, description, price_minor, category, inventory_count, "
        f"created_at, updated_at, archived_at) VALUES ('{product_id}', '{name}', "
        f"'{description}', 100, 'books', 1, {when}, {when}, {archived})"
        for product_id, name, description, archived in [
            ("prod_1", "Dotted notebook", "A5", "NULL"),
            ("prod_2", "Pen", "Blue ink, for the notebook", "NULL"),
            ("prod_3", "Old notebook", "", when),
        ]
    ]

    async def up(conn: AsyncConnection) -> None:
        async def found(q: str) -> list[str]:
            dialect = conn.dialect.name
            match = catalog_search.search_match(dialect, catalog_search.search_words(q))
            statement = catalog_search.search_page(dialect, "name", False)
            rows = await conn.execute(statement, {"match": match, "limit": 100, "offset": 0})
            return [row.id for row in rows]

        assert await found("notebook") == ["prod_1", "prod_2"]
        assert await found("ink") == ["prod_2"]
        await conn.execute(text("UPDATE products SET archived_at = NULL WHERE id = 'prod_3'"))
        assert await found("old") == ["prod_3"]

    async def down(conn: AsyncConnection) -> None:
        assert await conn.scalar(text("SELECT count(*) FROM products")) == 3
        schema = await conn.run_sync(_describe)
        assert "product_search" not in schema["tables"]
        assert "search" not in schema["columns"]["products"]  # PostgreSQL's 0009 column

    await _round_trip(empty_database_url, "0008", rows, up, down)


async def test_0012_moves_postgresql_words_off_the_products_and_back(
    empty_database_url: str,
) -> None:
    """0012 (PostgreSQL; nothing on SQLite) moves each product's words into
    ``product_search_words``, kept by a trigger that a stock change does not fire; down again,
    the generated column is back."""
    when = "'2026-01-01 00:00:00'"
    rows = [
        "INSERT INTO products (id, name, description, price_minor, category, inventory_count, "
        f"created_at, updated_at) VALUES ('prod_1', 'Dotted notebook', 'A5', 100, 'books', 5, "
        f"{when}, {when})"
    ]

    async def up(conn: AsyncConnection) -> None:
        async def found(q: str) -> list[str]:
            dialect = conn.dialect.name
            match = catalog_search.search_match(dialect, catalog_search.search_words(q))
            statement = catalog_search.search_page(dialect, "name", False)
            rows = await conn.execute(statement, {"match": match, "limit": 100, "offset": 0})
            return [row.id for row in rows]

        assert await found("dotted") == ["prod_1"]
        await conn.execute(text("UPDATE products SET inventory_count = 4 WHERE id = 'prod_1'"))
        await conn.execute(text("UPDATE products SET name = 'Ruled pad' WHERE id = 'prod_1'"))
        assert await found("dotted") == []
        assert await found("ruled pad") == ["prod_1"]
        if conn.dialect.name == "postgresql":
            schema = await conn.run_sync(_describe)
            assert "search" not in schema["columns"]["products"]

    async def down(conn: AsyncConnection) -> None:
        if conn.dialect.name == "postgresql":
            matched = await conn.scalar(
                text("SELECT id FROM products WHERE search @@ to_tsquery('simple', 'dotted')")
            )
            assert matched == "prod_1"

    await _round_trip(empty_database_url, "0011", rows, up, down)


async def test_0018_indexes_an_insert_statements_products_at_once(
    empty_database_url: str,
) -> None:
    """0018 (PostgreSQL; nothing on SQLite) writes the words of the products an insert
    statement adds in one statement of its own; a rename is still re-indexed row by row; down
    again, 0012's row trigger indexes inserts."""
    when = "'2026-01-01 00:00:00'"

    def insert(*products: tuple[str, str]) -> str:
        values = ", ".join(
            f"('{product_id}', '{name}', 'A5', 100, 'books', 5, {when}, {when})"
            for product_id, name in products
        )
        return (
            "INSERT INTO products (id, name, description, price_minor, category,"
            f" inventory_count, created_at, updated_at) VALUES {values}"
        )

    async def found(conn: AsyncConnection, q: str) -> list[str]:
        dialect = conn.dialect.name
        match = catalog_search.search_match(dialect, catalog_search.search_words(q))
        statement = catalog_search.search_page(dialect, "name", False)
        rows = await conn.execute(statement, {"match": match, "limit": 100, "offset": 0})
        return [row.id for row in rows]

    async def up(conn: AsyncConnection) -> None:
        await conn.execute(text(insert(("prod_2", "Ruled notebook"), ("prod_3", "Grid notebook"))))
        assert await found(conn, "notebook") == ["prod_1", "prod_3", "prod_2"]
        await conn.execute(text("UPDATE products SET name = 'Sketch pad' WHERE id = 'prod_3'"))
        assert await found(conn, "notebook") == ["prod_1", "prod_2"]
        assert await found(conn, "sketch") == ["prod_3"]

    async def down(conn: AsyncConnection) -> None:
        await conn.execute(text(insert(("prod_4", "Plain notebook"))))
        assert await found(conn, "notebook") == ["prod_1", "prod_4"]

    rows = [insert(("prod_1", "Dotted notebook"))]
    await _round_trip(empty_database_url, "0017", rows, up, down)


async def test_0010_admits_publishable_keys_and_keeps_keys_and_console_sessions(
    empty_database_url: str,
) -> None:
    """0010 widens ``api_keys.role`` to ``publishable``. On SQLite that copies the table, which
    the console sessions' foreign keys point at: the keys and the sessions survive both ways;
    down again, only the publishable keys go."""
    when = "'2026-01-01 00:00:00'"
    rows = [
        ACCOUNT_ROW,
        "INSERT INTO api_keys (id, account_id, role, prefix, last4, key_hash, created_at) "
        f"VALUES ('key_client', 'acct_1', 'client', 'sk_sandbox_', 'abcd', 'h1', {when})",
        "INSERT INTO api_keys (id, account_id, role, prefix, last4, key_hash, created_at) "
        f"VALUES ('key_admin', NULL, 'admin', 'sk_sandbox_', 'efgh', 'h2', {when})",
        "INSERT INTO console_sessions (token_hash, key_id, created_at, last_seen_at) "
        f"VALUES ('t1', 'key_admin', {when}, {when})",
    ]
    publishable = (
        "INSERT INTO api_keys (id, account_id, role, prefix, last4, key_hash, created_at) "
        f"VALUES ('key_pk', 'acct_1', 'publishable', 'pk_sandbox_', 'ijkl', 'h3', {when})"
    )

    async def kept(conn: AsyncConnection) -> list[tuple[Any, ...]]:
        keys = await conn.execute(text("SELECT id, role FROM api_keys ORDER BY id"))
        sessions = await conn.execute(text("SELECT token_hash, key_id FROM console_sessions"))
        return [tuple(row) for row in keys] + [tuple(row) for row in sessions]

    async def up(conn: AsyncConnection) -> None:
        assert await kept(conn) == [
            ("key_admin", "admin"),
            ("key_client", "client"),
            ("t1", "key_admin"),
        ]
        indexes = await conn.run_sync(lambda sync: inspect(sync).get_indexes("api_keys"))
        assert "ix_api_keys_account_id" in {index["name"] for index in indexes}

    async def down(conn: AsyncConnection) -> None:
        assert await kept(conn) == [
            ("key_admin", "admin"),
            ("key_client", "client"),
            ("t1", "key_admin"),
        ]

    database = Database(empty_database_url)
    try:
        await _round_trip(empty_database_url, "0009", rows, up, down)
        # At head again, a publishable key is a role the table takes; an unknown one is not.
        await database.migrate()
        async with database.write() as conn:
            await conn.execute(text(publishable))
        from sqlalchemy.exc import IntegrityError

        with pytest.raises(IntegrityError):
            async with database.write() as conn:
                await conn.execute(text(publishable.replace("'publishable'", "'storefront'")))
        # The foreign keys still hold on SQLite's copy.
        with pytest.raises(IntegrityError):
            async with database.write() as conn:
                await conn.execute(
                    text(
                        "INSERT INTO console_sessions (token_hash, key_id, created_at, "
                        f"last_seen_at) VALUES ('t2', 'key_missing', {when}, {when})"
                    )
                )
    finally:
        await database.dispose()


def _order_row(order_id: str, customer_id: str) -> str:
    when = "'2026-01-01 00:00:00'"
    return (
        "INSERT INTO orders (id, account_id, status, customer_id, shipping_address, total_minor,"
        f" currency, created_at, updated_at) VALUES ('{order_id}', 'acct_1', 'pending',"
        f" '{customer_id}', '{{}}', 100, 'USD', {when}, {when})"
    )


async def test_0019_indexes_the_orders_before_it_for_search(empty_database_url: str) -> None:
    """0019 adds each backend's trigram index of orders' ids and customer ids and fills it with
    the orders already there; an order inserted later is found too (queued by 0020's trigger in
    the order's own statement). Down again, the index goes and the orders stay."""
    rows = [ACCOUNT_ROW, _order_row("ord_0001alpha", "cus_bob"), _order_row("ord_0002", "ann")]

    async def up(conn: AsyncConnection) -> None:
        async def found(q: str) -> list[str]:
            condition = search_repository.search_condition(conn.dialect.name, q)
            result = await conn.execute(select(orders.c.id).where(condition).order_by(orders.c.id))
            return list(result.scalars())

        assert await found("bob") == ["ord_0001alpha"]
        assert await found("ALPHA") == ["ord_0001alpha"]
        assert await found("ord_000") == ["ord_0001alpha", "ord_0002"]
        assert await found("ann") == ["ord_0002"]
        await conn.execute(text(_order_row("ord_0003", "cus_bobby")))
        assert await found("bob") == ["ord_0001alpha", "ord_0003"]

    async def down(conn: AsyncConnection) -> None:
        assert await conn.scalar(text("SELECT count(*) FROM orders")) == 2  # up read only
        tables = set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
        assert not {name for name in tables if name.startswith("order_search")}
        assert "ix_orders_search" not in await conn.run_sync(_describe_orders)

    await _round_trip(empty_database_url, "0018", rows, up, down)


async def test_0020_indexes_placed_orders_before_a_search(empty_database_url: str) -> None:
    """0020 keeps what 0019 indexed; an order placed after it is not indexed and found by the
    search all the same; ``index_pending`` indexes it, a bounded number at a time, where it is
    found again. Down to 0019, the rest is indexed first: 0019's own search finds every order."""
    rows = [ACCOUNT_ROW, _order_row("ord_0001alpha", "cus_bob"), _order_row("ord_0002", "ann")]

    async def found(conn: AsyncConnection, q: str) -> list[str]:
        condition = search_repository.search_condition(conn.dialect.name, q)
        result = await conn.execute(select(orders.c.id).where(condition).order_by(orders.c.id))
        return list(result.scalars())

    database = Database(empty_database_url)
    try:
        async with database.write() as conn:
            await conn.run_sync(_migrate_to("0019"))
            for row in rows:
                await conn.execute(text(row))
        async with database.write() as conn:
            await conn.run_sync(_migrate_to("head"))
        async with database.write() as conn:
            assert await search_repository.index_pending(conn, 10) == 0
            assert await found(conn, "bob") == ["ord_0001alpha"]
            await conn.execute(text(_order_row("ord_0003", "cus_BOBBY")))
            await conn.execute(text(_order_row("ord_0004", "cus_bo%b")))
        async with database.write() as conn:
            assert await found(conn, "bob") == ["ord_0001alpha", "ord_0003"]
            assert await found(conn, "o%b") == ["ord_0004"]  # % is a character, not a wildcard
            assert await found(conn, "o_b") == []
            assert await search_repository.index_pending(conn, 1) == 1
            assert await found(conn, "bob") == ["ord_0001alpha", "ord_0003"]
            assert await search_repository.index_pending(conn, 10) == 1
            assert await search_repository.index_pending(conn, 10) == 0
            assert await found(conn, "bob") == ["ord_0001alpha", "ord_0003"]
            assert await found(conn, "o%b") == ["ord_0004"]
            await conn.execute(text(_order_row("ord_0005", "cus_bob")))
        async with database.write() as conn:
            await conn.run_sync(_migrate_to("-0019"))
        async with database.read() as conn:
            if conn.dialect.name == "sqlite":
                matched = text(
                    "SELECT r.order_id FROM order_search_rows r JOIN order_search s "
                    "ON s.rowid = r.id WHERE order_search MATCH '\"bob\"' ORDER BY r.order_id"
                )
            else:
                assert "ix_orders_search" in await conn.run_sync(_describe_orders)
                matched = text(
                    "SELECT id FROM orders WHERE id ILIKE '%bob%' OR customer_id ILIKE '%bob%' "
                    "ORDER BY id"
                )
            assert list((await conn.execute(matched)).scalars()) == [
                "ord_0001alpha",
                "ord_0003",
                "ord_0005",
            ]
    finally:
        await database.dispose()


async def test_sqlite_search_indexes_every_missing_order_after_a_renumbering(
    sqlite_database_url: str,
) -> None:
    """SQLite: should the mark's rowid no longer hold the last order indexed (VACUUM renumbers
    the rowids of ``orders``; that order deleted), ``index_pending`` indexes every order missing
    from the index, and the search finds them all."""
    database = Database(sqlite_database_url)
    try:
        async with database.write() as conn:
            await conn.execute(text(ACCOUNT_ROW))
            for n in range(3):
                await conn.execute(text(_order_row(f"ord_000{n}", f"cus_vac{n}")))
            await search_repository.index_pending(conn, 10)
            await conn.execute(text("DELETE FROM orders WHERE id = 'ord_0002'"))
            for n in range(3, 6):
                await conn.execute(text(_order_row(f"ord_000{n}", f"cus_vac{n}")))
        async with database.write() as conn:
            assert await search_repository.index_pending(conn, 2) == 3  # all missing, at once
            assert await search_repository.index_pending(conn, 2) == 0
            condition = search_repository.search_condition("sqlite", "vac")
            result = await conn.execute(select(orders.c.id).where(condition).order_by(orders.c.id))
            assert list(result.scalars()) == [f"ord_000{n}" for n in (0, 1, 3, 4, 5)]
    finally:
        await database.dispose()


def _describe_orders(sync_conn: Connection) -> set[str]:
    return {str(index["name"]) for index in inspect(sync_conn).get_indexes("orders")}


async def test_0019_names_what_a_superuser_must_do_when_the_role_may_not_create_pg_trgm(
    postgres_url: str,
) -> None:
    """A role that does not own its database (no CREATE on it) may not create ``pg_trgm``:
    ``migrate`` stops at 0019 saying what to ask a superuser for, and goes on once done."""
    suffix = secrets.token_hex(4)
    database, role = f"commerce_no_trgm_{suffix}", f"commerce_no_trgm_{suffix}"
    admin = await asyncpg.connect(_asyncpg_dsn(POSTGRES_ADMIN_URL))
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN")
        await admin.execute(f"CREATE DATABASE {database}")  # owned by the superuser
        inside = await asyncpg.connect(_asyncpg_dsn(_on(POSTGRES_ADMIN_URL, database=database)))
        try:
            await inside.execute(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
            migrating = Database(_on(POSTGRES_ADMIN_URL, database=database, username=role))
            try:
                async with migrating.write() as conn:
                    await conn.run_sync(_migrate_to("0018"))
                with pytest.raises(RuntimeError, match="CREATE EXTENSION pg_trgm;"):
                    async with migrating.write() as conn:
                        await conn.run_sync(_migrate_to("head"))
                assert await current_version(migrating) == ["0018"]
                await inside.execute("CREATE EXTENSION pg_trgm")
                async with migrating.write() as conn:
                    await conn.run_sync(_migrate_to("head"))
                assert await current_version(migrating) == [head_revision()]
            finally:
                await migrating.dispose()
        finally:
            await inside.close()
        await admin.execute(f"DROP DATABASE {database} WITH (FORCE)")
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


def _on(url: str, *, database: str, username: str | None = None) -> str:
    """``url`` on another database, as another role when ``username`` is given."""
    parsed = make_url(url).set(database=database)
    if username is not None:
        parsed = parsed.set(username=username, password=None)
    return parsed.render_as_string(hide_password=False)
