"""SQLite connections: every connection this process opens on the database file is set alike.

SQLite runs in WAL mode with a busy timeout. Python's sqlite3 module would open transactions
lazily and as DEFERRED, so two writers can both read and then fail with "database is locked"
when they upgrade; we take over transaction control instead and start write transactions with
``BEGIN IMMEDIATE``, which makes concurrent writers queue on the busy timeout. Reads use a plain
``BEGIN`` and, thanks to WAL, never wait for writers.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from sqlalchemy import Engine, event

# The execution option of a write transaction: it begins with ``BEGIN IMMEDIATE``.
BEGIN_IMMEDIATE = "commerce_begin_immediate"
# The execution option of a write transaction: the busy timeout (ms) its ``BEGIN IMMEDIATE``
# waits for another process's lock at most (``Database.write``: what is left of its deadline).
BUSY_TIMEOUT_MS = "commerce_busy_timeout_ms"
_BUSY_SET = "commerce_busy_timeout_ms"  # the connection's busy timeout now (its ``info``)


def _ensure_wal(cursor: Any, busy_seconds: float) -> None:
    """Switch the file to WAL (a persistent setting) unless it already is.

    Changing the journal mode needs a moment of exclusive access and SQLite does not apply the
    busy timeout to it, so several processes opening a new file at once would see "database is
    locked". Retry for as long as the busy timeout would have waited.
    """
    deadline = time.monotonic() + busy_seconds
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode")
            mode = cursor.fetchone()[0]
            if str(mode).lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)  # runs on the driver's own thread, not the event loop
            delay = min(delay * 2, 0.2)


# After a checkpoint the WAL file is truncated to at most this size, so a burst of writes does
# not keep its space for ever (and a full disk can recover once the WAL is checkpointed).
SQLITE_JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024
# Pages in the WAL that trigger an automatic checkpoint (SQLite's default, set explicitly).
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 1000
# The serving process's threshold, where a thread checkpoints meanwhile (``storage.checkpoints``).
SQLITE_BACKSTOP_CHECKPOINT_PAGES = 4000


def configure_sqlite_connection(
    conn: Any, busy_seconds: float, autocheckpoint: bool = True
) -> None:
    """The settings of every connection this process opens on the file (the engine's and the
    order writer's): ``conn`` is a DB-API connection or cursor. The file is in WAL mode already
    (see :func:`_ensure_wal`). ``busy_seconds``: how long a write waits for another process's
    lock before "database is locked" (``Deadlines.lock``; a 503 with ``Retry-After``).
    ``autocheckpoint`` False: its commits checkpoint only past 4,000 pages of log (a thread of
    the process checkpoints meanwhile: ``storage.checkpoints``)."""
    # FULL: every commit is fsynced to the WAL, so a committed order survives power loss.
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA busy_timeout={max(1, round(busy_seconds * 1000))}")
    conn.execute(f"PRAGMA journal_size_limit={SQLITE_JOURNAL_SIZE_LIMIT_BYTES}")
    pages = SQLITE_WAL_AUTOCHECKPOINT_PAGES if autocheckpoint else SQLITE_BACKSTOP_CHECKPOINT_PAGES
    conn.execute(f"PRAGMA wal_autocheckpoint={pages}")


def configure_sqlite_engine(
    engine: Engine, busy_seconds: float, autocheckpoint: bool = True
) -> None:
    """Set up each connection ``engine`` opens on the file, and begin its transactions
    ourselves: ``BEGIN IMMEDIATE`` under the :data:`BEGIN_IMMEDIATE` option, else ``BEGIN``;
    under the :data:`BUSY_TIMEOUT_MS` option, with that busy timeout (set only when it changes:
    a write that waited in its process's queue waits that much less for the file). An async
    engine's events are its ``sync_engine``'s."""
    busy_ms = max(1, round(busy_seconds * 1000))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module (see the module docstring).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        _ensure_wal(cursor, busy_seconds)
        configure_sqlite_connection(cursor, busy_seconds, autocheckpoint)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        options = conn.get_execution_options()
        wanted = options.get(BUSY_TIMEOUT_MS)
        if wanted is not None and conn.info.get(_BUSY_SET, busy_ms) != wanted:
            conn.exec_driver_sql(f"PRAGMA busy_timeout={int(wanted)}")
            conn.info[_BUSY_SET] = wanted
        conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(BEGIN_IMMEDIATE) else "BEGIN")
