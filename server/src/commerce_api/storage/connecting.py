"""How the service's PostgreSQL connections are made: what each sends at connect (the session
settings, or nothing through a pooler), and how a pooled one is checked before use."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, exc
from sqlalchemy.pool import ConnectionPoolEntry

from commerce_api.storage.deadlines import WATCHING, DatabaseTimeout, Deadlines

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

# Through PgBouncer in transaction pooling, consecutive transactions of one client connection
# run on different server connections, and PgBouncer 1.18 (Debian 12's) does not carry prepared
# statements across them. So no statement is prepared by name or kept: asyncpg's statement
# cache and SQLAlchemy's are off, and every statement is parsed as the unnamed statement, in the
# same exchange as its execution (a named statement per execution, as SQLAlchemy's docs show
# with ``prepared_statement_name_func``, would pile up in every server connection until PgBouncer
# closed it). Nothing is sent as a startup parameter: PgBouncer refuses those it does not
# know (``SERVER_SETTINGS`` go on the database role instead: docs/deployment.md).
POOLED_CONNECT_ARGS: dict[str, Any] = {
    "statement_cache_size": 0,
    "prepared_statement_cache_size": 0,
}


# PostgreSQL plans each execution of a prepared statement with its parameters (a custom plan),
# never with a generic plan cached per connection: the order batch's statements join tables to
# ``unnest`` of array parameters, and a generic plan made while a table was small (a new shop,
# a fresh bench database) kept scanning it whole as it grew — until autovacuum's next ANALYZE,
# minutes later — under a hot product's lock. Custom plans know each array's length and each
# table's current size. Measured: PostgreSQL flash sale +11 % (hot) and +14 % (spread), reads
# unchanged (docs/performance.md, "An order").
SERVER_SETTINGS = {"plan_cache_mode": "force_custom_plan"}


def postgres_connect_args(pooled: bool, deadlines: Deadlines | None) -> dict[str, Any]:
    """asyncpg's connect arguments for the engine: ``SERVER_SETTINGS`` and the deadlines'
    session settings (``storage.deadlines``) — or, through a pooler (``pooled``), no named
    prepared statements and no session settings (PgBouncer refuses them at connect: they are
    set on the role, docs/deployment.md); the deadlines' client-side timeouts either way."""
    connect_args: dict[str, Any] = (
        dict(POOLED_CONNECT_ARGS) if pooled else {"server_settings": SERVER_SETTINGS}
    )
    if deadlines is not None:
        options = deadlines.engine_options()
        settings = {**SERVER_SETTINGS, **options.pop("server_settings")}
        connect_args.update(options)
        if not pooled:
            connect_args["server_settings"] = settings
    return connect_args


# A pooled PostgreSQL connection idle longer than this is pinged before it is handed out.
IDLE_PING_SECONDS = 10.0
_CHECKED_IN_AT = "commerce_checked_in_at"


def ping_when_idle(engine: AsyncEngine) -> None:
    """Ping a pooled connection before handing it out only when it sat idle for longer than
    ``IDLE_PING_SECONDS``; one that fails the ping is replaced (the pool's documented
    ``checkout`` event: raising ``DisconnectionError`` there makes it retry with a fresh one).

    SQLAlchemy's ``pool_pre_ping`` pings on every checkout: three round trips (``BEGIN``, ``;``,
    ``ROLLBACK`` on asyncpg) before every transaction, the most an order batch made. A
    connection in use is never idle that long; one that dies in use (PostgreSQL restarted) fails
    its statement, and SQLAlchemy then invalidates the whole pool, so the retry — the order desk
    runs a failed batch's orders again one by one — gets fresh connections.
    """
    dialect = engine.dialect

    @event.listens_for(engine.sync_engine.pool, "checkin")
    def checked_in(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_CHECKED_IN_AT] = time.monotonic()

    @event.listens_for(engine.sync_engine.pool, "checkout")
    def checked_out(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        since = record.info.get(_CHECKED_IN_AT)
        if since is None or time.monotonic() - since < IDLE_PING_SECONDS:
            return
        watch = WATCHING.get()  # the ping is within the transaction's deadline
        if watch is not None:
            watch.hold(dbapi_connection.driver_connection)
        try:
            dialect.do_ping(dbapi_connection)
        except Exception as error:
            if watch is not None and watch.expired:  # not a dead connection: no fresh one
                raise DatabaseTimeout("a ping at checkout ran past the deadline") from error
            raise exc.DisconnectionError("an idle connection failed its ping") from error
