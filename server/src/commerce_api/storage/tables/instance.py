"""Values the instance keeps about itself."""

from __future__ import annotations

from sqlalchemy import Column, String, Table, Text

from commerce_api.storage.tables.schema import UTCDateTime, metadata

# Instance-wide values the service generates for itself (the sandbox's secret-encryption key).
instance_values = Table(
    "instance_values",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
