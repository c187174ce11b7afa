"""The webhooks: the events (the outbox), the endpoints, one delivery per event and endpoint,
and the history of attempts."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    text,
)

from commerce_api.storage.tables.schema import SortableId, UTCDateTime, metadata

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
    # The first failed attempt since the last success (None: healthy). See webhooks/recording.py.
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
