"""The full-text search objects, each backend's own: created by migrations, outside
``metadata``."""

from __future__ import annotations

from typing import Any

# Full-text search over products' name and description, in each backend's own index: on
# SQLite an FTS5 table (``product_search``, contentless, migration 0009) whose rows are numbered
# by ``product_search_rows`` (a product id per integer, stable across VACUUM); on PostgreSQL
# ``product_search_words`` (a ``tsvector`` per product, GIN-indexed, migration 0012); each kept
# in step by triggers on ``products``. SQLAlchemy's tables cannot spell them, so they stay out
# of ``metadata`` and the schema comparison (``in_metadata``) skips them by name.
PRODUCT_SEARCH_PREFIX = "product_search"
# Order search by any part of an order id or customer id, each backend's trigram index
# (migration 0019): on SQLite an FTS5 table with the ``trigram`` tokenizer (``order_search``,
# contentless, numbered by ``order_search_rows``) kept in step by a trigger on ``orders``; on
# PostgreSQL ``ix_orders_search``, a GIN index of both columns with ``gin_trgm_ops``.
ORDER_SEARCH_PREFIX = "order_search"
ORDER_SEARCH_INDEX = "ix_orders_search"


def in_metadata(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic's ``include_name`` hook: False for the full-text objects declared above."""
    text_ = name or ""
    if type_ == "table":
        return not text_.startswith((PRODUCT_SEARCH_PREFIX, ORDER_SEARCH_PREFIX))
    return not (type_ == "index" and text_ == ORDER_SEARCH_INDEX)
