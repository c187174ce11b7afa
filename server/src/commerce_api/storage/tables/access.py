"""Who may call: the accounts, their API keys, and the console's sessions of an admin key."""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Column, ForeignKey, Index, String, Table

from commerce_api.storage.tables.schema import UTCDateTime, metadata

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
