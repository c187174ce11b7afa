"""Newest-first lists of orders and events with filters and a cursor (issue 31).

- ``events.order_id``: the order an event is about (until now only inside its ``data``),
  filled in for the events there are, with the index ``ix_events_order_id_order``
  ``(order_id, created_at, id)`` for the list's ``order_id`` filter.
- ``ix_events_created_order`` ``(created_at, id)`` replaces ``ix_events_created_at``: the list
  of every account's events pages on it (and the pruning of old events still ranges on it).

The orders' indexes already end in ``(created_at, id)``; a backward scan serves newest first.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_events = sa.table("events", sa.column("data", sa.JSON()), sa.column("order_id", sa.String(64)))


def upgrade() -> None:
    # recreate="never": SQLite adds a column in place; recreating the table would drop it
    # while webhook_deliveries' foreign keys point at it.
    with op.batch_alter_table("events", recreate="never") as batch:
        batch.add_column(sa.Column("order_id", sa.String(64), nullable=True))
    # Every event so far is an order's, and its data is that order: json_extract on SQLite,
    # ->> on PostgreSQL.
    op.execute(sa.update(_events).values(order_id=_events.c.data["id"].as_string()))
    op.create_index("ix_events_order_id_order", "events", ["order_id", "created_at", "id"])
    op.create_index("ix_events_created_order", "events", ["created_at", "id"])
    op.drop_index("ix_events_created_at", table_name="events")


def downgrade() -> None:
    op.create_index("ix_events_created_at", "events", ["created_at"])
    op.drop_index("ix_events_created_order", table_name="events")
    op.drop_index("ix_events_order_id_order", table_name="events")
    with op.batch_alter_table("events", recreate="never") as batch:
        batch.drop_column("order_id")
