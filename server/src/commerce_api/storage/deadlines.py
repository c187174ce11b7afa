"""Deadlines on every wait for the database (issue 32 item 3): a request during an outage, a
network partition or a lock held by a cut-off host is answered ``503`` within seconds, never
left hanging, and a cut-off host's open transaction is ended by PostgreSQL itself.

On PostgreSQL the service's own connections (the engine's, the read pool's, the listener's)
are opened with asyncpg's public ``timeout`` (connect), ``command_timeout`` (a statement, client
side) and ``server_settings`` (``statement_timeout``, ``lock_timeout``,
``idle_in_transaction_session_timeout`` and the TCP keepalives and ``tcp_user_timeout`` of the
server's end of the connection, all settable per session). Client side, a transaction's whole
life is watched (:class:`Watch`): past its deadline its connection is terminated at once (a
silent cut acknowledges nothing, so nothing else would end the wait), and the caller gets
:class:`DatabaseTimeout`. On SQLite a write waits for the file's lock at most until its
deadline (the busy timeout, and the queue of the process's own writers).
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commerce_api.settings import Settings


@dataclass(frozen=True)
class Deadlines:
    """How long the service waits for its database (seconds; the settings
    ``COMMERCE_DATABASE_*_TIMEOUT_SECONDS``, see docs/design.md).

    ``idle_in_transaction`` must be shorter than ``lock``: a transaction waiting for a row lock
    held by a cut-off host then outlives the holder's, which PostgreSQL ends first.
    """

    connect: float = 2.0  # a new PostgreSQL connection, TCP to ready (asyncpg ``timeout``)
    statement: float = 5.0  # PostgreSQL ``statement_timeout``, server side
    lock: float = 3.0  # PostgreSQL ``lock_timeout``; SQLite: the busy timeout of a write
    idle_in_transaction: float = 2.0  # PostgreSQL ends a transaction idle (waiting on us) so long
    dead_peer: float = 3.0  # PostgreSQL drops a connection whose client is silent so long
    transaction: float | None = 4.0  # client side: checkout to commit; None for tools

    def asyncpg_options(self, *, command_timeout: float) -> dict[str, Any]:
        """asyncpg's connect arguments for these deadlines (public, documented ones), with a
        client-side ``command_timeout`` on each statement."""
        probes = max(1, math.ceil(self.dead_peer) - 1)  # after 1 s idle, one a second
        return {
            "timeout": self.connect,
            "command_timeout": command_timeout,
            "server_settings": {
                "statement_timeout": _ms(self.statement),
                "lock_timeout": _ms(self.lock),
                "idle_in_transaction_session_timeout": _ms(self.idle_in_transaction),
                "tcp_keepalives_idle": "1",
                "tcp_keepalives_interval": "1",
                "tcp_keepalives_count": str(probes),
                "tcp_user_timeout": _ms(self.dead_peer),
            },
        }

    def engine_options(self) -> dict[str, Any]:
        """The engine's connections: a statement's client-side timeout only backs up the
        server's (a statement outside a watched transaction: a read of the whole catalogue);
        in a transaction its :class:`Watch` ends a wait first."""
        return self.asyncpg_options(command_timeout=self.statement + 1.0)

    def pool_options(self) -> dict[str, Any]:
        """The other connections (the read pool's single statements, the listener's): a
        statement times out client side at half the transaction deadline, so that the wait for
        its cancellation (asyncpg's, as long again at most) ends within it too."""
        seconds = self.transaction if self.transaction is not None else 2 * self.statement
        return self.asyncpg_options(command_timeout=seconds / 2)


def database_deadlines(settings: Settings) -> Deadlines:
    """The settings' deadlines on the database's waits (the server's and the worker's)."""
    return Deadlines(
        connect=settings.database_connect_timeout_seconds,
        statement=settings.database_statement_timeout_seconds,
        lock=settings.database_lock_timeout_seconds,
        idle_in_transaction=settings.database_idle_in_transaction_timeout_seconds,
        dead_peer=settings.database_dead_connection_seconds,
        transaction=settings.database_transaction_timeout_seconds,
    )


# SQLite's busy timeout for ``Database(url)`` without deadlines (operator tools and tests:
# migrations, imports of any size), as before; nothing else of theirs is bounded.
UNBOUNDED_SQLITE_BUSY_SECONDS = 30.0


def milliseconds(seconds: float) -> int:
    """A duration in whole milliseconds, at least one (a timeout of 0 would mean none)."""
    return max(1, round(seconds * 1000))


def _ms(seconds: float) -> str:
    return str(milliseconds(seconds))


class DatabaseTimeout(TimeoutError):
    """A transaction of the service ran past its deadline (``Deadlines.transaction``): its
    connection was closed. Nothing of it was committed, unless the deadline struck during the
    ``COMMIT`` itself (a keyed write's retry then replays it)."""


class DatabaseUnreachable(ConnectionError):
    """A bounded wait not even begun: a wait for the database ran out moments ago
    (:class:`Reachability`). A 503 with ``Retry-After``, like the wait's own failure."""


# After a wait for the database failed slowly (it ran out, or the connection was lost after
# a while), bounded waits fail at once for this long — the 503's ``Retry-After`` — rather than
# each waiting out its own deadline one after the other (a request's stamps, key and write).
UNREACHABLE_SECONDS = 2.0
_SLOW_FAILURE_SECONDS = 1.0


class Reachability:
    """Whether the database has answered lately, per ``Database`` (and its read pool)."""

    __slots__ = ("until",)

    def __init__(self) -> None:
        self.until = 0.0

    def check(self) -> float:
        """Raise :class:`DatabaseUnreachable` within ``UNREACHABLE_SECONDS`` of a slow failure;
        else the loop's time (pass it to :meth:`failed`)."""
        now = asyncio.get_running_loop().time()
        if now < self.until:
            raise DatabaseUnreachable(
                "the database did not answer moments ago; not waiting for it again yet"
            )
        return now

    def failed(self, exc: BaseException, started: float) -> None:
        """Note a failed wait begun at ``started``: one that ran out or lost its connection
        after a while says the database is out of reach (a lock's or a statement's timeout,
        PostgreSQL answering, does not)."""
        now = asyncio.get_running_loop().time()
        if now - started < _SLOW_FAILURE_SECONDS or isinstance(exc, DatabaseUnreachable):
            return
        if any(isinstance(cause, TimeoutError) for cause in causes(exc)) or (
            is_database_unavailable(exc)
        ):
            self.until = now + UNREACHABLE_SECONDS

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a bounded wait (a statement of the read pool): checked, and noted if slow."""
        started = self.check()
        try:
            yield
        except Exception as exc:
            self.failed(exc, started)
            raise


class Watch:
    """The deadline of one transaction: :meth:`hold` the driver's connection once checked out;
    at the deadline it is terminated (``asyncpg.Connection.terminate``: the transport dropped
    at once, whatever is awaited on it fails), so a wait the network never answers ends.

    A timer handle per transaction (the loop's ``call_at``); :meth:`done` cancels it.
    :data:`WATCHING` is the running transaction's, for the pool's checkout hook
    (``connecting.ping_when_idle``), so that a ping at checkout is watched too."""

    __slots__ = ("connection", "expired", "handle")

    def __init__(self, deadline: float) -> None:
        self.connection: Any = None
        self.expired = False
        self.handle = asyncio.get_running_loop().call_at(deadline, self._expire)

    def hold(self, driver_connection: Any) -> None:
        self.connection = driver_connection
        if self.expired:  # the checkout itself ran past the deadline
            self._expire()

    def done(self) -> None:
        self.handle.cancel()
        self.connection = None

    def _expire(self) -> None:
        self.expired = True
        connection, self.connection = self.connection, None
        if connection is not None and not connection.is_closed():
            connection.terminate()


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: SQLAlchemy's ``orig``, then each ``__cause__``."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return chain


# PostgreSQL's SQLSTATEs of a server that cannot serve this connection now: class 08
# (connection exception) and the shutdown and start-up states of class 57.
_POSTGRES_UNAVAILABLE = ("08", "57P01", "57P02", "57P03")


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the database could not be reached or was lost
    (restarting, the network cut): nothing was written, a retry may well succeed. SQLAlchemy
    marks such an error ``connection_invalidated`` (and drops its pooled connections)."""
    for current in causes(exc):
        if getattr(current, "connection_invalidated", False) is True:
            return True
        sqlstate = getattr(current, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate.startswith(_POSTGRES_UNAVAILABLE):
            return True
        if isinstance(current, ConnectionError):  # refused, reset, broken pipe
            return True
    return False


# PostgreSQL's SQLSTATEs of a wait that ran out: query_canceled (statement_timeout),
# lock_not_available (lock_timeout), idle_in_transaction_session_timeout, idle_session_timeout.
_POSTGRES_TIMED_OUT = ("57014", "55P03", "25P03", "57P05")
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def is_database_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is a wait for the database that ran out: a deadline of
    ours (``DatabaseTimeout``), the driver's (a connect, a statement), PostgreSQL's statement,
    lock or idle timeouts, SQLite's file locked past the busy timeout. Nothing was committed
    (but for a deadline met during the ``COMMIT``); a retry may well succeed."""
    for current in causes(exc):
        if isinstance(current, TimeoutError):  # asyncio's (asyncpg's) is the builtin one
            return True
        sqlstate = getattr(current, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate in _POSTGRES_TIMED_OUT:
            return True
        if isinstance(current, sqlite3.OperationalError) and (
            getattr(current, "sqlite_errorcode", None) in (_SQLITE_BUSY, _SQLITE_LOCKED)
            or "database is locked" in str(current)
        ):
            return True
    return False


WATCHING: ContextVar[Watch | None] = ContextVar("commerce_watching", default=None)
