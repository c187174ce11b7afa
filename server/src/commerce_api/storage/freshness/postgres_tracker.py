"""The change tracker on PostgreSQL: the stamps kept while the notifications, heard on one
listening connection, say nothing changed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from commerce_api.core.coalescing import Rounds
from commerce_api.storage.faults import log_failure
from commerce_api.storage.freshness.stamps import AUTH, CATALOG, CHANNEL, SELECT_STAMPS, Versions
from commerce_api.storage.heartbeat import Heartbeat

if TYPE_CHECKING:
    import asyncpg

    from commerce_api.storage.db import Database

logger = logging.getLogger("commerce_api.readpath")


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
            stamps = dict(await self._pool.fetch(SELECT_STAMPS))
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
