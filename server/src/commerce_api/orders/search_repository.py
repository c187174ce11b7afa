"""Order search by any part of an order id or customer id: the condition a list adds, and the
indexing of the orders placed since the last search (migrations 0019 and 0020).

Placing an order does not index it (a trigram index's upkeep cost a third of an order);
:func:`index_pending` indexes the orders placed since, before a search, and the condition
matches the indexed orders through the index and the others by reading them, so a search finds
every committed order, indexed yet or not.

SQLite: FTS5's ``order_search`` (trigram tokenizer, contentless), its rowid numbered by
``order_search_rows`` (an ``INTEGER PRIMARY KEY``, which VACUUM never renumbers); the orders
not indexed yet are those past ``order_search_mark`` by rowid. PostgreSQL: ``order_search`` (an
order id and customer id a row) under a GIN index of ``gin_trgm_ops``, which ``ILIKE '%…%'``
reads; the orders not indexed yet are queued in ``order_search_pending`` by a trigger.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Integer, String, column, or_, select, table, text

from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import orders

SEARCH_MIN_LENGTH = 3
"""The shortest search matched as a part of an id: a trigram index finds nothing shorter. A
shorter one matches a whole order id or customer id."""

_pending = table("order_search_pending", column("id", Integer), column("order_id", String))
_rows = table("order_search_rows", column("id", Integer), column("order_id", String))
_fts = table("order_search", column("rowid", Integer))
_trigrams = table("order_search", column("order_id", String), column("customer_id", String))
_SQLITE_MATCHES = text("order_search MATCH :order_match")

# SQLite: the orders past the mark (by rowid), numbered in ``order_search_rows`` and given to
# FTS5, and the mark moved to the last of them, in the caller's transaction.
_SQLITE_MARK = text("SELECT order_rowid, order_id FROM order_search_mark")
_SQLITE_MARKED = text("SELECT id FROM orders WHERE rowid = :rowid")
# The last of the first ``limit`` orders past the mark; none when there is none.
_SQLITE_UPTO = text(
    "SELECT order_rowid, id FROM (SELECT rowid AS order_rowid, id FROM orders "
    "WHERE rowid > :after ORDER BY rowid LIMIT :limit) ORDER BY order_rowid DESC LIMIT 1"
)
_SQLITE_LAST = text("SELECT rowid, id FROM orders ORDER BY rowid DESC LIMIT 1")
_SQLITE_NUMBERED = text("SELECT coalesce(max(id), 0) FROM order_search_rows")
_SQLITE_NUMBER_AFTER = text(
    "INSERT OR IGNORE INTO order_search_rows (order_id) SELECT id FROM orders "
    "WHERE rowid > :after AND rowid <= :upto ORDER BY rowid"
)
# After a renumbering: every order missing from the index, whatever its rowid.
_SQLITE_NUMBER_MISSING = text(
    "INSERT INTO order_search_rows (order_id) SELECT id FROM orders "
    "WHERE id NOT IN (SELECT order_id FROM order_search_rows) ORDER BY rowid"
)
_SQLITE_INDEX = text(
    "INSERT INTO order_search (rowid, order_id, customer_id) "
    "SELECT r.id, o.id, o.customer_id FROM order_search_rows r JOIN orders o ON o.id = r.order_id "
    "WHERE r.id > :before"
)
_SQLITE_MOVE_MARK = text("UPDATE order_search_mark SET order_rowid = :rowid, order_id = :order_id")
_SQLITE_NOT_INDEXED = text(
    "SELECT id FROM orders AS unindexed "
    "WHERE rowid > (SELECT order_rowid FROM order_search_mark) "
    "AND (id LIKE :order_pattern ESCAPE '\\' OR customer_id LIKE :order_pattern ESCAPE '\\')"
)
# PostgreSQL: one statement; SKIP LOCKED lets two searches move two parts of the queue at once.
_POSTGRESQL_INDEX = text(
    "WITH moved AS (DELETE FROM order_search_pending WHERE id IN ("
    "SELECT id FROM order_search_pending ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED) "
    "RETURNING order_id) "
    "INSERT INTO order_search (order_id, customer_id) "
    "SELECT o.id, o.customer_id FROM orders o JOIN moved ON moved.order_id = o.id "
    "ON CONFLICT (order_id) DO NOTHING"
)


async def index_pending(conn: Executor, limit: int) -> int:
    """Index up to ``limit`` of the orders placed since the last search, oldest first, in the
    caller's (write) transaction; how many were indexed. (After a renumbering of SQLite's
    rowids: every order missing from the index, however many.)"""
    if conn.dialect.name == "postgresql":
        result = await conn.execute(_POSTGRESQL_INDEX, {"limit": limit})
        return int(result.rowcount or 0)
    after, marked_id = _rowid_and_id((await conn.execute(_SQLITE_MARK)).one())
    before = await conn.scalar(_SQLITE_NUMBERED)
    if after and await conn.scalar(_SQLITE_MARKED, {"rowid": after}) != marked_id:
        await conn.execute(_SQLITE_NUMBER_MISSING)
        last = _rowid_and_id((await conn.execute(_SQLITE_LAST)).one())
    else:
        found = (await conn.execute(_SQLITE_UPTO, {"after": after, "limit": limit})).first()
        if found is None:
            return 0
        last = _rowid_and_id(found)
        await conn.execute(_SQLITE_NUMBER_AFTER, {"after": after, "upto": last[0]})
    result = await conn.execute(_SQLITE_INDEX, {"before": before})
    await conn.execute(_SQLITE_MOVE_MARK, {"rowid": last[0], "order_id": last[1]})
    return int(result.rowcount or 0)


def _rowid_and_id(row: Any) -> tuple[int, str]:
    """An order's (rowid, id), or the mark's."""
    return int(row[0]), str(row[1])


def _contains_pattern(q: str) -> str:
    """``q`` anywhere, as a ``LIKE`` pattern (its own ``%``, ``_`` and ``\\`` taken as they are)."""
    escaped = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _either_holds(
    order_id: ColumnElement[str], customer_id: ColumnElement[str], pattern: str
) -> ColumnElement[bool]:
    """PostgreSQL: ``order_id`` or ``customer_id`` matches ``pattern`` (``ILIKE``)."""
    return or_(order_id.ilike(pattern), customer_id.ilike(pattern))


def search_condition(dialect: str, q: str) -> ColumnElement[bool]:
    """The orders whose id or customer id holds ``q`` (case-insensitively; at least
    :data:`SEARCH_MIN_LENGTH` characters), else whose id or customer id is ``q``: those the
    index finds, and those not indexed yet whose ids hold it (SQLite's ``LIKE`` folds the case
    of ASCII letters only, the trigram tokenizer of every letter: until the next search indexes
    it, an order whose id has other letters is found in their case only)."""
    if len(q) < SEARCH_MIN_LENGTH:
        return or_(orders.c.id == q, orders.c.customer_id == q)
    pattern = _contains_pattern(q)
    if dialect == "postgresql":
        queued = orders.alias("queued")
        indexed = select(_trigrams.c.order_id).where(
            _either_holds(_trigrams.c.order_id, _trigrams.c.customer_id, pattern)
        )
        not_indexed = (
            select(queued.c.id)
            .join(_pending, _pending.c.order_id == queued.c.id)
            .where(_either_holds(queued.c.id, queued.c.customer_id, pattern))
        )
        return orders.c.id.in_(indexed.union_all(not_indexed))
    phrase = '"' + q.replace('"', '""') + '"'  # one string to find, whatever it holds
    matched = select(_fts.c.rowid).where(_SQLITE_MATCHES.bindparams(order_match=phrase))
    indexed = select(_rows.c.order_id).where(_rows.c.id.in_(matched))
    unindexed = _SQLITE_NOT_INDEXED.bindparams(order_pattern=pattern).columns(column("id", String))
    return orders.c.id.in_(indexed.union_all(unindexed))
