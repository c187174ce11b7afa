"""Product search on PostgreSQL moves off the products' rows (the flash sale's stock decrements,
search at 100,000 products).

0009 kept a product's words in ``products.search``, a generated ``tsvector``: PostgreSQL
computed it again on every stock decrement of every order (27 µs an ``UPDATE`` of a product
row against 13 µs without it), and its GIN index, with ``fastupdate`` on, gathered every new
product's words in a pending list that each search then read whole until a vacuum merged it
(10 ms a search after importing 100,000 products, against 0.05 ms).

Now ``product_search_words`` holds each product's words (the same ``simple`` configuration and
word split as 0009), written by a trigger on ``products`` when a product is inserted or its
name or description is set — in the transaction that changes the product; stock changes set
neither and leave the words alone. Its GIN index has ``fastupdate`` off: the words change only
with a product's text, rarely, and a search never reads a pending list. SQLite is unchanged
(its FTS5 index already lives in tables of its own).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_WORDS = (
    "to_tsvector('simple'::regconfig, regexp_replace({row}name || ' ' || {row}description,"
    " '[^[:alnum:]]+', ' ', 'g'))"
)
_UP = [
    "CREATE TABLE product_search_words ("
    "product_id VARCHAR(64) NOT NULL PRIMARY KEY"
    " REFERENCES products (id) ON DELETE CASCADE,"
    " words tsvector NOT NULL)",
    "INSERT INTO product_search_words (product_id, words) SELECT id, search FROM products",
    "CREATE INDEX ix_product_search_words ON product_search_words USING gin (words)"
    " WITH (fastupdate = off)",
    "CREATE FUNCTION product_search_words() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "  # noqa: S608 - constants only
    "INSERT INTO product_search_words (product_id, words) "
    f"VALUES (NEW.id, {_WORDS.format(row='NEW.')}) "
    "ON CONFLICT (product_id) DO UPDATE SET words = excluded.words; "
    "RETURN NULL; END $$",
    "CREATE TRIGGER product_search_words AFTER INSERT OR UPDATE OF name, description"
    " ON products FOR EACH ROW EXECUTE FUNCTION product_search_words()",
    "DROP INDEX ix_products_search",
    "ALTER TABLE products DROP COLUMN search",
]
_DOWN = [
    "DROP TRIGGER product_search_words ON products",
    "DROP FUNCTION product_search_words()",
    "DROP TABLE product_search_words",
    "ALTER TABLE products ADD COLUMN search tsvector GENERATED ALWAYS AS "
    f"({_WORDS.format(row='')}) STORED",
    "CREATE INDEX ix_products_search ON products USING gin (search)",
]


def _run(statements: list[str]) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    for statement in statements:  # as written: `[:alnum:]` is no bound parameter
        bind.exec_driver_sql(statement)


def upgrade() -> None:
    _run(_UP)


def downgrade() -> None:
    _run(_DOWN)
