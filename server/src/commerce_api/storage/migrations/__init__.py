"""Alembic migrations, run programmatically on a connection we already hold.

``Database.migrate()`` opens a write transaction (taking an advisory lock on PostgreSQL) and
calls :func:`upgrade_to_head` inside it, so the schema change and the version bump commit
together. ``alembic`` on the command line works too, from ``server/``, for authoring revisions.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parent


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def upgrade_to_head(connection: Connection) -> None:
    command.upgrade(alembic_config(connection), "head")
