"""Placing orders: one implementation for both backends, in batches that share a commit.

Orders that arrive at the same moment are placed together (``desk.OrderDesk``, a group commit
built on ``commerce_api.storage.group_commit``): one write transaction, one durable commit, and a
fixed number of statements per batch however many orders it carries (:func:`place_batch`):

1. Claim the batch's new ``Idempotency-Key`` s (in-flight rows, ``INSERT … ON CONFLICT DO
   NOTHING``, in key order; not on SQLite, where the transaction already excludes every other
   writer), then read the products the batch names (PostgreSQL: with the claim, in one
   statement) and the key rows that existed already.
2. Decide every order in turn, in memory: a key's stored response is replayed (or the key
   refused: 422, 409 in flight); an order takes its units only if every line fits after the
   orders before it, else it is refused (404/409) and takes nothing. This is exactly what the
   orders placed one after another would get — first come, first served, and the same "N
   available" in the message. Write what was decided, inside a savepoint: the orders, their
   lines, their ``order.created`` events and outbox deliveries (on PostgreSQL one statement).
3. Lock the products (``FOR NO KEY UPDATE`` in id order; on SQLite the transaction's write
   lock already excludes every other writer), then the existing key rows, and compare them
   with what step 1 read. If they would change a decision — another process sold the units
   this batch counted on, a price changed, a key's first request finished — roll back to the
   savepoint (which gives up the row locks taken since), lock again, decide again.
4. Store each key's outcome in its row and take the stock (one decrement per product, the
   batch's sum; on PostgreSQL one statement with the stock's notification), and commit.

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import orjson

from commerce_api.accounts.service import Principal
from commerce_api.audit.service import order_created
from commerce_api.core.errors import APIError, error_body
from commerce_api.core.timestamps import utcnow
from commerce_api.events.service import NewEvent, event_rows, record_events
from commerce_api.idempotency import service as idempotency
from commerce_api.orders import batch_repository, repository
from commerce_api.orders.domain import EVENT_FOR_STATUS, Line, OrderStatus
from commerce_api.orders.schemas import OrderCreate
from commerce_api.orders.service import (
    cannot_reserve,
    new_order_rows,
    render_order,
    requested_lines,
)
from commerce_api.storage.crypto import SecretBox
from commerce_api.storage.db import Executor

CREATED = EVENT_FOR_STATUS[OrderStatus.PENDING]
JSON = "application/json"  # the content type of every outcome's body


@dataclass(frozen=True, slots=True)
class OrderRequest:
    """An order to place: who places it, what, and its ``Idempotency-Key`` if it has one."""

    principal: Principal
    data: OrderCreate
    keyed: idempotency.KeyedRequest | None = None
    traceparent: str | None = None  # the request's trace context, for its event (core.tracing)


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """An order's outcome, as its ``Idempotency-Key`` stores it: a new order (201), the
    order's 4xx, or a replay of a stored one. A plain value: the route renders it."""

    status: int
    headers: dict[str, str]
    body: bytes
    order: dict[str, Any] | None = field(default=None, compare=False)  # the 201's record

    @classmethod
    def of_error(cls, error: APIError) -> PlacementResult:
        """The contract's error response (as ``errors.error_response`` renders it)."""
        headers = {name.lower(): value for name, value in error.headers.items()}
        body = error_body(error.code, error.reason, error.message, error.details, error.problems)
        return cls(error.status, {"content-type": JSON, **headers}, body)


# What each request of a batch gets: an outcome, or an error to raise (an order's own 4xx
# without a key, or a key that cannot be used now: neither is stored).
Result = PlacementResult | APIError


@dataclass(slots=True)
class _Stock:
    available: int
    name: str
    price_minor: int
    taken: int = 0
    refused: bool = False  # an order was refused for want of this product's stock


@dataclass(slots=True)
class _Plan:
    """What a batch decided: a result per request, and the units taken per product."""

    results: list[Result]
    stock: dict[str, _Stock]
    key_outcomes: list[dict[str, Any]]  # the key rows' values, written after the check
    orders: list[dict[str, Any]]  # the rows to write: the orders, their lines, audit rows,
    lines: list[dict[str, Any]]
    trail: list[dict[str, Any]]
    new_events: list[NewEvent]  # and their events

    def expected(self) -> list[batch_repository.Expected]:
        """The products as decided on, for the database to check under its locks."""
        return [
            batch_repository.Expected(
                pid,
                read.name,
                read.price_minor,
                read.taken,
                read.available if read.refused else None,
            )
            for pid, read in sorted(self.stock.items())
        ]

    def holds_for(self, locked: dict[str, _Stock]) -> bool:
        """Whether the locked rows would lead to the same decisions as the rows read before:
        the same products, names and prices, enough units for what was taken, and the very
        same count where an order was refused for want of stock (its message names it)."""
        if locked.keys() != self.stock.keys():
            return False
        for product_id, read in self.stock.items():
            now = locked[product_id]
            if (now.name, now.price_minor) != (read.name, read.price_minor):
                return False
            if now.available < read.taken or (read.refused and now.available != read.available):
                return False
        return True


