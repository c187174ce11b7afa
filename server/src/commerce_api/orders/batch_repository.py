"""The order desk's PostgreSQL statements: a batch's writes in one or two statements (round
trips), not eight (``placement.py`` decides; SQLite runs ``placement_repository``'s, its round
trips being function calls).

Each statement is data-modifying ``WITH`` over arrays (``storage.unnest``), built once per shape
of the rows (their column names) and cached:

- :func:`claim_and_read`: the batch's new keys claimed and its products read.
- :func:`place_and_finish`, the usual batch's only write: it locks the products, checks them
  against what the batch decided on, and — only if they hold — writes the orders, lines, events,
  deliveries and audit rows, stores the keys' outcomes and takes the stock.
- :func:`write_placed` and :func:`finish_placed`, the same writes in two statements, for a batch
  that decides under locks it took before (a batch with existing key rows, or one whose check
  failed).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy.engine import Dialect, Row

from commerce_api.orders.placement_repository import KEY_OUTCOME, store_key_outcomes
from commerce_api.storage import freshness
from commerce_api.storage.db import Executor
from commerce_api.storage.tables import audit_events, events, order_items, orders, products
from commerce_api.storage.tables import idempotency_keys as keys
from commerce_api.storage.unnest import Columns
from commerce_api.webhooks.repository import subscribed_deliveries_sql


@dataclass(frozen=True, slots=True)
class Placed:
    """What a batch writes beside its keys and stock: its orders, their lines, their events
    (all of ``event_type``) and the orders' audit rows (``trail``)."""

    orders: Sequence[Mapping[str, Any]]
    lines: Sequence[Mapping[str, Any]]
    events: Sequence[Mapping[str, Any]]
    trail: Sequence[Mapping[str, Any]]
    event_type: str

    def shape(self) -> tuple[tuple[str, ...], ...] | None:
        """The rows' column names (None without an order): what a statement is built for."""
        if not self.orders:
            return None
        return tuple(tuple(rows[0]) for rows in (self.orders, self.lines, self.events, self.trail))

    def arrays(self, dialect: Dialect, sets: tuple[Columns, ...]) -> list[Any]:
        return [
            *sets[0].arrays(dialect, self.orders),
            *sets[1].arrays(dialect, self.lines),
            *sets[2].arrays(dialect, self.events),
            *sets[3].arrays(dialect, self.trail),
            self.event_type,
        ]


@dataclass(frozen=True, slots=True)
class Expected:
    """A product as the batch decided on it: its name and price, the units it takes, and for a
    product an order was refused for want of (its message names the count) that count."""

    id: str
    name: str
    price_minor: int
    taken: int
    exact: int | None


def _write_ctes(
    dialect: Dialect, shape: tuple[tuple[str, ...], ...], first: int, where: str | None = None
) -> tuple[str, tuple[Columns, ...], int]:
    """The ``WITH`` items that write a :class:`Placed` (its parameters numbered from ``first``;
    ``where``: an SQL condition every row is written under), their column sets, and the next
    free parameter number."""
    sets = (
        Columns(orders, shape[0], "o"),
        Columns(order_items, shape[1], "i"),
        Columns(events, shape[2], "e"),
        Columns(audit_events, shape[3], "a"),
    )
    numbers = [first]
    for columns in sets:
        numbers.append(numbers[-1] + len(columns))
    type_param = f"${numbers[4]}::text"
    ctes = (
        f"placed_orders AS ({sets[0].insert(dialect, numbers[0], where)}),"
        f" placed_lines AS ({sets[1].insert(dialect, numbers[1], where)}),"
        f" placed_audit AS ({sets[3].insert(dialect, numbers[3], where)}),"
        f" placed_events AS ({sets[2].insert(dialect, numbers[2], where)}"
        " RETURNING id, account_id, created_at),"
        f" placed_deliveries AS ({subscribed_deliveries_sql('placed_events', type_param)})"
    )
    return ctes, sets, numbers[4] + 1


def _active_products(ids: int) -> str:
    """The ``SELECT`` of the active products among the ids of array parameter ``ids``, with
    the columns ``placement_repository.stock_of`` reads."""
    return (
        "SELECT id, inventory_count, name, price_minor FROM products"  # noqa: S608 - no input
        f" WHERE id IN (SELECT wanted.id FROM unnest(${ids}::text[]) AS wanted(id))"
        " AND archived_at IS NULL"
    )


_CLAIM_AND_READ: dict[tuple[Any, ...], tuple[str, Columns]] = {}


