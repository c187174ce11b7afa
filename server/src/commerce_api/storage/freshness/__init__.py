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

The stamps and what a write says are ``stamps``; the trackers, ``sqlite_tracker`` and
``postgres_tracker``.
"""

from commerce_api.storage.freshness.postgres_tracker import PostgresTracker
from commerce_api.storage.freshness.sqlite_tracker import SQLiteTracker
from commerce_api.storage.freshness.stamps import (
    AUTH,
    CATALOG,
    CHANNEL,
    STOCK,
    ChangeTracker,
    Versions,
    bump,
    notify_sql,
    touch,
    unsaid,
    unsay,
)

__all__ = [
    "AUTH",
    "CATALOG",
    "CHANNEL",
    "STOCK",
    "ChangeTracker",
    "PostgresTracker",
    "SQLiteTracker",
    "Versions",
    "bump",
    "notify_sql",
    "touch",
    "unsaid",
    "unsay",
]
