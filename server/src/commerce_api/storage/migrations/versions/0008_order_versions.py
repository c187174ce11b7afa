"""Order versions (issue 31): ``orders.version``, 1 at creation and one more per change.

Every order and order event gets its exact version: the only changes an order has had are
``pending`` → ``fulfilled`` and ``pending`` → ``canceled``, each at most once, so an order
still pending is at version 1 and any other at 2; an ``order.created`` event's ``data`` is
the order at version 1, an ``order.fulfilled`` or ``order.canceled`` event's at 2 (the events
kept, 30 days of them, get ``version`` in their ``data``: ``json_set`` on SQLite, jsonb's
``||`` on PostgreSQL).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_orders = sa.table("orders", sa.column("status", sa.String(20)), sa.column("version", sa.Integer))


def upgrade() -> None:
    # recreate="never": SQLite adds a column in place (order_items' foreign keys point here).
    with op.batch_alter_table("orders", recreate="never") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
    op.execute(sa.update(_orders).where(_orders.c.status != "pending").values(version=2))
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "UPDATE events SET data = json_set(data, '$.version', "
            "CASE WHEN type = 'order.created' THEN 1 ELSE 2 END)"
        )
    else:
        op.execute(
            "UPDATE events SET data = (data::jsonb || jsonb_build_object('version', "
            "CASE WHEN type = 'order.created' THEN 1 ELSE 2 END))::json"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("UPDATE events SET data = json_remove(data, '$.version')")
    else:
        op.execute("UPDATE events SET data = (data::jsonb - 'version')::json")
    with op.batch_alter_table("orders", recreate="never") as batch:
        batch.drop_column("version")