async def place_batch(
    conn: Executor,
    requests: Sequence[OrderRequest],
    *,
    currency: str,
    secret_box: SecretBox | None,
) -> list[Result]:
    """Place ``requests`` in the caller's write transaction (see the module doc); one result
    per request, in order. Requests must not share a key (``OrderDesk`` never batches two)."""
    product_ids = {item.product_id for request in requests for item in request.data.items}
    keyed = [request.keyed for request in requests if request.keyed is not None]
    now = utcnow()
    # SQLite's write transaction holds the whole file from its first statement: what it reads
    # is locked already, and no other transaction can store a key meanwhile (so a new key's row
    # is written once, with its outcome: no claim first, no check).
    locked_already = conn.dialect.name == "sqlite"
    claimed: set[tuple[str, str]] = set()
    if locked_already:
        read_stock = await _products(conn, product_ids, lock=True)
    else:  # PostgreSQL: claimed before anything is read (see _claim_and_read)
        claimed, read_stock = await _claim_and_read(conn, keyed, now, product_ids)
    existing = [k for k in keyed if (k.scope, k.key) not in claimed]
    read_keys = await _keys(conn, existing, lock=locked_already)
    decide = functools.partial(_decide, requests, now=now, currency=currency, secret_box=secret_box)
    if locked_already:
        plan = decide(read_stock, read_keys)
        await _write(conn, plan)
        await repository.store_key_outcomes(conn, plan.key_outcomes, set(read_keys))
        await repository.take_stock(conn, _taken(plan))
        return plan.results
    with_row = claimed | read_keys.keys()
    plan = decide(read_stock, read_keys)
    if not existing:  # the usual batch: lock, check and write in one statement
        held, locked = await batch_repository.place_and_finish(
            conn, product_ids, plan.expected(), _placed(plan), plan.key_outcomes, with_row
        )
        if held:
            return plan.results
        plan = decide(_as_stock(locked), read_keys)  # under the locks the statement took
    else:
        await repository.begin_savepoint(conn)
        await _write(conn, plan)
        locked_stock = await _products(conn, product_ids, lock=True)
        locked_keys = await _keys(conn, existing, lock=True)
        if plan.holds_for(locked_stock) and _same_keys(read_keys, locked_keys):
            await batch_repository.finish_placed(conn, plan.key_outcomes, with_row, _taken(plan))
            return plan.results  # no RELEASE: the commit ends the savepoint (a round trip less)
        await repository.rollback_to_savepoint(conn)
        # The rollback gave up the row locks taken after the savepoint: take them again.
        plan = decide(
            await _products(conn, product_ids, lock=True), await _keys(conn, existing, lock=True)
        )
    await _write(conn, plan)
    await batch_repository.finish_placed(conn, plan.key_outcomes, with_row, _taken(plan))
    return plan.results


def _taken(plan: _Plan) -> list[tuple[str, int]]:
    """``(product_id, units)`` the plan takes, in id order."""
    return [(pid, stock.taken) for pid, stock in sorted(plan.stock.items()) if stock.taken]


def _decide(
    requests: Sequence[OrderRequest],
    stock: dict[str, _Stock],
    found_keys: dict[tuple[str, str], Any],
    *,
    now: datetime,
    currency: str,
    secret_box: SecretBox | None,
) -> _Plan:
    """Decide every request against ``stock`` and ``found_keys``: the results, the units taken
    and the rows to write (nothing is written here)."""
    results: list[Result | None] = [None] * len(requests)
    # Requests whose key this batch stores an outcome for → the key row's created_at (a
    # take-over keeps the abandoned claim's).
    to_store: dict[int, datetime] = {}
    for index, request in enumerate(requests):
        if request.keyed is None:
            continue
        row = found_keys.get((request.keyed.scope, request.keyed.key))
        if row is None:  # a new key, claimed by this batch
            to_store[index] = now
            continue
        try:
            verdict = idempotency.verdict(row, request.keyed.fingerprint, now)
        except idempotency.KeyConflict as exc:
            results[index] = exc
            continue
        if verdict == "replay":
            assert secret_box is not None, (
                "a keyed request needs the secret box its response is stored with"
            )
            body = secret_box.decrypt_bytes(row.response_body)
            headers = idempotency.replayed_headers(row.response_headers)
            results[index] = PlacementResult(row.response_status, headers, body)
        else:
            to_store[index] = row.created_at if verdict == "take_over" else now

    placed: list[tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]] = []
    trail: list[dict[str, Any]] = []  # the orders' audit rows
    new_events: list[NewEvent] = []
    for index, request in enumerate(requests):
        if results[index] is not None:
            continue
        try:
            lines = _take(request, stock)
        except APIError as exc:
            results[index] = exc if request.keyed is None else PlacementResult.of_error(exc)
            continue
        account_id = request.principal.account_id
        assert account_id is not None  # requested_lines refuses keys without an account
        order, items = new_order_rows(account_id, request.data, currency, lines)
        new = SimpleNamespace(**order, tracking=None)  # the column's default (not inserted)
        rendered = render_order(new, [SimpleNamespace(**i) for i in items])
        placed.append((order, items, rendered))
        trail.append(order_created(request.principal, order["id"], order["created_at"]))
        new_events.append(NewEvent(account_id, rendered, order["created_at"], request.traceparent))
        headers = {"content-type": JSON, "location": f"/v1/orders/{order['id']}"}
        results[index] = PlacementResult(201, headers, orjson.dumps(rendered), rendered)

    outcomes = _key_outcomes(requests, results, to_store, now, secret_box)
    return _Plan(
        [result for result in results if result is not None],
        stock,
        outcomes,
        [order for order, _, _ in placed],
        [item for _, items, _ in placed for item in items],
        trail,
        new_events,
    )


