"""What every ``commerce-api`` command shares: the settings, the database, the output.

Commands print their result (an id or a secret) as the last line of standard output, so
scripts can take it with ``tail -n 1``; explanations go to standard error (:func:`_note`).

The settings and the database are imported when a command first asks for them, not with this
module: ``commerce-api --help`` needs neither, and every command starts sooner for what it
does not import (``tests/cli/test_cli_imports.py``). The operator's commands (accounts, keys,
products, orders, and ``migrate`` on a database at head) open it without the async engine
(``storage.direct``: importing that engine imports SQLAlchemy's ORM, which took longer than
the rest of their start); the server and the worker open a ``Database``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import click

if TYPE_CHECKING:
    from commerce_api.settings import Settings
    from commerce_api.storage.db import Database
    from commerce_api.storage.deadlines import Deadlines
    from commerce_api.storage.direct import DirectDatabase
    from commerce_api.storage.executor import Executor

T = TypeVar("T")


class ConfigurationError(click.ClickException):
    """A setting the service cannot start with: one line on stderr, exit code 2, no traceback."""

    exit_code = 2


def _settings() -> Settings:
    """The settings (and the OTEL_* variables' tracing, checked: ``observability.traces``)."""
    from pydantic import ValidationError

    from commerce_api.observability import traces
    from commerce_api.settings import Settings

    try:
        traces.exporter_names(os.environ)
        return Settings()
    except traces.TracingConfigError as exc:
        raise ConfigurationError(str(exc)) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"COMMERCE_{'_'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigurationError(f"invalid settings: {problems}") from None
    except Exception as exc:
        raise ConfigurationError(f"invalid settings: {' '.join(str(exc).split())}") from None


@asynccontextmanager
async def _opened(settings: Settings, deadlines: Deadlines | None) -> AsyncIterator[Database]:
    from commerce_api.storage.db import Database
    from commerce_api.storage.urls import UnsupportedDatabaseURL

    url, listen_url = settings.database_url, settings.database_listen_url
    try:
        db = Database(url, deadlines=deadlines, listen_url=listen_url)
    except UnsupportedDatabaseURL as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        yield db
    finally:
        await db.dispose()


def _with_database(
    work: Callable[[Database], Awaitable[T]],
    settings: Settings | None = None,
    *,
    deadlines: Deadlines | None = None,
) -> T:
    """Open the configured database, apply pending migrations, run ``work``, close. With
    ``deadlines`` on its waits (the worker's), none for an operator's command. A database at
    head is known to be so without alembic (``storage.direct``, as ``_apply_migrations``)."""
    settings = settings or _settings()

    async def run() -> T:
        async with _opened_direct(settings):
            pass  # migrated
        async with _opened(settings, deadlines) as db:
            return await work(db)

    return asyncio.run(run())


async def _migrated(settings: Settings) -> list[str]:
    """Apply pending migrations to the configured database; the revisions applied."""
    async with _opened(settings, None) as db:
        return await db.migrate()


def _apply_migrations(settings: Settings | None = None) -> list[str]:
    """Apply pending migrations to the configured database; the revisions applied. A database
    at head is known to be so without the async engine (``storage.direct``)."""
    settings = settings or _settings()

    async def run() -> list[str]:
        async with _opened_direct(settings) as (_db, applied):
            return applied

    return asyncio.run(run())


@asynccontextmanager
async def _opened_direct(
    settings: Settings,
) -> AsyncIterator[tuple[DirectDatabase, list[str]]]:
    """The configured database for a short command (``storage.direct``), migrated first, and
    the revisions that applied: pending migrations are applied through a ``Database`` (with
    alembic), as for every command."""
    from commerce_api.storage.direct import open_direct
    from commerce_api.storage.migrations import head_revision
    from commerce_api.storage.urls import UnsupportedDatabaseURL

    try:
        db = await open_direct(settings.database_url)
    except UnsupportedDatabaseURL as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        applied = [] if await db.revision() == head_revision() else await _migrated(settings)
        yield db, applied
    finally:
        await db.close()


def _reading(work: Callable[[Executor], Awaitable[T]]) -> T:
    """``work`` on a connection to the configured database (``storage.direct``), migrated
    first; its transaction rolled back at the end."""

    async def run() -> T:
        async with _opened_direct(_settings()) as (db, _applied), db.read() as conn:
            return await work(conn)

    return asyncio.run(run())


def _writing(work: Callable[[Executor], Awaitable[T]]) -> T:
    """``work`` in a write transaction of the configured database (``storage.direct``),
    migrated first: committed when it returns, rolled back when it raises."""

    async def run() -> T:
        async with _opened_direct(_settings()) as (db, _applied), db.write() as conn:
            return await work(conn)

    return asyncio.run(run())


def _note(message: str) -> None:
    click.echo(message, err=True)
