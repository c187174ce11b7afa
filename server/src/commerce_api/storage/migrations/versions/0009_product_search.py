"""Product search (issue 31): a full-text index of products' name and description, each
backend's own, kept in step by the transaction that changes a product.

SQLite: an FTS5 table, ``product_search``, contentless (the text stays in ``products``; the
index holds only its words). FTS5 finds rows by integer; ``product_search_rows`` gives each
product one (an ``INTEGER PRIMARY KEY``, which VACUUM never renumbers, unlike the implicit
rowid of ``products``). Triggers on ``products`` index a product when it is inserted, re-index
it when its name or description changes, and drop it when it is deleted; the stock changes of
orders touch neither column, so they do not fire. ``remove_diacritics 0``: a letter matches
itself only, as on PostgreSQL.

PostgreSQL: ``products.search``, a ``tsvector`` generated from the same two columns (the
``simple`` configuration: lower-cased words, no stemming, no stop words) and a GIN index.

Both split the text into words at anything but a letter or a digit (PostgreSQL's parser would
otherwise keep e-mail addresses, URLs and ``3.14`` as single words). Every existing product is
indexed here.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_SQLITE_UP = [
    "CREATE TABLE product_search_rows ("
    "id INTEGER PRIMARY KEY, product_id VARCHAR(64) NOT NULL UNIQUE)",
    "CREATE VIRTUAL TABLE product_search USING fts5("
    "name, description, content='', tokenize='unicode61 remove_diacritics 0')",
    "CREATE TRIGGER product_search_insert AFTER INSERT ON products BEGIN "
    "INSERT INTO product_search_rows (product_id) VALUES (new.id); "
    "INSERT INTO product_search (rowid, name, description) "
    "SELECT id, new.name, new.description FROM product_search_rows WHERE product_id = new.id; "
    "END",
    "CREATE TRIGGER product_search_update AFTER UPDATE OF name, description ON products "
    "WHEN old.name IS NOT new.name OR old.description IS NOT new.description BEGIN "
    "INSERT INTO product_search (product_search, rowid, name, description) "
    "SELECT 'delete', id, old.name, old.description FROM product_search_rows "
    "WHERE product_id = old.id; "
    "INSERT INTO product_search (rowid, name, description) "
    "SELECT id, new.name, new.description FROM product_search_rows WHERE product_id = new.id; "
    "END",
    "CREATE TRIGGER product_search_delete AFTER DELETE ON products BEGIN "
    "INSERT INTO product_search (product_search, rowid, name, description) "
    "SELECT 'delete', id, old.name, old.description FROM product_search_rows "
    "WHERE product_id = old.id; "
    "DELETE FROM product_search_rows WHERE product_id = old.id; "
    "END",
    # The products already there, in list order.
    "INSERT INTO product_search_rows (product_id) SELECT id FROM products ORDER BY created_at, id",
    "INSERT INTO product_search (rowid, name, description) "
    "SELECT r.id, p.name, p.description FROM product_search_rows r "
    "JOIN products p ON p.id = r.product_id",
]
_SQLITE_DOWN = [
    "DROP TRIGGER product_search_delete",
    "DROP TRIGGER product_search_update",
    "DROP TRIGGER product_search_insert",
    "DROP TABLE product_search",
    "DROP TABLE product_search_rows",
]
_POSTGRESQL_UP = [
    # Generated (and so filled in for every existing row) by the statement itself.
    "ALTER TABLE products ADD COLUMN search tsvector GENERATED ALWAYS AS (to_tsvector("
    "'simple'::regconfig, regexp_replace(name || ' ' || description, '[^[:alnum:]]+', ' ', 'g')"
    ")) STORED",
    "CREATE INDEX ix_products_search ON products USING gin (search)",
]
_POSTGRESQL_DOWN = [
    "DROP INDEX ix_products_search",
    "ALTER TABLE products DROP COLUMN search",
]


def _run(statements: list[str]) -> None:
    bind = op.get_bind()
    for statement in statements:  # as written: `[:alnum:]` is no bound parameter
        bind.exec_driver_sql(statement)


def upgrade() -> None:
    _run(_SQLITE_UP if op.get_bind().dialect.name == "sqlite" else _POSTGRESQL_UP)


def downgrade() -> None:
    _run(_SQLITE_DOWN if op.get_bind().dialect.name == "sqlite" else _POSTGRESQL_DOWN)
