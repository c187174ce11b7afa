"""Alembic migrations, run programmatically on a connection we already hold.

``Database.migrate()`` opens a write transaction (taking an advisory lock on PostgreSQL) and
calls :func:`upgrade_to_head` inside it, so the schema change and the version bump commit
together. ``alembic`` on the command line works too, from ``server/``, for authoring revisions.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parent


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def upgrade_to_head(connection: Connection) -> list[str]:
    """Apply the pending migrations; the revisions applied, oldest first (none: up to date).

    The revision before and after are read in the caller's transaction, which holds the
    migration lock, so another process's migrations are never counted as this one's."""
    before = MigrationContext.configure(connection).get_current_revision()
    command.upgrade(alembic_config(connection), "head")
    after = MigrationContext.configure(connection).get_current_revision()
    if after is None or after == before:
        return []
    scripts = ScriptDirectory.from_config(alembic_config())
    return [script.revision for script in scripts.iterate_revisions(after, before)][::-1]


def describe(revision: str) -> str:
    """A revision's title: the first sentence of its docstring, on one line."""
    script = ScriptDirectory.from_config(alembic_config()).get_revision(revision)
    doc = " ".join((script.doc if script is not None else "").split())
    return doc.split(". ", 1)[0].rstrip(".")