def _placed(plan: _Plan) -> batch_repository.Placed:
    events = event_rows(CREATED, plan.new_events)
    return batch_repository.Placed(plan.orders, plan.lines, events, plan.trail, CREATED)


async def _write(conn: Executor, plan: _Plan) -> None:
    """The plan's orders, lines, events (and their deliveries) and audit rows."""
    if conn.dialect.name == "sqlite":
        await repository.insert_orders(conn, plan.orders, plan.lines, plan.trail)
        await record_events(conn, CREATED, plan.new_events)
    else:  # one statement, one round trip
        await batch_repository.write_placed(conn, _placed(plan))


def _take(request: OrderRequest, stock: dict[str, _Stock]) -> list[Line]:
    """The order's lines (one per product, in the request's order), their units taken from
    ``stock`` — all of them or, raised, none. Checked in product-id order, the order their
    rows are locked in."""
    wanted = requested_lines(request.principal, request.data)
    lines: dict[str, Line] = {}
    for line in sorted(wanted, key=lambda line: line.product_id):
        product = stock.get(line.product_id)
        if product is None:
            raise cannot_reserve(line.index, line.product_id, line.quantity, None)
        left = product.available - product.taken
        if left < line.quantity:
            product.refused = True
            raise cannot_reserve(line.index, line.product_id, line.quantity, left)
        lines[line.product_id] = Line(
            line.product_id, product.name, line.quantity, product.price_minor
        )
    for taken in lines.values():
        stock[taken.product_id].taken += taken.quantity
    return [lines[line.product_id] for line in wanted]


async def _products(conn: Executor, product_ids: set[str], *, lock: bool) -> dict[str, _Stock]:
    """The active products among ``product_ids`` as stock to take from (see
    ``repository.stock_of``)."""
    return _as_stock(await repository.stock_of(conn, product_ids, lock=lock))


def _as_stock(rows: Sequence[Any]) -> dict[str, _Stock]:
    return {row.id: _Stock(row.inventory_count, row.name, row.price_minor) for row in rows}


async def _keys(
    conn: Executor, keyed: list[idempotency.KeyedRequest], *, lock: bool
) -> dict[tuple[str, str], Any]:
    """The rows the batch's keys already have, by (scope, key) (``lock``: locked until the
    commit, in key order). A key without a row gets one with its outcome (``_key_outcomes``)."""
    return await repository.key_rows(conn, {(k.scope, k.key) for k in keyed}, lock=lock)


def _same_keys(read: dict[tuple[str, str], Any], locked: dict[tuple[str, str], Any]) -> bool:
    def state(row: Any) -> tuple[Any, ...]:
        return (row.fingerprint, row.state, row.locked_at, row.created_at)

    return read.keys() == locked.keys() and all(
        state(row) == state(locked[key]) for key, row in read.items()
    )


async def _claim_and_read(
    conn: Executor, keyed: list[idempotency.KeyedRequest], now: datetime, product_ids: set[str]
) -> tuple[set[tuple[str, str]], dict[str, _Stock]]:
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
    return claimed, _as_stock(rows)


def _key_outcomes(
    requests: Sequence[OrderRequest],
    results: list[Result | None],
    to_store: dict[int, datetime],
    now: datetime,
    secret_box: SecretBox | None,
) -> list[dict[str, Any]]:
    """The key rows' values: each key's outcome (a 201 or the order's 4xx), written once the
    batch holds its products and keys (``_store_keys``)."""
    rows: list[dict[str, Any]] = []
    for index, created_at in to_store.items():
        result, keyed = results[index], requests[index].keyed
        assert isinstance(result, PlacementResult)
        assert keyed is not None
        assert secret_box is not None
        values = idempotency.stored_values(result.status, result.headers, result.body, secret_box)
        values.update(fingerprint=keyed.fingerprint, locked_at=now, created_at=created_at)
        rows.append({"scope": keyed.scope, "key": keyed.key, **values})
    return rows
