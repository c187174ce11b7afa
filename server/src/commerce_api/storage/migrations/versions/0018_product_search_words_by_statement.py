"""PostgreSQL: new products' search words written once per statement, not once per row (issue
42's import of a million products).

0012's trigger ran a PL/pgSQL function for every inserted product, each an ``INSERT … ON
CONFLICT`` of its own: a ``COPY`` of products spent most of its time there (about 100 µs a row
against 65 µs as one statement). Now an insert's words are written by one ``INSERT … SELECT``
per statement, from the statement's transition table (``REFERENCING NEW TABLE``; a ``COPY``
is one statement too). The words, their configuration and word split are 0012's; a change of
a product's name or description still re-indexes it row by row (a trigger with a column list
cannot have a transition table), as before. SQLite is unchanged.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_WORDS = (
    "to_tsvector('simple'::regconfig, regexp_replace(name || ' ' || description,"
    " '[^[:alnum:]]+', ' ', 'g'))"
)
_UP = [
    "DROP TRIGGER product_search_words ON products",
    "CREATE FUNCTION product_search_words_inserted() RETURNS trigger LANGUAGE plpgsql AS $$ "  # noqa: S608 - constants only
    f"BEGIN INSERT INTO product_search_words (product_id, words) SELECT id, {_WORDS} "
    "FROM inserted; RETURN NULL; END $$",
    "CREATE TRIGGER product_search_words_insert AFTER INSERT ON products"
    " REFERENCING NEW TABLE AS inserted"
    " FOR EACH STATEMENT EXECUTE FUNCTION product_search_words_inserted()",
    "CREATE TRIGGER product_search_words AFTER UPDATE OF name, description"
    " ON products FOR EACH ROW EXECUTE FUNCTION product_search_words()",
]
_DOWN = [
    "DROP TRIGGER product_search_words ON products",
    "DROP TRIGGER product_search_words_insert ON products",
    "DROP FUNCTION product_search_words_inserted()",
    "CREATE TRIGGER product_search_words AFTER INSERT OR UPDATE OF name, description"
    " ON products FOR EACH ROW EXECUTE FUNCTION product_search_words()",
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
