"""Placing an order on SQLite: one job of the group commit (``commerce_api.sqlite_writer``).

The same steps as ``orders.service.create_order`` — the checks and the error messages are the
very functions it uses — written against the standard library's ``sqlite3`` so that the whole
order is one call on the writer's thread: reserve each line's stock with a conditional UPDATE
(in product-id order), insert the order and its lines, the ``order.created`` event and its
outbox deliveries, and — with an ``Idempotency-Key`` — the stored response, all inside the
job's savepoint of the batch's transaction.

With a key the claim is part of the job too. The job runs under the database's write lock, so
it reads the key's row, decides (replay, 422, 409 in flight, take over — ``idempotency.verdict``)
and writes the outcome in one step: no other request can slip in between, and no claim has to
be committed first. A 4xx of the order itself is stored like a success; a crash stores nothing.

Values are converted for the columns by SQLAlchemy's own bind processors for the tables, so a
row written here is byte for byte the row the engine would have written.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import orjson
from sqlalchemy import Table
from sqlalchemy.dialects.sqlite.aiosqlite import dialect as aiosqlite_dialect
from starlette.responses import Response

from commerce_api import idempotency
from commerce_api.accounts.service import Principal
from commerce_api.crypto import SecretBox
from commerce_api.errors import APIError, error_body
from commerce_api.ids import new_id
from commerce_api.orders.domain import EVENT_FOR_STATUS, Line, OrderStatus
from commerce_api.orders.schemas import OrderCreate
from commerce_api.orders.service import (
    cannot_reserve,
    line_positions,
    new_order_rows,
    render_order,
)
from commerce_api.routing import JSON
from commerce_api.tables import events, idempotency_keys, order_items, orders, webhook_deliveries
from commerce_api.timestamps import from_sqlite, utcnow
from commerce_api.webhooks import repository as webhooks

_DIALECT = aiosqlite_dialect()


class _Insert:
    """``INSERT INTO table (...) VALUES (?, ...)`` with the columns' own value conversions."""

    def __init__(self, table: Table) -> None:
        self.columns = [column.name for column in table.columns]
        names = ", ".join(f'"{name}"' for name in self.columns)
        marks = ", ".join("?" for _ in self.columns)
        self.sql = f'INSERT INTO "{table.name}" ({names}) VALUES ({marks})'  # noqa: S608
        self.convert: dict[str, Callable[[Any], Any] | None] = {
            column.name: column.type.dialect_impl(_DIALECT).bind_processor(_DIALECT)
            for column in table.columns
        }
        self._pairs = list(self.convert.items())

    def params(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        row = []
        for name, convert in self._pairs:
            value = values.get(name)
            row.append(value if convert is None or value is None else convert(value))
        return tuple(row)

    def value(self, name: str, value: Any) -> Any:
        convert = self.convert[name]
        return value if convert is None or value is None else convert(value)


_ORDERS = _Insert(orders)
_ORDER_ITEMS = _Insert(order_items)
_EVENTS = _Insert(events)
_DELIVERIES = _Insert(webhook_deliveries)
_KEYS = _Insert(idempotency_keys)

_RESERVE = (
    "UPDATE products SET inventory_count = inventory_count - ? "
    "WHERE id = ? AND archived_at IS NULL AND inventory_count >= ? RETURNING name, price_minor"
)
_AVAILABLE = "SELECT inventory_count FROM products WHERE id = ? AND archived_at IS NULL"
_ENDPOINTS = (
    "SELECT id, event_types FROM webhook_endpoints "
    "WHERE account_id = ? AND deleted_at IS NULL AND enabled = 1"
)
_KEY_ROW = (
    "SELECT fingerprint, state, locked_at, created_at, response_status, response_headers, "
    "response_body FROM idempotency_keys WHERE scope = ? AND key = ?"
)
# What a taken-over (or expired) key's row is given: this request's print and outcome.
_KEY_OUTCOME = (
    *("fingerprint", "state", "locked_at", "created_at"),
    *("response_status", "response_headers", "response_body"),
)
_KEY_UPDATE = (
    f"UPDATE idempotency_keys SET {', '.join(f'{name} = ?' for name in _KEY_OUTCOME)} "  # noqa: S608
    "WHERE scope = ? AND key = ?"
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """The response: a new order (201), the order's 4xx, or a replay of a stored one."""

    status: int
    headers: dict[str, str]
    body: bytes

    @classmethod
    def of_error(cls, error: APIError) -> Outcome:
        """The contract's error response (as ``errors.error_response`` renders it)."""
        headers = {name.lower(): value for name, value in error.headers.items()}
        body = error_body(error.code, error.message, error.details)
        return cls(error.status, {"content-type": JSON, **headers}, body)

    def response(self) -> Response:
        return Response(self.body, status_code=self.status, headers=self.headers)


def place_order(
    conn: sqlite3.Connection,
    *,
    principal: Principal,
    data: OrderCreate,
    currency: str,
    keyed: idempotency.KeyedRequest | None,
    box: SecretBox,
) -> Outcome:
    """The job: the order (or the stored answer to its key), in the caller's transaction."""
    now = utcnow()
    existing = None
    created_at = now  # of the key: kept when an abandoned claim is taken over
    if keyed is not None:
        row = conn.execute(_KEY_ROW, (keyed.scope, keyed.key)).fetchone()
        if row is not None:
            existing = SimpleNamespace(
                fingerprint=row[0],
                state=row[1],
                locked_at=from_sqlite(row[2]),
                created_at=from_sqlite(row[3]),
            )
            found = idempotency.verdict(existing, keyed.fingerprint, now)  # may raise 422/409
            if found == "replay":
                stored = None if row[5] is None else json.loads(row[5])
                headers = idempotency.replayed_headers(stored)
                return Outcome(row[4], headers, box.decrypt_bytes(row[6]))
            if found == "take_over":
                created_at = existing.created_at
    conn.execute("SAVEPOINT place_order")
    try:
        order = _create(conn, principal, data, currency)
    except APIError as exc:
        conn.execute("ROLLBACK TO place_order")
        conn.execute("RELEASE place_order")
        if keyed is None:
            raise
        outcome = Outcome.of_error(exc)
    else:
        conn.execute("RELEASE place_order")
        location = f"/v1/orders/{order['id']}"
        outcome = Outcome(201, {"content-type": JSON, "location": location}, orjson.dumps(order))
    if keyed is not None:
        stored = idempotency.stored_values(outcome.status, outcome.headers, outcome.body, box)
        if existing is None:
            values: dict[str, Any] = {"scope": keyed.scope, "key": keyed.key}
            values.update(stored, fingerprint=keyed.fingerprint, locked_at=now, created_at=now)
            conn.execute(_KEYS.sql, _KEYS.params(values))
        else:
            values = {"fingerprint": keyed.fingerprint, **stored}
            values.update(locked_at=now, created_at=created_at)
            params = [_KEYS.value(name, values[name]) for name in _KEY_OUTCOME]
            conn.execute(_KEY_UPDATE, (*params, keyed.scope, keyed.key))
    return outcome


def _create(
    conn: sqlite3.Connection, principal: Principal, data: OrderCreate, currency: str
) -> dict[str, Any]:
    lines: dict[int, Line] = {}
    for product_id, index in line_positions(principal, data).items():
        quantity = data.items[index].quantity
        reserved = conn.execute(_RESERVE, (quantity, product_id, quantity)).fetchone()
        if reserved is None:
            found = conn.execute(_AVAILABLE, (product_id,)).fetchone()
            raise cannot_reserve(index, product_id, quantity, None if found is None else found[0])
        lines[index] = Line(product_id, reserved[0], quantity, reserved[1])
    account_id = principal.account_id
    assert account_id is not None  # line_positions refuses keys without an account
    order, items = new_order_rows(
        account_id, data, currency, [lines[index] for index in range(len(data.items))]
    )
    conn.execute(_ORDERS.sql, _ORDERS.params(order))
    conn.executemany(_ORDER_ITEMS.sql, [_ORDER_ITEMS.params(item) for item in items])
    rendered = render_order(SimpleNamespace(**order), [SimpleNamespace(**item) for item in items])
    event_type = EVENT_FOR_STATUS[OrderStatus.PENDING]
    _record_event(conn, account_id, event_type, rendered, order["created_at"])
    return rendered


def _record_event(
    conn: sqlite3.Connection, account_id: str, type_: str, data: dict[str, Any], now: datetime
) -> None:
    """``events.service.record_event``: the event and one delivery per subscribed endpoint."""
    event_id = new_id("evt")
    values = {"id": event_id, "account_id": account_id, "type": type_, "created_at": now}
    conn.execute(_EVENTS.sql, _EVENTS.params({**values, "data": data}))
    deliveries = [
        _DELIVERIES.params(webhooks.new_delivery(event_id, endpoint_id, now))
        for endpoint_id, event_types in conn.execute(_ENDPOINTS, (account_id,)).fetchall()
        if webhooks.subscribes(json.loads(event_types) if event_types else None, type_)
    ]
    if deliveries:
        conn.executemany(_DELIVERIES.sql, deliveries)
