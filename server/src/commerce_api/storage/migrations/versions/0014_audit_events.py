"""The audit trail (issue 29): ``audit_events``, one row per change by a key or the system.

Each row is written in the transaction of the change it records. Its indexes all end in
``(created_at, id)``, the newest-first list's order: the whole list (and the pruning of rows
past ``COMMERCE_AUDIT_RETENTION_DAYS``), one target's, one actor's, one action's.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from commerce_api.storage.tables import SortableId, UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", SortableId, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("actor_type", sa.String(16), nullable=False),
        sa.Column("actor_id", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_type", sa.String(32), nullable=False),
        sa.Column("target_id", sa.String(64), nullable=False),
        sa.Column("changes", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
        sa.CheckConstraint(
            "actor_type IN ('key', 'system')", name=op.f("ck_audit_events_actor_type")
        ),
    )
    op.create_index("ix_audit_events_created_order", "audit_events", ["created_at", "id"])
    for name, column in (("target", "target_id"), ("actor", "actor_id"), ("action", "action")):
        op.create_index(
            f"ix_audit_events_{name}_order", "audit_events", [column, "created_at", "id"]
        )


def downgrade() -> None:
    for name in ("action", "actor", "target", "created"):
        op.drop_index(f"ix_audit_events_{name}_order", table_name="audit_events")
    op.drop_table("audit_events")
