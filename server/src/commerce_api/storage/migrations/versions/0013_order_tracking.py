"""Tracking on fulfilment (issue 29): ``orders.tracking``, nullable JSON.

``{carrier, number, url}`` as given to ``POST /v1/orders/{id}/fulfill``; NULL for every order
there is (none was fulfilled with tracking before). The events kept are left as they are:
their ``data`` has no ``tracking`` field, which a receiver reads as null (docs/design.md).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # recreate="never": SQLite adds a column in place (order_items' foreign keys point here).
    with op.batch_alter_table("orders", recreate="never") as batch:
        batch.add_column(sa.Column("tracking", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("orders", recreate="never") as batch:
        batch.drop_column("tracking")
