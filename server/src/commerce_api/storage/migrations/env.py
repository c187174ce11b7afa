"""Alembic environment: runs on the connection handed over by ``Database.migrate()``."""

from __future__ import annotations

from alembic import context

from commerce_api.storage.tables import in_metadata, metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only for authoring revisions by hand
    raise RuntimeError("run migrations with `commerce-api migrate`")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    include_name=in_metadata,
)
# The caller owns the transaction (see commerce_api.storage.migrations); don't open another.
context.run_migrations()
