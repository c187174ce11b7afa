"""Placing orders in batches that share a commit, on each backend.

Orders that arrive at the same moment are placed together (``desk.OrderDesk``, a group commit
built on ``commerce_api.storage.group_commit``): one write transaction, one durable commit, and a
fixed number of statements per batch however many orders it carries (:func:`place_batch`):

1. Claim the batch's new ``Idempotency-Key`` s (in-flight rows, ``INSERT … ON CONFLICT DO
   NOTHING``, in key order; not on SQLite, where the transaction already excludes every other
   writer), then read the products the batch names (PostgreSQL: with the claim, in one
   statement) and the key rows that existed already.
2. Decide every order in turn, in memory (``batch_plan.decide``: what the orders placed one
   after another would get). Write what was decided, inside a savepoint: the orders, their
   lines, their ``order.created`` events and outbox deliveries (on PostgreSQL one statement).
3. Lock the products (``FOR NO KEY UPDATE`` in id order; on SQLite the transaction's write
   lock already excludes every other writer), then the existing key rows, and compare them
   with what step 1 read. If they would change a decision — another process sold the units
   this batch counted on, a price changed, a key's first request finished — roll back to the
   savepoint (which gives up the row locks taken since), lock again, decide again.
4. Store each key's outcome in its row and take the stock (one decrement per product, the
   batch's sum; on PostgreSQL one statement with the stock's notification), and commit.

Each backend is a :class:`BatchBackend`, chosen once (:func:`backend_for`; the desk keeps its
own): :class:`SQLiteBatch` runs steps 1 to 4 as plain statements, with no claim, savepoint or
check; :class:`PostgresBatch` as follows.

On PostgreSQL a batch with no key row found in step 1 (the usual one) writes steps 2 to 4 in one
statement, no savepoint (``batch_repository.place_and_finish``): it locks the products, checks
them, and writes only if they hold, else decides again on the locked rows it got back. So it
waits on the wire four times whatever its size (``BEGIN``, claim and read, that, ``COMMIT``),
a hot product locked for one round trip and the commit. Locks are taken in one order everywhere
(new keys, products by id, existing key rows; a cancel: products, key).

Every order, its stock change, event, deliveries, audit row and stored response are in one
transaction, and no caller is answered before its commit returned: a failed commit answers every
order of the batch with that failure and keeps nothing; a statement that fails before it undoes
the batch, whose orders then run again one by one. Nothing is written for a refused order. Other
processes' batches wait on the row locks (PostgreSQL) or the write lock (SQLite), and a batch
changes stock only under its lock, its decisions checked against the locked rows: no oversell.

With a key, its row is written in the order's own transaction: a crash leaves no claim behind
(a retry is placed at once), a retry of a request that committed finds its stored response under
the row lock (never a second order), and one that arrives while the first request's batch (in
another process) runs waits for its commit at the claim, then replays it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from commerce_api.core.timestamps import utcnow
from commerce_api.events.service import event_rows, record_events
from commerce_api.idempotency.service import KeyedRequest
from commerce_api.orders import batch_repository, placement_repository
from commerce_api.orders.batch_plan import OrderRequest, Plan, Result, Stock, as_stock, decide
from commerce_api.orders.domain import EVENT_FOR_STATUS, OrderStatus
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Executor

CREATED = EVENT_FOR_STATUS[OrderStatus.PENDING]

# A batch's decision on the rows read: the stock by product id, the key rows by (scope, key).
Decide = Callable[[dict[str, Stock], dict[tuple[str, str], Any]], Plan]


class BatchBackend(Protocol):
    """How a backend places a batch (steps 1 to 4 of the module doc)."""

    def batches_in_flight(self, wanted: int) -> int:
        """How many batches may be in their transactions at once, of the ``wanted``."""
        ...

    async def place(
        self,
        conn: Executor,
        keyed: list[KeyedRequest],
        product_ids: set[str],
        now: datetime,
        decide: Decide,
    ) -> list[Result]: ...


class SQLiteBatch:
    """SQLite's write transaction holds the whole file from its first statement: what it reads
    is locked already, and no other transaction can store a key meanwhile (so a new key's row is
    written once, with its outcome: no claim first, no check). Its statements are function
    calls, not round trips: each is its own."""

    def batches_in_flight(self, wanted: int) -> int:
        return 1  # the batches take turns on the file's write lock

    async def place(
        self,
        conn: Executor,
        keyed: list[KeyedRequest],
        product_ids: set[str],
        now: datetime,
        decide: Decide,
    ) -> list[Result]:
        stock = await _products(conn, product_ids, lock=True)
        found = await _keys(conn, keyed, lock=True)
        plan = decide(stock, found)
        await placement_repository.insert_orders(conn, plan.orders, plan.lines, plan.trail)
        await record_events(conn, CREATED, plan.new_events)
        await placement_repository.store_key_outcomes(conn, plan.key_outcomes, set(found))
        await placement_repository.take_stock(conn, plan.taken())
        return plan.results


class PostgresBatch:
    """PostgreSQL: the new keys claimed first, the rows read unlocked, then locked and checked
    (in one statement for the usual batch: ``batch_repository.place_and_finish``)."""

    def batches_in_flight(self, wanted: int) -> int:
        return wanted  # a second batch overlaps the first's waits on the wire

    async def place(
        self,
        conn: Executor,
        keyed: list[KeyedRequest],
        product_ids: set[str],
        now: datetime,
        decide: Decide,
    ) -> list[Result]:
        claimed, read_stock = await _claim_and_read(conn, keyed, now, product_ids)
        existing = [k for k in keyed if (k.scope, k.key) not in claimed]
        read_keys = await _keys(conn, existing, lock=False)
        with_row = claimed | read_keys.keys()
        plan = decide(read_stock, read_keys)
        if not existing:  # the usual batch: lock, check and write in one statement
            held, locked = await batch_repository.place_and_finish(
                conn, product_ids, _expected(plan), _placed(plan), plan.key_outcomes, with_row
            )
            if held:
                return plan.results
            plan = decide(as_stock(locked), read_keys)  # under the locks the statement took
        else:
            await placement_repository.begin_savepoint(conn)
            await batch_repository.write_placed(conn, _placed(plan))
            locked_stock = await _products(conn, product_ids, lock=True)
            locked_keys = await _keys(conn, existing, lock=True)
            if plan.holds_for(locked_stock) and _same_keys(read_keys, locked_keys):
                await batch_repository.finish_placed(
                    conn, plan.key_outcomes, with_row, plan.taken()
                )
                return plan.results  # no RELEASE: the commit ends the savepoint (a round trip less)
            await placement_repository.rollback_to_savepoint(conn)
            # The rollback gave up the row locks taken after the savepoint: take them again.
            plan = decide(
                await _products(conn, product_ids, lock=True),
                await _keys(conn, existing, lock=True),
            )
        await batch_repository.write_placed(conn, _placed(plan))
        await batch_repository.finish_placed(conn, plan.key_outcomes, with_row, plan.taken())
        return plan.results


# The one place the batch's path depends on the backend: a desk picks its backend once.
_BACKENDS: dict[str, BatchBackend] = {"sqlite": SQLiteBatch(), "postgresql": PostgresBatch()}


def backend_for(dialect_name: str) -> BatchBackend:
    """The batch backend of a database (SQLAlchemy's dialect name: ``sqlite``, ``postgresql``)."""
    return _BACKENDS[dialect_name]


async def place_batch(
    conn: Executor,
    requests: Sequence[OrderRequest],
    *,
    currency: str,
    secret_box: SecretBox | None,
    backend: BatchBackend | None = None,
) -> list[Result]:
    """Place ``requests`` in the caller's write transaction (see the module doc); one result
    per request, in order. Requests must not share a key (``OrderDesk`` never batches two).
    ``backend``: the connection's (``backend_for``), when the caller has it already."""
    product_ids = {item.product_id for request in requests for item in request.data.items}
    keyed = [request.keyed for request in requests if request.keyed is not None]
    now = utcnow()
    decide_batch = functools.partial(
        decide, requests, now=now, currency=currency, secret_box=secret_box
    )
    chosen = backend_for(conn.dialect.name) if backend is None else backend
    return await chosen.place(conn, keyed, product_ids, now, decide_batch)


def _expected(plan: Plan) -> list[batch_repository.Expected]:
    """The products as decided on, for the database to check under its locks."""
    return [
        batch_repository.Expected(
            pid, read.name, read.price_minor, read.taken, read.available if read.refused else None
        )
        for pid, read in sorted(plan.stock.items())
    ]


def _placed(plan: Plan) -> batch_repository.Placed:
    events = event_rows(CREATED, plan.new_events)
    return batch_repository.Placed(plan.orders, plan.lines, events, plan.trail, CREATED)


async def _products(conn: Executor, product_ids: set[str], *, lock: bool) -> dict[str, Stock]:
    """The active products among ``product_ids`` as stock to take from (see
    ``placement_repository.stock_of``)."""
    return as_stock(await placement_repository.stock_of(conn, product_ids, lock=lock))


async def _keys(
    conn: Executor, keyed: list[KeyedRequest], *, lock: bool
) -> dict[tuple[str, str], Any]:
    """The rows the batch's keys already have, by (scope, key) (``lock``: locked until the
    commit, in key order). A key without a row gets one with its outcome."""
    return await placement_repository.key_rows(conn, {(k.scope, k.key) for k in keyed}, lock=lock)


def _same_keys(read: dict[tuple[str, str], Any], locked: dict[tuple[str, str], Any]) -> bool:
    def state(row: Any) -> tuple[Any, ...]:
        return (row.fingerprint, row.state, row.locked_at, row.created_at)

    return read.keys() == locked.keys() and all(
        state(row) == state(locked[key]) for key, row in read.items()
    )


async def _claim_and_read(
    conn: Executor, keyed: list[KeyedRequest], now: datetime, product_ids: set[str]
) -> tuple[set[tuple[str, str]], dict[str, Stock]]:
    """Claim the keys no row holds yet, first thing, in key order: an in-flight row, visible
    to others only with the batch's commit (which fills in its outcome). Another transaction
    inserting the same key waits for this one to end, and then finds the row; a key taken by
    another transaction that has not committed yet makes this one wait for it — before it
    holds any product, so the two never wait on each other in a cycle. The keys claimed, and
    the products read (unlocked) by the same statement."""
    if not keyed:
        return set(), await _products(conn, product_ids, lock=False)
    claimed_at = {"state": "in_flight", "locked_at": now, "created_at": now}
    claims = [
        {"scope": k.scope, "key": k.key, "fingerprint": k.fingerprint, **claimed_at}
        for k in sorted(keyed, key=lambda k: (k.scope, k.key))
    ]
    claimed, rows = await batch_repository.claim_and_read(conn, claims, product_ids)
    return claimed, as_stock(rows)
