"""The change stamps and what a write says of its changes: :func:`bump` (a new stamp) and
:func:`touch` (a notification at commit, on PostgreSQL); what every tracker answers
(:class:`Versions`, :class:`ChangeTracker`)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import text

from commerce_api.storage.executor import CHANGED, Executor
from commerce_api.storage.instance import set_value

AUTH = "auth_version"
CATALOG = "catalog_version"
STOCK = "stock"  # a product's inventory changed (no stamp: its readers are told, or re-read)
CHANNEL = "commerce_changes"
_NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', :name)")


@dataclass(frozen=True, slots=True)
class Versions:
    auth: str | None
    catalog: str | None
    # SQLite's ``PRAGMA data_version`` when these were read: it changes with every commit of
    # any other connection, so data read under one value is current until it changes.
    # On PostgreSQL, the count of changes this process has been told of, while it is told
    # of every one (None while the listening connection is down).
    data_version: int | None = None


async def bump(conn: Executor, *names: str) -> None:
    """Mark cached data as changed, inside the caller's transaction."""
    for name in names:
        await set_value(conn, name, secrets.token_hex(8))
        await touch(conn, name)


async def touch(conn: Executor, name: str) -> None:
    """Tell every process's caches, at this transaction's commit, that ``name`` changed.

    On SQLite nothing needs saying: every commit moves the ``data_version`` the readers ask. On
    PostgreSQL a notification for the other processes (delivered at commit, not at all on a
    rollback) and a note for this one (``Database.on_commit``), once per name per transaction.
    """
    if unsaid(conn, name):
        await conn.execute(_NOTIFY, {"name": name})


def unsaid(conn: Executor, name: str) -> bool:
    """Note that ``name`` changes in this transaction (see :func:`touch`); True when the
    notification for it is still to be sent (PostgreSQL, once per name per transaction), by
    the caller's own statement (``notify_sql``) or by :func:`touch`."""
    if conn.dialect.name != "postgresql":
        return False
    changed: set[str] = conn.info.setdefault(CHANGED, set())
    if name in changed:
        return False
    changed.add(name)
    return True


def unsay(conn: Executor, name: str) -> None:
    """Forget that ``name``'s notification was noted as sent in this transaction (``unsaid``):
    the statement that was to send it did not (it wrote nothing). At worst it is sent twice,
    which PostgreSQL delivers once."""
    changed: set[str] | None = conn.info.get(CHANGED)
    if changed is not None:
        changed.discard(name)


def notify_sql(name: str) -> str:
    """The SQL expression that sends the notification for ``name`` (a constant of this
    module): for a statement that does it beside its own work, after :func:`unsaid`."""
    assert name in (AUTH, CATALOG, STOCK)
    return f"pg_notify('{CHANNEL}', '{name}')"


class ChangeTracker(Protocol):
    async def current(self) -> Versions | None:
        """The stamps now; None when they cannot be known (then trust no cache)."""
        ...

    def known(self) -> Versions | None:
        """The stamps when they are known to be current without reading them again (nothing
        changed since they were read), found without waiting (SQLite: one ``PRAGMA
        data_version``); else None, and ``current`` finds them. Spares a request the coroutine
        of ``current`` on the common path."""
        ...

    async def close(self) -> None: ...


# Constant names, no input: not an injection vector.
SELECT_STAMPS = f"SELECT name, value FROM instance_values WHERE name IN ('{AUTH}', '{CATALOG}')"  # noqa: S608
