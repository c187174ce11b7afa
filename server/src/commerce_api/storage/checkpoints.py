"""SQLite's checkpoints off the request path: a thread of the serving process that folds the
write-ahead log back into the database file, instead of the commit that happens to cross
SQLite's threshold.

By default SQLite checkpoints inside a commit: the connection whose commit takes the WAL past
``wal_autocheckpoint`` pages (1,000) copies them into the database file and syncs it before its
commit returns. At a million products that is ~100 ms or more once every ~80 catalogue edits
(each writes ~15 pages), paid by one request and by every write queued behind it. The serving
process's connections turn that off (``wal_autocheckpoint=0``) and this thread runs a
``PASSIVE`` checkpoint every second on a connection of its own: it copies what no reader still
needs, waits for no lock, and writers keep appending to the log meanwhile (sqlite.org/wal.html,
"Checkpointing"). A checkpoint with nothing to copy reads the WAL's index and returns; one that
fails is logged and tried again a second later.
Other processes (the CLI, a ``worker``) keep SQLite's own checkpoints; so does the last
connection to close the file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from urllib.parse import quote

from commerce_api.storage.sqlite import configure_sqlite_connection

logger = logging.getLogger("commerce_api.storage")

CHECKPOINT_EVERY_SECONDS = 1.0


class WalCheckpointer:
    def __init__(self, path: str, every: float | None = None) -> None:
        self._path = path
        self._every = CHECKPOINT_EVERY_SECONDS if every is None else every
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the checkpoint in progress, if any (the thread is joined)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(self._every):
            try:
                self._checkpoint()
            except sqlite3.Error:
                logger.exception("a checkpoint of the SQLite database failed")

    def _checkpoint(self) -> None:
        if not os.path.exists(self._path):  # not made yet: nothing to checkpoint
            return
        # A connection a round (~0.1 ms to open): it sees the file as it is now (in WAL mode
        # once the engine has opened it), and never makes the file itself (``mode=rw``).
        conn = sqlite3.connect(f"file:{quote(self._path)}?mode=rw", uri=True, isolation_level=None)
        try:
            configure_sqlite_connection(conn, busy_seconds=0.0, autocheckpoint=False)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            conn.close()
