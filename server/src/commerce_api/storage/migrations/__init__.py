"""Alembic migrations, run programmatically on a connection we already hold.

``Database.migrate()`` opens a write transaction (taking an advisory lock on PostgreSQL) and
calls :func:`upgrade_to_head` inside it, so the schema change and the version bump commit
together. ``alembic`` on the command line works too, from ``server/``, for authoring revisions.

alembic is imported by the functions that run it, not with this module: importing it takes
longer than the rest of a CLI command's start, and a database already at head (every command
but the first) is known to be so without it (:func:`head_revision`, :func:`current_revision`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision, from the file names: ``versions/0018_….py`` holds revision
    ``0018`` (``tests/storage/test_migrations.py`` holds every file and alembic's head to it)."""
    return max(path.name[:4] for path in (MIGRATIONS_DIR / "versions").glob("[0-9]*_*.py"))


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None: none applied yet), from alembic's version table
    (its default name, which env.py keeps)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    version = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return None if version is None else str(version)


def upgrade_to_head(connection: Connection) -> list[str]:
    """Apply the pending migrations; the revisions applied, oldest first (none: up to date).

    The revision before and after are read in the caller's transaction, which holds the
    migration lock, so another process's migrations are never counted as this one's."""
    before = current_revision(connection)
    if before == head_revision():
        return []
    from alembic import command
    from alembic.script import ScriptDirectory

    command.upgrade(alembic_config(connection), "head")
    after = current_revision(connection)
    if after is None or after == before:
        return []
    scripts = ScriptDirectory.from_config(alembic_config())
    return [script.revision for script in scripts.iterate_revisions(after, before)][::-1]


def describe(revision: str) -> str:
    """A revision's title: the first sentence of its docstring, on one line."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config()).get_revision(revision)
    doc = " ".join((script.doc if script is not None else "").split())
    return doc.split(". ", 1)[0].rstrip(".")
