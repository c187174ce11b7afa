"""What a batch of orders decides, in memory and without I/O (``placement.py`` reads the rows
it decides on and writes what it decided): a result per request, in order, as the orders placed
one after another would get them — first come, first served.

A key's stored response is replayed (or the key refused: 422, 409 in flight); an order takes its
units only if every line fits after the orders before it, else it is refused (404/409) and takes
nothing, the same "N available" in its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import orjson

from commerce_api.accounts.service import Principal
from commerce_api.audit.service import order_created
from commerce_api.core.errors import APIError, error_body
from commerce_api.events.service import NewEvent
from commerce_api.idempotency import service as idempotency
from commerce_api.orders.domain import Line
from commerce_api.orders.new_orders import cannot_reserve, new_order_rows, requested_lines
from commerce_api.orders.schemas import OrderCreate
from commerce_api.orders.service import render_order
from commerce_api.storage.crypto import SecretBox

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
class Stock:
    """A product as the batch reads it, and what the batch takes of it."""

    available: int
    name: str
    price_minor: int
    taken: int = 0
    refused: bool = False  # an order was refused for want of this product's stock


def as_stock(rows: Sequence[Any]) -> dict[str, Stock]:
    """Product rows (``id``, ``inventory_count``, ``name``, ``price_minor``) as stock, by id."""
    return {row.id: Stock(row.inventory_count, row.name, row.price_minor) for row in rows}


@dataclass(slots=True)
class Plan:
    """What a batch decided: a result per request, and the units taken per product."""

    results: list[Result]
    stock: dict[str, Stock]
    key_outcomes: list[dict[str, Any]]  # the key rows' values, written after the check
    orders: list[dict[str, Any]]  # the rows to write: the orders, their lines, audit rows,
    lines: list[dict[str, Any]]
    trail: list[dict[str, Any]]
    new_events: list[NewEvent]  # and their events

    def taken(self) -> list[tuple[str, int]]:
        """``(product_id, units)`` the plan takes, in id order."""
        return [(pid, stock.taken) for pid, stock in sorted(self.stock.items()) if stock.taken]

    def holds_for(self, locked: dict[str, Stock]) -> bool:
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


def decide(
    requests: Sequence[OrderRequest],
    stock: dict[str, Stock],
    found_keys: dict[tuple[str, str], Any],
    *,
    now: datetime,
    currency: str,
    secret_box: SecretBox | None,
) -> Plan:
    """Decide every request against ``stock`` and ``found_keys`` (the key rows that exist, by
    ``(scope, key)``): the results, the units taken and the rows to write."""
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
    return Plan(
        [result for result in results if result is not None],
        stock,
        outcomes,
        [order for order, _, _ in placed],
        [item for _, items, _ in placed for item in items],
        trail,
        new_events,
    )


def _take(request: OrderRequest, stock: dict[str, Stock]) -> list[Line]:
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


def _key_outcomes(
    requests: Sequence[OrderRequest],
    results: list[Result | None],
    to_store: dict[int, datetime],
    now: datetime,
    secret_box: SecretBox | None,
) -> list[dict[str, Any]]:
    """The key rows' values: each key's outcome (a 201 or the order's 4xx), written once the
    batch holds its products and keys."""
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
