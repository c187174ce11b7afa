"""SQLite's checkpoints off the request path: a thread of the serving process that folds the
write-ahead log back into the database file, instead of the commit that happens to cross
SQLite's threshold, while the process writes little.

By default SQLite checkpoints inside a commit: the connection whose commit takes the WAL past
``wal_autocheckpoint`` pages (1,000) copies them into the database file and syncs it before its
commit returns. At a million products that is ~100 ms or more once every ~80 catalogue edits
(each writes ~15 pages), paid by one request and by every write queued behind it. The serving
process's connections raise that threshold to 4,000 pages and this thread runs a ``PASSIVE``
checkpoint every second on a connection of its own: it copies what no reader still needs, waits
for no lock, and writers keep appending to the log meanwhile (sqlite.org/wal.html,
"Checkpointing"). A checkpoint with nothing to copy reads the WAL's index and returns; one that
fails is logged and tried again a second later.

Not while the process writes much: a round after more than ``BUSY_COMMITS`` of its write
transactions committed is skipped. A checkpoint beside a stream of commits slows each of them
(its writes and sync share the disk with theirs; orders placed ~10 % slower, their p99 doubled),
while the commits' own checkpoint at 4,000 pages, one at a time with them, costs them less.
Other processes (the CLI, a ``worker``) keep SQLite's own checkpoints; so does the last
connection to close the file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, event

from commerce_api.storage.sqlite import BEGIN_IMMEDIATE, configure_sqlite_connection

logger = logging.getLogger("commerce_api.storage")

CHECKPOINT_EVERY_SECONDS = 1.0
BUSY_COMMITS = 20  # write transactions committed in a round past which it is skipped


class WalCheckpointer:
    def __init__(self, path: str, every: float | None = None) -> None:
        self._path = path
        self._every = CHECKPOINT_EVERY_SECONDS if every is None else every
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        # Write transactions committed by the engines counted (``count_commits``), and the
        # count at the last round. An int's += under the GIL is enough for a rate.
        self._commits = 0
        self._seen = 0

    def count_commits(self, engine: Engine) -> None:
        """Count the write transactions (``BEGIN IMMEDIATE``) ``engine`` commits."""

        @event.listens_for(engine, "commit")
        def _committed(conn: Any) -> None:
            if conn.get_execution_options().get(BEGIN_IMMEDIATE):
                self._commits += 1

    def writing_much(self) -> bool:
        """Whether more than ``BUSY_COMMITS`` write transactions committed since the last round."""
        commits = self._commits
        busy = commits - self._seen > BUSY_COMMITS
        self._seen = commits
        return busy

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the checkpoint in progress, if any (the thread is joined)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopping.wait(self._every):
            if self.writing_much():
                continue
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
