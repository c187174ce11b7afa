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
# (migrations 0019, 0020): on SQLite an FTS5 table with the ``trigram`` tokenizer
# (``order_search``, contentless, numbered by ``order_search_rows``); on PostgreSQL
# ``order_search``, ids under a GIN index with ``gin_trgm_ops``; on both, the queue of orders
# placed since (``order_search_pending``), filled by a trigger on ``orders``.
ORDER_SEARCH_PREFIX = "order_search"


def in_metadata(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic's ``include_name`` hook: False for the full-text objects declared above."""
    if type_ == "table":
        return not (name or "").startswith((PRODUCT_SEARCH_PREFIX, ORDER_SEARCH_PREFIX))
    return True
