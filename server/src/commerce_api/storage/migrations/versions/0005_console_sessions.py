"""Operator console sessions (issue 19): ``console_sessions``.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from commerce_api.storage.tables import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name=op.f("fk_console_sessions_key_id_api_keys")
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_console_sessions")),
    )
    op.create_index("ix_console_sessions_key_id", "console_sessions", ["key_id"])
    op.create_index("ix_console_sessions_last_seen_at", "console_sessions", ["last_seen_at"])


def downgrade() -> None:
    op.drop_index("ix_console_sessions_last_seen_at", table_name="console_sessions")
    op.drop_index("ix_console_sessions_key_id", table_name="console_sessions")
    op.drop_table("console_sessions")
