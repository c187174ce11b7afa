"""The change tracker on SQLite: ``PRAGMA data_version`` on a private read-only connection."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

from commerce_api.storage.faults import log_failure
from commerce_api.storage.freshness.stamps import AUTH, CATALOG, SELECT_STAMPS, Versions

logger = logging.getLogger("commerce_api.readpath")


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
            stamps = dict(self._conn.execute(SELECT_STAMPS).fetchall())
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