async def claim_and_read(
    conn: Executor, claims: Sequence[Mapping[str, Any]], product_ids: Collection[str]
) -> tuple[set[tuple[str, str]], list[Row[Any]]]:
    """PostgreSQL, one statement: insert these key rows where none exists yet (``ON CONFLICT DO
    NOTHING``, in the given order), and read the active products among ``product_ids`` (not
    locked, as ``placement_repository.stock_of``). The ``(scope, key)`` pairs inserted, and the
    products. One statement for any number of keys: a ``VALUES`` list per count would be a
    statement to prepare (a round trip) on each connection for each new count."""
    shape = (id(conn.dialect), tuple(claims[0]))
    found = _CLAIM_AND_READ.get(shape)
    if found is None:
        claim_set = Columns(keys, shape[1], "claim")
        ids = 1 + len(claim_set)
        sql = (
            f"WITH claimed AS ({claim_set.insert(conn.dialect, 1)}"  # noqa: S608 - no input
            " ON CONFLICT (scope, key) DO NOTHING RETURNING scope, key)"
            " SELECT scope, key, NULL AS id, NULL::bigint AS inventory_count, NULL AS name,"
            " NULL::bigint AS price_minor FROM claimed UNION ALL"
            f" SELECT NULL, NULL, * FROM ({_active_products(ids)}) AS active"
        )
        found = _CLAIM_AND_READ[shape] = (sql, claim_set)
    sql, claim_set = found
    params = [*claim_set.arrays(conn.dialect, claims), sorted(product_ids)]
    rows = (await conn.exec_driver_sql(sql, tuple(params))).all()
    claimed = {(row.scope, row.key) for row in rows if row.id is None}
    return claimed, [row for row in rows if row.id is not None]


_WRITES: dict[tuple[Any, ...], tuple[str, tuple[Columns, ...]]] = {}


async def write_placed(conn: Executor, placed: Placed) -> None:
    """PostgreSQL: the batch's orders, their lines, their events, the events' deliveries to the
    endpoints that want them and the orders' audit rows, in one statement."""
    shape = placed.shape()
    if shape is None:
        return
    found = _WRITES.get((id(conn.dialect), shape))
    if found is None:
        ctes, sets, _ = _write_ctes(conn.dialect, shape, 1)
        found = _WRITES[id(conn.dialect), shape] = (f"WITH {ctes} SELECT 1", sets)
    sql, sets = found
    await conn.exec_driver_sql(sql, tuple(placed.arrays(conn.dialect, sets)))


_TAKEN = Columns(products, ("id", "inventory_count"), "taken")


async def _outcomes(
    conn: Executor,
    key_outcomes: Sequence[Mapping[str, Any]],
    with_row: Collection[tuple[str, str]],
    taken: bool,
) -> tuple[list[Mapping[str, Any]], tuple[str, ...], bool]:
    """What both finishes begin with: the outcomes of keys with a row (to update), the names of
    their columns, and whether the statement is to send the stock's notification (``taken``:
    it takes stock). Keys whose row went between the claim and the read (pruned meanwhile) are
    written anew here."""
    stored = [row for row in key_outcomes if (row["scope"], row["key"]) in with_row]
    gone = [row for row in key_outcomes if (row["scope"], row["key"]) not in with_row]
    await store_key_outcomes(conn, gone, set(with_row))
    names = tuple(stored[0]) if stored else ("scope", "key", *KEY_OUTCOME)
    return stored, names, taken and freshness.unsaid(conn, freshness.STOCK)


def _finish_ctes(
    dialect: Dialect, names: tuple[str, ...], first: int, where: str | None = None
) -> tuple[str, Columns, int, int]:
    """The ``WITH`` items that store the keys' outcomes and take the stock (parameters from
    ``first``; ``where``: an SQL condition both are under), the keys' column set, the stock's
    first parameter and the next free one."""
    also = "" if where is None else f" AND {where}"
    key_set = Columns(keys, names, "outcome")
    stock_first = first + len(key_set)
    assignments = ", ".join(f"{name} = outcome.{name}" for name in KEY_OUTCOME)
    # S608 below: table and column names, parameter numbers; no input.
    ctes = (
        f"stored AS (UPDATE {keys.name} SET {assignments}"  # noqa: S608
        f" FROM {key_set.source(dialect, first)}"
        f" WHERE {keys.name}.scope = outcome.scope AND {keys.name}.key = outcome.key{also}),"
        " stock AS (UPDATE products SET inventory_count = products.inventory_count"
        f" - taken.inventory_count FROM {_TAKEN.source(dialect, stock_first)}"
        f" WHERE products.id = taken.id{also})"
    )
    return ctes, key_set, stock_first, stock_first + len(_TAKEN)


_FINISHES: dict[tuple[Any, ...], tuple[str, Columns]] = {}


