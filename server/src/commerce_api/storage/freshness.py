"""Version stamps for cached data, and how each process learns they changed.

A write that changes cached data calls :func:`bump` inside its transaction: a new random value
for ``auth_version`` (keys) or ``catalog_version`` (the product list) in ``instance_values``.
A write that changes a product's stock without changing the catalogue calls :func:`touch`.

- SQLite (one file, possibly several processes): ``PRAGMA data_version`` on a private
  read-only connection (:class:`SQLiteTracker`) tells whether any other connection committed
  since the last look; only then are the two stamps read again. Every request checks, so a
  revocation is seen by the very next request in every process.
- PostgreSQL: :func:`touch` (and so :func:`bump`) sends ``pg_notify`` in the writing
  transaction, which PostgreSQL delivers to every listener at its commit; each process listens
  on one connection (:class:`PostgresTracker`) and re-reads the stamps, or forgets the products
  it read, only when told. The writing process learns of its own commit at once
  (``Database.on_commit``), before the writer answers: read-your-writes within a process. Other
  processes learn of it when the notification arrives (about a millisecond on one host; the
  bound we promise and test is 100 ms). While the listening connection is down, nothing is
  cached: every request reads the stamps, as if there were no notifications. A connection cut
  off silently (packets dropped, nothing closed) counts as down once its heartbeat
  (``storage.heartbeat``: a notification to itself every 0.5 s) has not come back within 1 s,
  so cached keys and stock stop being served within 2 s of a cut (the reads then meet the
  database's deadlines, ``storage.deadlines``, when the cut is the whole host's).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import text

from commerce_api.core.coalescing import Rounds
from commerce_api.storage.executor import CHANGED, Executor
from commerce_api.storage.faults import log_failure
from commerce_api.storage.heartbeat import Heartbeat
from commerce_api.storage.instance import set_value

if TYPE_CHECKING:
    import asyncpg

    from commerce_api.storage.db import Database

logger = logging.getLogger("commerce_api.readpath")

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
_SELECT_STAMPS = f"SELECT name, value FROM instance_values WHERE name IN ('{AUTH}', '{CATALOG}')"  # noqa: S608


class SQLiteTracker:
    """Re-reads the stamps only when a commit was made since they were read.

    SQLite's ``PRAGMA data_version`` (https://sqlite.org/pragma.html#pragma_data_version),
    asked on the tracker's one connection every time, changes whenever any *other* connection
    — of this process or of any other — has committed; only then are the stamps read again.
    The connection is the tracker's own, read-only (a connection's own commits do not move its
    value) and in autocommit mode: the read transaction of each statement ends with the
    statement (its one row fetched), so the tracker never keeps a checkpoint from folding the
    WAL back into the database.

    The connection belongs to the thread that opened it, the event loop's (``sqlite3``'s
    ``check_same_thread``): a call from any other thread raises ``ProgrammingError``.

    Asking costs ~4 µs (SQLite starts and ends a read: a lock, an ``fstat``, an unlock), an
    eighth of a catalogue read, so the answer is shared by the calls of one event loop step
    and asked again in the next. That is exact. A loop step runs only the callbacks that were
    queued when it began, and a request enters the loop as such a callback (the server's
    ``call_soon_threadsafe`` once it has read the request). So every request served under an
    answer was received before the answer was asked: whatever was committed before such a
    request was sent is in it. The answer is forgotten by a callback queued when it is asked,
    so a request queued after that callback asks again.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._conn = connection
        self._data_version: int | None = None
        self._versions: Versions | None = None
        self._asked: int | None = None  # this loop step's answer (see the class's docstring)

    @classmethod
    def open(cls, path: str) -> SQLiteTracker:
        """A tracker on its own connection to the database file at ``path``."""
        uri = f"{Path(path).resolve().as_uri()}?mode=ro"
        return cls(sqlite3.connect(uri, uri=True, isolation_level=None, timeout=5.0))

    def known(self) -> Versions | None:
        data_version = self._asked
        if data_version is None:
            try:
                data_version = self._conn.execute(_DATA_VERSION).fetchone()[0]
            except sqlite3.ProgrammingError:
                raise  # misuse (another thread, a closed tracker), not an unreadable database
            except sqlite3.Error:
                return None  # current() asks again, and says what failed
            self._share(data_version)
        if data_version == self._data_version:
            return self._versions
        return None

    def _share(self, data_version: int) -> None:
        """Keep ``data_version`` for the rest of this loop step (outside a loop: not at all)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._asked is None:
            loop.call_soon(self._forget)
        self._asked = data_version

    def _forget(self) -> None:
        self._asked = None

    async def current(self) -> Versions | None:
        known = self.known()
        if known is not None:
            return known
        try:
            # data_version first: a commit landing before the stamps are read moves it again,
            # so the next call reads them again — never the other way round.
            data_version = self._conn.execute(_DATA_VERSION).fetchone()[0]
            stamps = dict(self._conn.execute(_SELECT_STAMPS).fetchall())
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            log_failure(logger, exc, "could not read the change stamps")
            return None
        self._versions = Versions(stamps.get(AUTH), stamps.get(CATALOG), data_version)
        self._data_version = data_version
        self._share(data_version)  # as new as the step's answer, or newer
        return self._versions

    async def close(self) -> None:
        self._conn.close()


_DATA_VERSION = "PRAGMA data_version"


RECONNECT_SECONDS = (0.05, 0.2, 1.0, 2.0)  # waits between attempts to listen again


class PostgresTracker:
    """The stamps, read once and kept while PostgreSQL's notifications say nothing changed.

    Each change this process is told of (a notification, or a commit of its own) counts up
    ``data_version`` and, for a stamp, forgets the stamps; the next request reads them again,
    in shared rounds (``coalescing.Rounds``: one round trip for every request waiting then, each
    answer read after its request arrived). A read that a change overtook is used but not kept.
    While the listening connection is down (``listening`` is False), the stamps are read for
    every request and ``data_version`` is None, so no cache trusts them; the connection is
    made again in the background, and everything read before is forgotten. Down means closed,
    or silent: its :class:`~commerce_api.storage.heartbeat.Heartbeat` did not come back (the
    connection is then terminated and another made).
    """

    def __init__(self, pool: asyncpg.Pool, dsn: str | None, db: Database) -> None:
        self._pool = pool
        self._dsn = dsn
        self._options = db.driver_options()  # the deadlines (``storage.deadlines``)
        self._reachability = db.reachability
        self._rounds: Rounds[None, Versions] = Rounds(self._read)
        self._versions: Versions | None = None
        self._changes = 0
        self._listener: asyncpg.Connection | None = None
        self._heartbeat: Heartbeat | None = None
        self._reconnect: asyncio.Task[None] | None = None
        self._closed = False
        self._stop_hearing_commits: Callable[[], None] = lambda: None
        self.listening = False

    @classmethod
    async def open(cls, pool: asyncpg.Pool, dsn: str | None, db: Database) -> PostgresTracker:
        """``dsn``: a direct connection's, where the notifications are listened for; None
        (through a pooler with no ``COMMERCE_DATABASE_LISTEN_URL``): never listening, the
        stamps read for every request and nothing cached on them."""
        tracker = cls(pool, dsn, db)
        tracker._stop_hearing_commits = db.on_commit(tracker.changed)
        if dsn is None:
            logger.warning(
                "the database goes through a pooler and COMMERCE_DATABASE_LISTEN_URL is not set:"
                " not listening for changes; reading the stamps per request"
            )
            return tracker
        try:
            await tracker._listen()
        except Exception as exc:
            log_failure(logger, exc, "could not listen for changes; reading the stamps per request")
            tracker._start_reconnect()
        return tracker

    async def _listen(self) -> None:
        import asyncpg  # here: a process on SQLite (a CLI command) never loads the driver

        assert self._dsn is not None  # open() never listens without one
        connection = await asyncpg.connect(self._dsn, **self._options)
        connection.add_termination_listener(self._lost)
        try:
            await connection.add_listener(CHANNEL, self._notified)
            heartbeat = await Heartbeat.start(connection, lambda: self._silent(connection))
        except BaseException:
            connection.terminate()
            raise
        self._listener, self._heartbeat = connection, heartbeat
        # Listening from here on: whatever was read before may have missed a change.
        self.changed({AUTH, CATALOG})
        self.listening = True

    def _notified(self, _connection: Any, _pid: int, _channel: str, payload: str) -> None:
        self.changed({payload})

    def changed(self, names: set[str]) -> None:
        """Something changed (told by PostgreSQL, or committed by this process)."""
        self._changes += 1
        if names & {AUTH, CATALOG}:
            self._versions = None
        elif self._versions is not None:
            self._versions = replace(self._versions, data_version=self._changes)

    def _silent(self, connection: asyncpg.Connection) -> None:
        """The heartbeat did not come back: down at once, as if the connection were lost, and
        the connection dropped (its termination, told later, is then nobody's)."""
        self._lost(connection)
        connection.terminate()

    def _lost(self, connection: Any) -> None:
        if connection is not self._listener:
            return  # one dropped before (silent), or a connection that never listened
        self.listening = False
        self._versions = None
        self._listener = None
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if not self._closed:
            logger.warning("lost the connection that listens for changes; reconnecting")
            self._start_reconnect()

    def _start_reconnect(self) -> None:
        if self._reconnect is None or self._reconnect.done():
            self._reconnect = asyncio.create_task(self._reconnecting(), name="change-listener")

    async def _reconnecting(self) -> None:
        attempt = 0
        while not self._closed:
            await asyncio.sleep(RECONNECT_SECONDS[min(attempt, len(RECONNECT_SECONDS) - 1)])
            try:
                await self._listen()
            except Exception as exc:
                attempt += 1
                if attempt == 1 or attempt % 30 == 0:
                    logger.warning("still cannot listen for changes (%s)", type(exc).__name__)
            else:
                logger.info("listening for changes again")
                return

    async def _read(self, _callers: list[None]) -> Versions:
        with self._reachability.waiting():
            stamps = dict(await self._pool.fetch(_SELECT_STAMPS))
        return Versions(stamps.get(AUTH), stamps.get(CATALOG))

    def known(self) -> Versions | None:
        return self._versions

    async def current(self) -> Versions | None:
        versions = self.known()
        if versions is not None:
            return versions
        changes = self._changes
        try:
            versions, _ = await self._rounds.join(None)
        except Exception as exc:
            log_failure(logger, exc, "could not read the change stamps")
            return None
        if not self.listening:
            return versions
        versions = replace(versions, data_version=changes)
        if changes == self._changes:  # no change was told while it was read: keep it
            self._versions = versions
        return versions

    async def close(self) -> None:
        self._closed = True
        self._stop_hearing_commits()
        if self._reconnect is not None:
            self._reconnect.cancel()
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self._listener is not None:
            try:
                await self._listener.close()
            except (TimeoutError, OSError):  # cut off while it closed (its deadline ran out)
                self._listener.terminate()
