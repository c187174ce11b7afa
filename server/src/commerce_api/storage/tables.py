"""The schema, as SQLAlchemy Core tables. Migrations under ``migrations/`` create it.

Timestamps are timezone-aware UTC everywhere (``timestamptz`` on PostgreSQL; ISO text on
SQLite, where :class:`UTCDateTime` restores the zone that SQLite does not keep).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    text,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """A datetime that is always timezone-aware UTC in Python, on both backends."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use timestamps.utcnow()")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


accounts = Table(
    "accounts",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("tier", String(20), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    CheckConstraint("tier IN ('development', 'production')", name="tier"),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("account_id", String(64), ForeignKey("accounts.id"), nullable=True),
    Column("role", String(20), nullable=False),
    Column("prefix", String(20), nullable=False),
    Column("last4", String(4), nullable=False),
    # SHA-256 of the whole key, hex. The key itself is never stored.
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime, nullable=True),
    CheckConstraint("role IN ('client', 'admin', 'publishable')", name="role"),
    CheckConstraint("role = 'admin' OR account_id IS NOT NULL", name="client_has_account"),
    Index("ix_api_keys_account_id", "account_id"),
)

# Lists are ordered by (created_at, id). Ids are mixed-case ASCII: compare them bytewise on
# PostgreSQL too (SQLite already does), so both backends order pages identically.
SortableId = String(64).with_variant(String(64, collation="C"), "postgresql")

