"""Order search by any part of an order id or customer id (issue 45): the console's ``bob``
finds ``cus_bob``'s orders, an id's first characters find the order. Each backend indexes
the trigrams (every run of three characters) of both ids, so a search of three characters or
more reads the index, not every order; both match case-insensitively.

SQLite: an FTS5 table with the ``trigram`` tokenizer, ``order_search``, contentless (the ids
stay in ``orders``), its rows numbered by ``order_search_rows`` (an ``INTEGER PRIMARY KEY``,
which VACUUM never renumbers, as 0009's ``product_search_rows``). A trigger on ``orders``
indexes an order when it is inserted — in the statement, so in the transaction, that writes
it: an order is never there without its search row, whatever batch wrote it. An order's ids
never change, so no update trigger; a deleted order leaves the index with it.

PostgreSQL: the ``pg_trgm`` extension and a GIN index of both columns' trigrams,
``ix_orders_search``, which ``ILIKE '%…%'`` reads. ``pg_trgm`` is a trusted extension
(PostgreSQL 13 on): the database's owner creates it, as the deployment guide's role is; a role
that may not is told what to ask a superuser for. The index keeps ``fastupdate`` on (unlike
the products' words): orders are inserted all day, and a new order's entries are gathered in
the index's pending list rather than each written into the tree at once.

Every existing order is indexed here.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from alembic import op
from sqlalchemy.exc import DBAPIError

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_SQLITE_UP = [
    "CREATE TABLE order_search_rows (id INTEGER PRIMARY KEY, order_id VARCHAR(64) NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE order_search USING fts5("
    "order_id, customer_id, content='', tokenize='trigram')",
    "CREATE TRIGGER order_search_insert AFTER INSERT ON orders BEGIN "
    "INSERT INTO order_search_rows (order_id) VALUES (new.id); "
    "INSERT INTO order_search (rowid, order_id, customer_id) "
    "VALUES (last_insert_rowid(), new.id, new.customer_id); "
    "END",
    "CREATE TRIGGER order_search_delete AFTER DELETE ON orders BEGIN "
    "INSERT INTO order_search (order_search, rowid, order_id, customer_id) "
    "SELECT 'delete', id, old.id, old.customer_id FROM order_search_rows "
    "WHERE order_id = old.id; "
    "DELETE FROM order_search_rows WHERE order_id = old.id; "
    "END",
    # The orders already there, oldest first.
    "INSERT INTO order_search_rows (order_id) SELECT id FROM orders ORDER BY created_at, id",
    "INSERT INTO order_search (rowid, order_id, customer_id) "
    "SELECT r.id, o.id, o.customer_id FROM order_search_rows r JOIN orders o ON o.id = r.order_id",
]
_SQLITE_DOWN = [
    "DROP TRIGGER order_search_delete",
    "DROP TRIGGER order_search_insert",
    "DROP TABLE order_search",
    "DROP TABLE order_search_rows",
]
_POSTGRESQL_UP = [
    "CREATE INDEX ix_orders_search ON orders USING gin (id gin_trgm_ops, customer_id gin_trgm_ops)",
]
_POSTGRESQL_DOWN = ["DROP INDEX ix_orders_search"]

_NO_TRGM = (
    "Order search needs PostgreSQL's pg_trgm extension, which this database role may not "
    "create. Ask a superuser to run CREATE EXTENSION pg_trgm; in this database (on Debian it "
    "comes with the postgresql package; elsewhere with postgresql-contrib), then migrate again."
)


def _create_pg_trgm() -> None:
    """``pg_trgm`` in this database: there already, or created now (in a savepoint, so a
    refusal leaves the migration's transaction usable to say why)."""
    bind = op.get_bind()
    found = bind.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").first()
    if found is not None:
        return
    try:
        with bind.begin_nested():
            bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DBAPIError as exc:
        raise RuntimeError(_NO_TRGM) from exc


def _run(statements: list[str]) -> None:
    bind = op.get_bind()
    for statement in statements:
        bind.exec_driver_sql(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _run(_SQLITE_UP)
        return
    _create_pg_trgm()
    _run(_POSTGRESQL_UP)


def downgrade() -> None:
    # The extension stays: other objects of the database may have come to use it.
    _run(_SQLITE_DOWN if op.get_bind().dialect.name == "sqlite" else _POSTGRESQL_DOWN)
