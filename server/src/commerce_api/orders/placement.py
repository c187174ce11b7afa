"""Placing orders: one implementation for both backends, in batches that share a commit.

Orders that arrive at the same moment are placed together (:class:`OrderDesk`, a group commit
built on ``commerce_api.group_commit``): one write transaction, one durable commit, and a
fixed number of statements per batch however many orders it carries (:func:`place_batch`):

1. Lock the products the batch names, in id order (``SELECT … FOR UPDATE`` on PostgreSQL; on
   SQLite the transaction's write lock already excludes every other writer), then the rows its
   ``Idempotency-Key`` s already have, in key order. Products before keys, always: no cycle
   with a cancel, which locks products and then its own key.
2. Decide every order in turn, in memory: a key's stored response is replayed (or the key
   refused: 422, 409 in flight); an order takes its units only if every line fits after the
   orders before it, else it is refused (404/409) and takes nothing. This is exactly what the
   orders placed one after another would get — first come, first served, and the same "N
   available" in the message.
3. Write what was decided: one stock update per product (the batch's sum), the orders, their
   lines, their ``order.created`` events and outbox deliveries, and each key's outcome (a new
   row, or the taken-over row updated).

Every order, its stock change, its event, its deliveries and its stored response are in the
one transaction, and no caller is answered before its commit has returned: a failed commit
answers every order of the batch with that failure and keeps nothing; a statement that fails
before it undoes the batch, whose orders are then run again one by one. Nothing is written for
an order that is refused, so no savepoint is needed to undo one. Concurrent batches of other
processes wait on the row locks (PostgreSQL) or the write lock (SQLite): no oversell.

With a key, its row is written in the order's own transaction: a crash leaves no claim behind,
so a retry after a crash is placed at once (nothing to wait out), and a retry of a request that
committed finds its stored response under the row lock (never a second order). If another
process stores the same new key between this batch's read and its insert, the key's unique
index fails the batch before its commit; the group commit then runs each order alone, and that
order finds the stored row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import orjson
from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from commerce_api import idempotency
from commerce_api.accounts.service import Principal
from commerce_api.crypto import SecretBox
from commerce_api.db import Database, Executor, insert_rows
from commerce_api.errors import APIError, error_body
from commerce_api.events.service import NewEvent, record_events
from commerce_api.group_commit import GroupCommit
from commerce_api.orders import repository
from commerce_api.orders.domain import EVENT_FOR_STATUS, Line, OrderStatus
from commerce_api.orders.schemas import OrderCreate
from commerce_api.orders.service import cannot_reserve, line_positions, new_order_rows, render_order
from commerce_api.routing import JSON
from commerce_api.tables import idempotency_keys as keys
from commerce_api.tables import products
from commerce_api.timestamps import utcnow

CREATED = EVENT_FOR_STATUS[OrderStatus.PENDING]


@dataclass(frozen=True, slots=True)
class OrderRequest:
    """An order to place: who places it, what, and its ``Idempotency-Key`` if it has one."""

    principal: Principal
    data: OrderCreate
    keyed: idempotency.KeyedRequest | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """The response: a new order (201), the order's 4xx, or a replay of a stored one."""

    status: int
    headers: dict[str, str]
    body: bytes
    order: dict[str, Any] | None = field(default=None, compare=False)  # the 201's record

    @classmethod
    def of_error(cls, error: APIError) -> Outcome:
        """The contract's error response (as ``errors.error_response`` renders it)."""
        headers = {name.lower(): value for name, value in error.headers.items()}
        body = error_body(error.code, error.message, error.details)
        return cls(error.status, {"content-type": JSON, **headers}, body)

    def response(self) -> Response:
        return Response(self.body, status_code=self.status, headers=self.headers)


# What each request of a batch gets: an outcome, or an error to raise (an order's own 4xx
# without a key, or a key that cannot be used now: neither is stored).
Result = Outcome | APIError


@dataclass(slots=True)
class _Stock:
    available: int
    name: str
    price_minor: int
    taken: int = 0


