"""The order desk's PostgreSQL statements: a batch's writes in two statements (round trips),
not eight (``placement.py`` decides; SQLite runs ``repository``'s statements, its round trips
being function calls)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Dialect, Row

from commerce_api.orders.repository import KEY_OUTCOME, store_key_outcomes
from commerce_api.storage import freshness
from commerce_api.storage.db import Executor
from commerce_api.storage.tables import audit_events, events, order_items, orders, products
from commerce_api.storage.tables import idempotency_keys as keys
from commerce_api.storage.unnest import Columns
from commerce_api.webhooks.repository import subscribed_deliveries_sql

# Each statement is data-modifying ``WITH`` over arrays (``storage.unnest``), built once per
# shape of the rows (their column names) and cached.

_WRITES: dict[tuple[Any, ...], tuple[str, tuple[Columns, ...]]] = {}


async def write_placed(
    conn: Executor,
    new_orders: Sequence[Mapping[str, Any]],
    lines: Sequence[Mapping[str, Any]],
    new_events: Sequence[Mapping[str, Any]],
    trail: Sequence[Mapping[str, Any]],
    event_type: str,
) -> None:
    """PostgreSQL: the batch's orders, their lines, their events (all of ``event_type``), the
    events' deliveries to the endpoints that want them and the orders' audit rows (``trail``),
    in one statement."""
    if not new_orders:
        return
    shape = (
        *(id(conn.dialect), tuple(new_orders[0]), tuple(lines[0])),
        *(tuple(new_events[0]), tuple(trail[0])),
    )
    found = _WRITES.get(shape)
    if found is None:
        sets = (
            Columns(orders, shape[1], "o"),
            Columns(order_items, shape[2], "i"),
            Columns(events, shape[3], "e"),
            Columns(audit_events, shape[4], "a"),
        )
        first = [1]
        for columns in sets:
            first.append(first[-1] + len(columns))
        type_param = f"${first[4]}::text"
        sql = (
            f"WITH placed_orders AS ({sets[0].insert(conn.dialect, first[0])}),"
            f" placed_lines AS ({sets[1].insert(conn.dialect, first[1])}),"
            f" placed_audit AS ({sets[3].insert(conn.dialect, first[3])}),"
            f" placed_events AS ({sets[2].insert(conn.dialect, first[2])}"
            " RETURNING id, account_id, created_at)"
            f" {subscribed_deliveries_sql('placed_events', type_param)}"
        )
        found = _WRITES[shape] = (sql, sets)
    sql, (order_set, line_set, event_set, audit_set) = found
    params = [
        *order_set.arrays(conn.dialect, new_orders),
        *line_set.arrays(conn.dialect, lines),
        *event_set.arrays(conn.dialect, new_events),
        *audit_set.arrays(conn.dialect, trail),
        event_type,
    ]
    await conn.exec_driver_sql(sql, tuple(params))


_FINISHES: dict[tuple[Any, ...], tuple[str, Columns]] = {}
_TAKEN = Columns(products, ("id", "inventory_count"), "taken")


async def finish_placed(
    conn: Executor,
    key_outcomes: Sequence[Mapping[str, Any]],
    with_row: Collection[tuple[str, str]],
    taken: Sequence[tuple[str, int]],
    *,
    lock: Collection[str] = (),
) -> list[Row[Any]]:
    """PostgreSQL: the keys' outcomes into their rows (``with_row``: claimed or found by the
    batch, locked), the stock taken (``(product_id, units)``) and the stock's notification, in
    one statement. The products' rows are locked already, or ``lock`` names them: the same
    statement then locks the active ones first (as ``stock_of(lock=True)``: in id order), takes
    units only from a row that still has them, and returns the locked rows as they were before
    — the caller checks them, and rolls back to its savepoint if they differ from its plan."""
    outcomes = [row for row in key_outcomes if (row["scope"], row["key"]) in with_row]
    # A key whose row went between its claim and the read (pruned meanwhile): written anew.
    gone = [row for row in key_outcomes if (row["scope"], row["key"]) not in with_row]
    await store_key_outcomes(conn, gone, set(with_row))
    notify = bool(taken) and freshness.unsaid(conn, freshness.STOCK)
    if not outcomes and not taken and not lock:
        return []
    names = tuple(outcomes[0]) if outcomes else ("scope", "key", *KEY_OUTCOME)
    shape = (id(conn.dialect), names, bool(lock))
    found = _FINISHES.get(shape)
    if found is None:
        found = _FINISHES[shape] = _finish_sql(conn.dialect, names, bool(lock))
    sql, key_set = found
    stock = [{"id": product_id, "inventory_count": units} for product_id, units in taken]
    params = [
        *key_set.arrays(conn.dialect, outcomes),
        *_TAKEN.arrays(conn.dialect, stock),
        notify,
    ]
    if lock:
        params.extend(_LOCKED.arrays(conn.dialect, [{"id": pid} for pid in sorted(lock)]))
    return list((await conn.exec_driver_sql(sql, tuple(params))).all())


_LOCKED = Columns(products, ("id",), "wanted")


def _finish_sql(dialect: Dialect, names: tuple[str, ...], lock: bool) -> tuple[str, Columns]:
    key_set = Columns(keys, names, "outcome")
    stock_first = 1 + len(key_set)
    notify = f"SELECT {freshness.notify_sql(freshness.STOCK)} WHERE ${stock_first + 2}::boolean"
    assignments = ", ".join(f"{name} = outcome.{name}" for name in KEY_OUTCOME)
    stored = (
        f"stored AS (UPDATE {keys.name} SET {assignments}"  # noqa: S608 - names, no input
        f" FROM {key_set.source(dialect, 1)}"
        f" WHERE {keys.name}.scope = outcome.scope AND {keys.name}.key = outcome.key)"
    )
    # S608 below: table and column names, parameter numbers; no input.
    take = (
        "UPDATE products SET inventory_count = products.inventory_count"  # noqa: S608
        " - taken.inventory_count"
        f" FROM {_TAKEN.source(dialect, stock_first)} WHERE products.id = taken.id"
    )
    if not lock:
        return f"WITH {stored}, stock AS ({take}) {notify}", key_set
    # The products locked, then changed, by one statement: the locking read is materialised
    # (its rows are locked, in id order, as they are read; the UPDATE changes only rows it has
    # returned, in their newest version, as READ COMMITTED updates a row changed meanwhile) —
    # the pattern of a job queue's ``SELECT … FOR UPDATE`` feeding an ``UPDATE``.
    locked = (
        "locked AS MATERIALIZED (SELECT id, inventory_count, name, price_minor"  # noqa: S608
        " FROM products"
        f" WHERE id IN (SELECT wanted.id FROM {_LOCKED.source(dialect, stock_first + 3)})"
        " AND archived_at IS NULL ORDER BY id FOR NO KEY UPDATE OF products)"
    )
    guarded = (
        f"{take} AND products.inventory_count >= taken.inventory_count"  # noqa: S608
        " AND products.id IN (SELECT id FROM locked)"
    )
    sql = (
        f"WITH {locked}, {stored}, stock AS ({guarded})"  # noqa: S608
        f" SELECT id, inventory_count, name, price_minor, ({notify}) AS said FROM locked"
    )
    return sql, key_set
