"""Events remember the trace they were recorded in (issue 32, "Traces").

- ``events.traceparent``: the W3C ``traceparent`` of the request (or job) whose transaction
  recorded the event, written when tracing is on (``core.tracing``), NULL otherwise; the
  dispatcher's delivery-attempt spans are its children, so an order's webhook deliveries show
  in the order request's trace though they happen later, in another process maybe.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("traceparent", sa.String(55), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("events", recreate="never") as batch:
        batch.drop_column("traceparent")