async def place_batch(
    conn: Executor,
    requests: Sequence[OrderRequest],
    *,
    currency: str,
    box: SecretBox | None,
) -> list[Result]:
    """Place ``requests`` in the caller's write transaction (see the module doc); one result
    per request, in order. Requests must not share a key (``OrderDesk`` never batches two)."""
    now = utcnow()
    results: list[Result | None] = [None] * len(requests)
    stock = await _lock_products(conn, {i.product_id for r in requests for i in r.data.items})
    found_keys = await _lock_keys(conn, [r.keyed for r in requests if r.keyed is not None])

    # Requests whose key this batch stores an outcome for → the key row's created_at (a
    # take-over keeps the abandoned claim's).
    to_store: dict[int, datetime] = {}
    for index, request in enumerate(requests):
        if request.keyed is None:
            continue
        row = found_keys.get((request.keyed.scope, request.keyed.key))
        if row is None:  # a new key
            to_store[index] = now
            continue
        try:
            verdict = idempotency.verdict(row, request.keyed.fingerprint, now)
        except idempotency.KeyConflict as exc:
            results[index] = exc
            continue
        if verdict == "replay":
            assert box is not None, "a keyed request needs the box its response is stored with"
            body = box.decrypt_bytes(row.response_body)
            headers = idempotency.replayed_headers(row.response_headers)
            results[index] = Outcome(row.response_status, headers, body)
        else:
            to_store[index] = row.created_at if verdict == "take_over" else now

    placed: list[tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]] = []
    for index, request in enumerate(requests):
        if results[index] is not None:
            continue
        try:
            lines = _take(request, stock)
        except APIError as exc:
            results[index] = exc if request.keyed is None else Outcome.of_error(exc)
            continue
        account_id = request.principal.account_id
        assert account_id is not None  # line_positions refuses keys without an account
        order, items = new_order_rows(account_id, request.data, currency, lines)
        rendered = render_order(SimpleNamespace(**order), [SimpleNamespace(**i) for i in items])
        placed.append((order, items, rendered))
        headers = {"content-type": JSON, "location": f"/v1/orders/{order['id']}"}
        results[index] = Outcome(201, headers, orjson.dumps(rendered), rendered)

    await _write(conn, stock, placed)
    await record_events(
        conn,
        CREATED,
        [
            NewEvent(order["account_id"], rendered, order["created_at"])
            for order, _, rendered in placed
        ],
    )
    await _store_outcomes(conn, requests, results, to_store, found_keys, now, box)
    return [result for result in results if result is not None]


def _take(request: OrderRequest, stock: dict[str, _Stock]) -> list[Line]:
    """The order's lines, their units taken from ``stock`` — all of them or, raised, none."""
    data = request.data
    lines: dict[int, Line] = {}
    for product_id, index in line_positions(request.principal, data).items():
        quantity = data.items[index].quantity
        product = stock.get(product_id)
        left = None if product is None else product.available - product.taken
        if product is None or left is None or left < quantity:
            raise cannot_reserve(index, product_id, quantity, left)
        lines[index] = Line(product_id, product.name, quantity, product.price_minor)
    for line in lines.values():
        stock[line.product_id].taken += line.quantity
    return [lines[index] for index in range(len(data.items))]


async def _lock_products(conn: Executor, product_ids: set[str]) -> dict[str, _Stock]:
    """The active products among ``product_ids``, locked until the commit, in id order."""
    if not product_ids:
        return {}
    query = (
        select(products.c.id, products.c.inventory_count, products.c.name, products.c.price_minor)
        .where(products.c.id.in_(sorted(product_ids)), products.c.archived_at.is_(None))
        .order_by(products.c.id)
        .with_for_update()  # PostgreSQL; SQLite's write transaction already holds the lock
    )
    rows = (await conn.execute(query)).all()
    return {row.id: _Stock(row.inventory_count, row.name, row.price_minor) for row in rows}


async def _lock_keys(
    conn: Executor, keyed: list[idempotency.KeyedRequest]
) -> dict[tuple[str, str], Any]:
    """The rows the batch's keys already have, locked until the commit, by (scope, key). A key
    without a row gets one when its outcome is stored (``_store_outcomes``)."""
    if not keyed:
        return {}
    wanted = {(k.scope, k.key) for k in keyed}
    query = (  # two plain IN lists: cheaper to run than a list of pairs; the pairs are sifted
        select(keys)
        .where(
            keys.c.scope.in_(sorted({scope for scope, _ in wanted})),
            keys.c.key.in_(sorted({key for _, key in wanted})),
        )
        .order_by(keys.c.scope, keys.c.key)
        .with_for_update()
    )
    rows = (await conn.execute(query)).all()
    return {(row.scope, row.key): row for row in rows if (row.scope, row.key) in wanted}


