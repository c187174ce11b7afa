"""A read-only view of SQLite's WAL-index header (the ``-shm`` file), one per file per process.

The header changes with every commit of any connection of any process (see
``storage/freshness.py``), so mapping it gives a change signal without a system call.

Why the descriptor is shared and kept open: POSIX record locks belong to the process and the
file, not to the descriptor. Closing *any* descriptor of the ``-shm`` file drops every lock
this process holds on it (fcntl(2), "Record locking"), SQLite's own included. Among them is the
"dead man switch" lock each process holds while it has a connection open: a process that
opens the database and finds nobody holding it takes itself for the only user, truncates the
``-shm`` file and rebuilds it under the feet of the live connections of every other process
(whoever touches its mapping in that moment dies of SIGBUS; read marks and the write lock are
gone too). So the descriptor is opened once per file per process, kept open while anyone here
uses it, and closed only by the last :meth:`WalIndex.release`, which callers make after
closing their own SQLite connections to the file (``Database.dispose``).
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from dataclasses import dataclass

logger = logging.getLogger("commerce_api.storage.db")

# Two copies of the 48-byte WAL-index header (https://sqlite.org/walformat.html).
HEADER_BYTES = 96


@dataclass(slots=True)
class _Open:
    fd: int
    view: mmap.mmap | None
    users: int


_lock = threading.Lock()
_open: dict[str, _Open] = {}


class WalIndex:
    """One user's hold on a database's WAL index: :attr:`view` is the header's shared memory
    (None when it could not be mapped: the user then asks SQLite)."""

    def __init__(self, key: str, view: mmap.mmap | None) -> None:
        self._key: str | None = key
        self.view = view

    def release(self) -> None:
        """Let go (idempotent). The last user's release unmaps and closes the descriptor: call
        it only after this user's SQLite connections to the file are closed."""
        key, self._key, self.view = self._key, None, None
        if key is None:
            return
        with _lock:
            entry = _open[key]
            entry.users -= 1
            if entry.users > 0:
                return
            del _open[key]
            if entry.view is not None:
                entry.view.close()
            os.close(entry.fd)


def acquire(database_path: str) -> WalIndex | None:
    """A hold on this database's WAL index; None when there is no ``-shm`` file to open."""
    key = os.path.realpath(database_path)
    with _lock:
        entry = _open.get(key)
        if entry is None:
            try:
                fd = os.open(f"{key}-shm", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                logger.warning("no WAL index for %s; asking data_version instead", key)
                return None
            view = None
            try:
                view = mmap.mmap(fd, HEADER_BYTES, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                # Keep the descriptor all the same: closing it would drop SQLite's locks.
                logger.warning("cannot map the WAL index of %s; asking data_version instead", key)
            entry = _open[key] = _Open(fd, view, 0)
        entry.users += 1
        return WalIndex(key, entry.view)
