"""Idempotency-Key records."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Column,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Table,
)

from commerce_api.storage.tables.schema import UTCDateTime, metadata

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