async def _write(
    conn: Executor,
    stock: dict[str, _Stock],
    placed: list[tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]],
) -> None:
    """The batch's stock changes (one per product), orders and order lines."""
    taken = [{"product": pid, "units": s.taken} for pid, s in sorted(stock.items()) if s.taken]
    if taken:
        await conn.execute(
            update(products)
            .where(products.c.id == bindparam("product"))
            .values(inventory_count=products.c.inventory_count - bindparam("units")),
            taken,
        )
    if placed:
        lines = [item for _, items, _ in placed for item in items]
        await repository.insert_orders(conn, [order for order, _, _ in placed], lines)


async def _store_outcomes(
    conn: Executor,
    requests: Sequence[OrderRequest],
    results: list[Result | None],
    to_store: dict[int, datetime],
    found_keys: dict[tuple[str, str], Any],
    now: datetime,
    box: SecretBox | None,
) -> None:
    """Each key's outcome (a 201 or the order's 4xx), in the orders' transaction: a new row
    for a new key, the locked row updated for a key taken over (or expired)."""
    new: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    keyed_in_order = sorted(  # rows written in key order: two batches never wait in a cycle
        (keyed.scope, keyed.key, index)
        for index in to_store
        if (keyed := requests[index].keyed) is not None
    )
    for _scope, _key, index in keyed_in_order:
        result, keyed, created_at = results[index], requests[index].keyed, to_store[index]
        assert isinstance(result, Outcome)
        assert keyed is not None
        assert box is not None
        values = idempotency.stored_values(result.status, result.headers, result.body, box)
        values.update(fingerprint=keyed.fingerprint, locked_at=now, created_at=created_at)
        if (keyed.scope, keyed.key) in found_keys:
            changed.append({f"new_{name}": value for name, value in values.items()})
            changed[-1].update(match_scope=keyed.scope, match_key=keyed.key)
        else:
            new.append({**values, "scope": keyed.scope, "key": keyed.key})
    # A plain INSERT: if another process stored one of these keys since the batch found it
    # free (PostgreSQL), the unique key fails the batch before its commit, nothing of it is
    # kept, and the group commit runs each order again alone — that one finds the key's row.
    await insert_rows(conn, keys, new)
    if changed:
        columns = [name.removeprefix("new_") for name in changed[0] if name.startswith("new_")]
        await conn.execute(
            update(keys)
            .where(keys.c.scope == bindparam("match_scope"), keys.c.key == bindparam("match_key"))
            .values({name: bindparam(f"new_{name}") for name in columns}),
            changed,
        )


def _key_of(request: OrderRequest) -> tuple[str, str] | None:
    return None if request.keyed is None else (request.keyed.scope, request.keyed.key)


async def create_order(
    conn: AsyncConnection, principal: Principal, data: OrderCreate, currency: str
) -> dict[str, Any]:
    """Place one order without a key in the caller's transaction (the CLI and tests); its
    record, or the order's 4xx raised."""
    (result,) = await place_batch(
        conn, [OrderRequest(principal, data)], currency=currency, box=None
    )
    if isinstance(result, APIError):
        raise result
    assert result.order is not None
    return result.order


class OrderDesk:
    """Where a process places its orders: a group commit of :func:`place_batch`."""

    def __init__(self, db: Database, currency: str, box: SecretBox) -> None:
        self._currency = currency
        self._box = box
        self._batches: GroupCommit[OrderRequest, Result] = GroupCommit(
            db, self._place, exclusive=_key_of
        )

    async def _place(self, conn: Executor, batch: list[OrderRequest]) -> list[Result]:
        return await place_batch(conn, batch, currency=self._currency, box=self._box)

    async def place(self, request: OrderRequest) -> Outcome:
        """The order's outcome once it is durable; raises the errors that are not stored."""
        result = await self._batches.submit(request)
        if isinstance(result, APIError):
            raise result
        return result

    @property
    def stats(self) -> tuple[int, int]:
        """(batches committed, orders they carried): for tests and the benchmark."""
        return self._batches.batches, self._batches.items

    async def close(self) -> None:
        await self._batches.close()
