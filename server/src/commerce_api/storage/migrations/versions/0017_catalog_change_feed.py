"""The catalogue's change feed: each product row says which catalogue change last touched it.

- ``products.change_seq``: the number of the catalogue change (create, update, archive, import)
  that last wrote the row, taken in the writing transaction from the counter
  ``instance_values['catalog_version']`` (which is now that number, in decimal). Each process
  keeps an in-memory index of the catalogue and, when the counter moves, reads only the rows
  whose ``change_seq`` is above the last it applied (``ix_products_change_seq``, by change and id) and applies
  them, instead of reading the whole catalogue again.
- The counter restarts at 0 with every existing row at 0: every process builds its index from
  the whole catalogue once after this migration, as at any start.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "products",
        sa.Column("change_seq", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
    )
    op.create_index("ix_products_change_seq", "products", ["change_seq", "id"])
    op.execute("UPDATE instance_values SET value = '0' WHERE name = 'catalog_version'")


def downgrade() -> None:
    op.drop_index("ix_products_change_seq", table_name="products")
    with op.batch_alter_table("products", recreate="never") as batch:
        batch.drop_column("change_seq")