async def finish_placed(
    conn: Executor,
    key_outcomes: Sequence[Mapping[str, Any]],
    with_row: Collection[tuple[str, str]],
    taken: Sequence[tuple[str, int]],
) -> None:
    """PostgreSQL: the keys' outcomes into their rows (``with_row``: claimed or found by the
    batch, locked), the stock taken (``(product_id, units)``, the rows locked) and the stock's
    notification, in one statement."""
    outcomes, names, notify = await _outcomes(conn, key_outcomes, with_row, bool(taken))
    if not outcomes and not taken:
        return
    found = _FINISHES.get((id(conn.dialect), names))
    if found is None:
        ctes, key_set, _, flag = _finish_ctes(conn.dialect, names, 1)
        notify_sql = freshness.notify_sql(freshness.STOCK)
        sql = f"WITH {ctes} SELECT {notify_sql} WHERE ${flag}::boolean"
        found = _FINISHES[id(conn.dialect), names] = (sql, key_set)
    sql, key_set = found
    stock = [{"id": product_id, "inventory_count": units} for product_id, units in taken]
    params = [*key_set.arrays(conn.dialect, outcomes), *_TAKEN.arrays(conn.dialect, stock), notify]
    await conn.exec_driver_sql(sql, tuple(params))


_PLACE_AND_FINISH: dict[tuple[Any, ...], tuple[str, tuple[Columns, ...], Columns]] = {}


async def place_and_finish(
    conn: Executor,
    product_ids: Collection[str],
    expected: Sequence[Expected],
    placed: Placed,
    key_outcomes: Sequence[Mapping[str, Any]],
    with_row: Collection[tuple[str, str]],
) -> tuple[bool, list[Row[Any]]]:
    """PostgreSQL, one statement: lock the active products among ``product_ids`` (in id order,
    as ``placement_repository.stock_of(lock=True)``) and compare them with ``expected`` — the
    same active products, names and prices, the units taken there, a refusal's count the same.
    If they hold, write ``placed`` (as :func:`write_placed`) and finish (as
    :func:`finish_placed`: the units of ``expected``); else write nothing. Whether they held,
    and the locked rows (the products stay locked either way, for the caller to decide on)."""
    taken = [{"id": e.id, "inventory_count": e.taken} for e in expected if e.taken]
    outcomes, names, notify = await _outcomes(conn, key_outcomes, with_row, bool(taken))
    shape = placed.shape()
    cached = _PLACE_AND_FINISH.get((id(conn.dialect), shape, names))
    if cached is None:
        cached = _place_and_finish_sql(conn.dialect, shape, names)
        _PLACE_AND_FINISH[id(conn.dialect), shape, names] = cached
    sql, write_sets, key_set = cached
    params = [] if shape is None else placed.arrays(conn.dialect, write_sets)
    params += [*key_set.arrays(conn.dialect, outcomes), *_TAKEN.arrays(conn.dialect, taken)]
    params += [
        notify,
        sorted(product_ids),
        *([getattr(e, column.name) for e in expected] for column in fields(Expected)),
    ]
    rows = (await conn.exec_driver_sql(sql, tuple(params))).all()
    held = bool(rows[0].held)
    if not held and notify:
        freshness.unsay(conn, freshness.STOCK)  # nothing was taken: nothing was said
    return held, [row for row in rows if row.id is not None]


def _place_and_finish_sql(
    dialect: Dialect, shape: tuple[tuple[str, ...], ...] | None, names: tuple[str, ...]
) -> tuple[str, tuple[Columns, ...], Columns]:
    # The products are locked first: the locking read is materialised and the check reads all
    # of it before any write (each write's condition is the check's one row), and the stock's
    # UPDATE changes only rows the read returned, in their newest version (READ COMMITTED) —
    # the pattern of a job queue's ``SELECT … FOR UPDATE`` feeding an ``UPDATE``.
    held = "(SELECT held FROM verdict)"
    write_sets: tuple[Columns, ...] = ()
    writes, first = "", 1
    if shape is not None:
        writes, write_sets, first = _write_ctes(dialect, shape, 1, where=held)
        writes += ","
    finish, key_set, _, flag = _finish_ctes(dialect, names, first, where=held)
    ids, expected = flag + 1, flag + 2
    x = (
        f"unnest(${expected}::text[], ${expected + 1}::text[], ${expected + 2}::bigint[],"
        f" ${expected + 3}::bigint[], ${expected + 4}::bigint[])"
        " AS x(id, name, price_minor, taken, exact)"
    )
    sql = (
        f"WITH locked AS MATERIALIZED ({_active_products(ids)}"  # noqa: S608
        " ORDER BY id FOR NO KEY UPDATE OF products),"
        " verdict AS MATERIALIZED (SELECT (SELECT count(*) FROM locked)"
        f" = cardinality(${expected}::text[]) AND NOT EXISTS (SELECT FROM {x}"
        " LEFT JOIN locked AS l ON l.id = x.id WHERE l.id IS NULL OR l.name <> x.name"
        " OR l.price_minor <> x.price_minor OR l.inventory_count < x.taken"
        " OR l.inventory_count <> coalesce(x.exact, l.inventory_count)) AS held),"
        f" {writes} {finish}"
        " SELECT verdict.held, locked.id, locked.inventory_count, locked.name,"
        f" locked.price_minor, (SELECT {freshness.notify_sql(freshness.STOCK)}"
        f" WHERE ${flag}::boolean AND verdict.held) AS said"
        " FROM verdict LEFT JOIN locked ON true"
    )
    return sql, write_sets, key_set
