"""What a committed PostgreSQL write transaction changed, told to this process's caches at once
(``Database.on_commit``): read-your-writes within a process, which learns of other processes'
commits from PostgreSQL's notifications (``freshness``)."""

from __future__ import annotations

from collections.abc import Callable

from commerce_api.storage.executor import CHANGED as CHANGED  # where a transaction notes them

# Per database URL, what this process's caches want told at such a commit (``listen``).
_COMMIT_LISTENERS: dict[str, list[Callable[[set[str]], None]]] = {}


def listen(url_key: str, callback: Callable[[set[str]], None]) -> Callable[[], None]:
    """Call ``callback`` with what each committed write transaction on the database of
    ``url_key`` changed (:func:`tell`). Returns the undo."""
    listeners = _COMMIT_LISTENERS.setdefault(url_key, [])
    listeners.append(callback)
    return lambda: listeners.remove(callback)


def tell(url_key: str, changed: set[str]) -> None:
    """A write transaction on the database of ``url_key`` committed ``changed``."""
    for callback in list(_COMMIT_LISTENERS.get(url_key, ())):
        callback(changed)