products = Table(
    "products",
    metadata,
    Column("id", SortableId, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    Column("price_minor", BigInteger, nullable=False),
    Column("category", String(100), nullable=False),
    Column("inventory_count", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("archived_at", UTCDateTime, nullable=True),
    # The catalogue change that last wrote the row (``catalog.repository.next_change``): each
    # process's in-memory catalogue reads the rows above the last change it applied.
    Column("change_seq", BigInteger, nullable=False, server_default=text("0")),
    CheckConstraint("price_minor >= 0", name="price_not_negative"),
    CheckConstraint("inventory_count >= 0", name="inventory_not_negative"),
    # The two list queries: all active products, and active products of one category, both in
    # (created_at, id) order. Partial indexes keep archived rows out of them.
    Index(
        "ix_products_active_order",
        "created_at",
        "id",
        sqlite_where=text("archived_at IS NULL"),
        postgresql_where=text("archived_at IS NULL"),
    ),
    Index(
        "ix_products_active_category_order",
        "category",
        "created_at",
        "id",
        sqlite_where=text("archived_at IS NULL"),
        postgresql_where=text("archived_at IS NULL"),
    ),
    Index("ix_products_change_seq", "change_seq", "id"),
    # No index holds ``inventory_count``: every order changes it, and on PostgreSQL a change of
    # an indexed column cannot be a HOT update (each of the row's indexes gets a new entry).
    # The console's low-stock list reads the active products instead.
)

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


# The condition of the pending orders' partial index, spelled as a query must spell it for
# the planner to use the index: a literal, never a bound parameter.
ORDER_IS_PENDING = "status = 'pending'"

orders = Table(
    "orders",
    metadata,
    Column("id", SortableId, primary_key=True),
    Column("account_id", String(64), ForeignKey("accounts.id"), nullable=False),
    Column("status", String(20), nullable=False),
    Column("customer_id", String(255), nullable=False),
    Column("shipping_address", JSON, nullable=False),
    Column("total_minor", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("fulfilled_at", UTCDateTime, nullable=True),
    Column("canceled_at", UTCDateTime, nullable=True),
    # 1 at creation, one more per change (each status change adds 1, in its own UPDATE), so a
    # webhook receiver can tell a stale delivery of the order from a fresh one.
    Column("version", Integer, nullable=False, server_default="1"),
    # {carrier, number, url} given at fulfilment (issue 29); NULL until then, or without one.
    Column("tracking", JSON(none_as_null=True), nullable=True),
    CheckConstraint("status IN ('pending', 'fulfilled', 'canceled')", name="status"),
    CheckConstraint("total_minor >= 0", name="total_not_negative"),
    # The list queries: an account's orders, optionally by status or customer, in order.
    Index("ix_orders_account_order", "account_id", "created_at", "id"),
    Index("ix_orders_account_status_order", "account_id", "status", "created_at", "id"),
    Index("ix_orders_account_customer_order", "account_id", "customer_id", "created_at", "id"),
    Index("ix_orders_created_order", "created_at", "id"),
    # The console overview's orders and revenue per hour: a range scan on created_at that
    # reads everything it sums from the index (an index-only scan on PostgreSQL).
    Index("ix_orders_created_figures", "created_at", "status", "currency", "total_minor"),
    # The pending-order sweep: only the pending orders, oldest first.
    Index(
        "ix_orders_pending_created",
        "created_at",
        "id",
        sqlite_where=text(ORDER_IS_PENDING),
        postgresql_where=text(ORDER_IS_PENDING),
    ),
)

# The console overview's closed hours (console/figures.py): per hour and currency, the orders
# placed and the revenue (totals of those not canceled). An hour is closed once it ended over
# an hour ago and no order in it is pending: fulfilled and canceled are final, and orders are
# never deleted nor moved, so its figures never change again. How far the rows reach is the
# instance value ``ORDER_HOURS_UNTIL``.
order_hour_figures = Table(
    "order_hour_figures",
    metadata,
    Column("hour", UTCDateTime, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("orders", Integer, nullable=False),
    Column("revenue_minor", BigInteger, nullable=False),
    PrimaryKeyConstraint("hour", "currency"),
)
ORDER_HOURS_UNTIL = "order_hour_figures_until"

order_items = Table(
    "order_items",
    metadata,
    Column("order_id", String(64), ForeignKey("orders.id"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("product_id", String(64), ForeignKey("products.id"), nullable=False),
    # Copied from the catalogue when the order is placed: later edits don't change the order.
    Column("name", String(200), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("unit_price_minor", BigInteger, nullable=False),
    PrimaryKeyConstraint("order_id", "position"),
    CheckConstraint("quantity > 0", name="quantity_positive"),
    Index("ix_order_items_product_id", "product_id"),
)

# The webhook outbox: one row per event, written in the transaction of the change it reports.
events = Table(
    "events",
    metadata,
    Column("id", SortableId, primary_key=True),
    Column("account_id", String(64), ForeignKey("accounts.id"), nullable=False),
    Column("type", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("data", JSON, nullable=False),
    # The order the event is about (its ``data``'s id), for the list's ``order_id`` filter.
    Column("order_id", String(64), nullable=True),
    # The W3C trace context it was recorded in (traced: core.tracing); its deliveries join it.
    Column("traceparent", String(55), nullable=True),
    # The list queries, newest first: an account's events, every account's (admin keys; and
    # the pruning of old events), one order's.
    Index("ix_events_account_order", "account_id", "created_at", "id"),
    Index("ix_events_created_order", "created_at", "id"),
    Index("ix_events_order_id_order", "order_id", "created_at", "id"),
)

# The audit trail (issue 29): who changed what, one row per change, written in the
# transaction of the change (``audit.service.record``). ``changes``: {field: [old, new]}.
audit_events = Table(
    "audit_events",
    metadata,
    Column("id", SortableId, primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("actor_type", String(16), nullable=False),
    Column("actor_id", String(64), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target_type", String(32), nullable=False),
    Column("target_id", String(64), nullable=False),
    Column("changes", JSON, nullable=False),
    CheckConstraint("actor_type IN ('key', 'system')", name="actor_type"),
    # Newest first: the whole list (and the pruning), one target's, one actor's, one action's.
    Index("ix_audit_events_created_order", "created_at", "id"),
    Index("ix_audit_events_target_order", "target_id", "created_at", "id"),
    Index("ix_audit_events_actor_order", "actor_id", "created_at", "id"),
    Index("ix_audit_events_action_order", "action", "created_at", "id"),
)

# Idempotency-Key records, shared by every process through the database.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("scope", String(64), nullable=False),  # the account (or an operator key's id)
    Column("key", String(255), nullable=False),
    Column("fingerprint", String(64), nullable=False),  # SHA-256 of method, path and body
    Column("state", String(20), nullable=False),
    Column("locked_at", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("response_status", Integer, nullable=True),
    Column("response_headers", JSON, nullable=True),
    Column("response_body", LargeBinary, nullable=True),
    PrimaryKeyConstraint("scope", "key"),
    CheckConstraint("state IN ('in_flight', 'done')", name="state"),
    Index("ix_idempotency_keys_created_at", "created_at"),
)

# Instance-wide values the service generates for itself (the sandbox's secret-encryption key).
instance_values = Table(
    "instance_values",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# The condition of the failing endpoints' partial index (the console overview's list): live,
# and disabled or failing since an attempt. A query spells it as this literal text to use it.
ENDPOINT_IS_FAILING = "deleted_at IS NULL AND (enabled = false OR failing_since IS NOT NULL)"

webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", SortableId, primary_key=True),
    Column("account_id", String(64), ForeignKey("accounts.id"), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("description", String(500), nullable=True),
    Column("event_types", JSON, nullable=False),  # [] means every type
    Column("enabled", Boolean, nullable=False),
    Column("disabled_reason", String(200), nullable=True),
    # The first failed attempt since the last success (None: healthy). See dispatcher.py.
    Column("failing_since", UTCDateTime, nullable=True),
    # Signing secrets, encrypted (see crypto.py). The previous one signs too until it expires.
    Column("secret_encrypted", Text, nullable=False),
    Column("previous_secret_encrypted", Text, nullable=True),
    Column("previous_secret_expires_at", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("deleted_at", UTCDateTime, nullable=True),
    Index("ix_webhook_endpoints_account_order", "account_id", "created_at", "id"),
    Index(
        "ix_webhook_endpoints_failing",
        "created_at",
        "id",
        sqlite_where=text(ENDPOINT_IS_FAILING),
        postgresql_where=text(ENDPOINT_IS_FAILING),
    ),
)

# One row per (event, endpoint): the outbox entry the dispatcher claims, retries and closes.
# The condition of the claimed deliveries' partial index: a claim sets a token; closing,
# rescheduling or giving back the delivery clears it (no bound parameter in it, so a query's
# ``claim_token IS NOT NULL`` on the column matches it on both backends).
DELIVERY_IS_CLAIMED = "claim_token IS NOT NULL"

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("event_id", String(64), ForeignKey("events.id"), nullable=False),
    Column("endpoint_id", String(64), ForeignKey("webhook_endpoints.id"), nullable=False),
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", UTCDateTime, nullable=True),
    Column("claim_token", String(64), nullable=True),
    Column("claimed_until", UTCDateTime, nullable=True),
    # When the claim was taken: the dispatcher starts the attempt at once, so a claim that
    # lapses or is given back unfinished stands for an interrupted attempt started then.
    Column("claimed_at", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("event_id", "endpoint_id"),
    CheckConstraint("status IN ('pending', 'succeeded', 'failed')", name="status"),
    Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
    Index("ix_webhook_deliveries_endpoint_id", "endpoint_id"),
    # Attempts in flight per endpoint (``claims.claim_due`` caps them): only the claimed
    # deliveries, a few hundred per dispatcher, not the endpoint's whole history.
    Index(
        "ix_webhook_deliveries_claimed",
        "endpoint_id",
        "claimed_until",
        sqlite_where=text(DELIVERY_IS_CLAIMED),
        postgresql_where=text(DELIVERY_IS_CLAIMED),
    ),
)

webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("event_id", String(64), nullable=False),
    Column("endpoint_id", String(64), nullable=False),
    Column("attempted_at", UTCDateTime, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("duration_ms", Integer, nullable=True),  # None: interrupted, its end unknown
    Column("error", String(500), nullable=True),
    Index("ix_webhook_attempts_delivery", "event_id", "endpoint_id", "attempted_at"),
)

# Operator console sessions (console/): one row per signed-in browser, for an admin key. Only a
# hash of the session token is stored, as for keys; a session ends on sign-out, when its key is
# revoked, or after COMMERCE_CONSOLE_IDLE_SECONDS without a request.
console_sessions = Table(
    "console_sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),  # SHA-256 of the cookie's token, hex
    Column("key_id", String(64), ForeignKey("api_keys.id"), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Index("ix_console_sessions_key_id", "key_id"),
    Index("ix_console_sessions_last_seen_at", "last_seen_at"),
)
