"""Order search indexed off the order path: a search indexes the orders placed since the last.

0019 indexed each order's trigrams in the statement that wrote the order: on SQLite ~35 FTS5
tokens and a new segment with each batch's commit (about 100 µs of the writer's time per
order, a third of an order's cost), on PostgreSQL a GIN index on ``orders`` whose pending list
an insert now and then had to merge (a batch of orders waiting ~200 ms). Orders are placed all
day; they are searched when an operator looks for one. So a search first indexes the orders
placed since the last one (``orders.search_repository.index_pending``, a bounded number per
search) and matches the orders not indexed yet by reading them. Every committed order is found.

SQLite: no trigger on an order's insert at all (even an empty one costs ~15 µs a row there).
``order_search_mark`` holds the rowid and id of the last order indexed; the orders after it,
by rowid, are the ones not indexed yet (one writer at a time: a committed order's rowid is past
every earlier one's). Should the mark's rowid no longer hold its order (VACUUM renumbers the
rowids of a table without an ``INTEGER PRIMARY KEY``; the last order deleted), the next search
indexes every order missing from ``order_search_rows`` instead. The delete trigger stays.

PostgreSQL: the trigrams move off ``orders`` into ``order_search`` (an order id and its
customer id a row, GIN-indexed with ``gin_trgm_ops``; filled here with every order),
``ix_orders_search`` is dropped, and a statement trigger queues a statement's new orders in
``order_search_pending`` (one call per batch: a batch writes its orders in one statement; ~2 µs
an order). A deleted order leaves ``order_search`` by its foreign key.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_SQLITE_UP = [
    "DROP TRIGGER order_search_insert",
    "CREATE TABLE order_search_mark (order_rowid INTEGER NOT NULL, order_id VARCHAR(64) NOT NULL)",
    # Every order is indexed (0019's trigger did it): the mark is the last of them.
    "INSERT INTO order_search_mark (order_rowid, order_id) "
    "SELECT coalesce(max(rowid), 0), coalesce((SELECT id FROM orders ORDER BY rowid DESC "
    "LIMIT 1), '') FROM orders",
]
# Down: every order not indexed yet is indexed first (``_index_the_rest``).
_SQLITE_DOWN = [
    "DROP TABLE order_search_mark",
    "CREATE TRIGGER order_search_insert AFTER INSERT ON orders BEGIN "
    "INSERT INTO order_search_rows (order_id) VALUES (new.id); "
    "INSERT INTO order_search (rowid, order_id, customer_id) "
    "VALUES (last_insert_rowid(), new.id, new.customer_id); "
    "END",
]
_POSTGRESQL_UP = [
    "CREATE TABLE order_search ("
    "order_id VARCHAR(64) PRIMARY KEY REFERENCES orders (id) ON DELETE CASCADE, "
    "customer_id VARCHAR(255) NOT NULL)",
    "INSERT INTO order_search (order_id, customer_id) SELECT id, customer_id FROM orders",
    "CREATE INDEX ix_order_search_trigrams ON order_search "
    "USING gin (order_id gin_trgm_ops, customer_id gin_trgm_ops)",
    "DROP INDEX ix_orders_search",
    "CREATE TABLE order_search_pending (id BIGSERIAL PRIMARY KEY, order_id VARCHAR(64) NOT NULL)",
    "CREATE FUNCTION order_search_queue() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO order_search_pending (order_id) SELECT id FROM placed ORDER BY id; "
    "RETURN NULL; END $$",
    "CREATE TRIGGER order_search_queue AFTER INSERT ON orders "
    "REFERENCING NEW TABLE AS placed FOR EACH STATEMENT EXECUTE FUNCTION order_search_queue()",
]
_POSTGRESQL_DOWN = [
    "DROP TRIGGER order_search_queue ON orders",
    "DROP FUNCTION order_search_queue()",
    "DROP TABLE order_search_pending",
    "DROP TABLE order_search",
    "CREATE INDEX ix_orders_search ON orders USING gin (id gin_trgm_ops, customer_id gin_trgm_ops)",
]


def _run(statements: list[str]) -> None:
    bind = op.get_bind()
    for statement in statements:
        bind.exec_driver_sql(statement)


def upgrade() -> None:
    _run(_SQLITE_UP if op.get_bind().dialect.name == "sqlite" else _POSTGRESQL_UP)


def _index_the_rest() -> None:
    """SQLite: the orders missing from the index numbered and indexed, oldest first."""
    bind = op.get_bind()
    before = bind.exec_driver_sql("SELECT coalesce(max(id), 0) FROM order_search_rows").scalar()
    bind.exec_driver_sql(
        "INSERT INTO order_search_rows (order_id) SELECT id FROM orders "
        "WHERE id NOT IN (SELECT order_id FROM order_search_rows) ORDER BY rowid"
    )
    bind.exec_driver_sql(
        "INSERT INTO order_search (rowid, order_id, customer_id) SELECT r.id, o.id, "
        "o.customer_id FROM order_search_rows r JOIN orders o ON o.id = r.order_id "
        "WHERE r.id > ?",
        (int(before or 0),),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _index_the_rest()
        _run(_SQLITE_DOWN)
        return
    _run(_POSTGRESQL_DOWN)
