"""The audit trail: who changed what."""

from __future__ import annotations

from sqlalchemy import JSON, CheckConstraint, Column, Index, String, Table

from commerce_api.storage.tables.schema import SortableId, UTCDateTime, metadata

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
