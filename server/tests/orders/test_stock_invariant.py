"""Stock is conserved by the order use cases, on both backends.

For every product: units in stock + units held by pending and fulfilled orders == the initial
stock, and the stock never goes below zero. Hypothesis drives random sequences of creates,
cancels and fulfilments through ``commerce_api.orders.service`` (each in its own write
transaction, as a request runs) and checks that, plus a model of what each step should do,
after every step. A create or a transition that is refused changes nothing.

pytest-asyncio runs ``@given`` on an ``async def`` test itself: each example is a coroutine run
on the session loop, with the test's fixtures (one ``db`` per backend, shared by the examples;
each example makes its own account and products, so examples don't see each other's rows).
The ``examples_run`` fixture checks, at teardown, that the examples really ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import APIError
from commerce_api.orders import desk, service
from commerce_api.orders.schemas import OrderCreate
from commerce_api.storage.db import Database
from commerce_api.storage.tables import events, order_items, orders, products
from tests import factories, helpers

PRODUCTS = 3
MAX_EXAMPLES = 40
MAX_STEPS = 25


# --- the steps ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Create:
    lines: tuple[tuple[int, int], ...]  # (product index, quantity), distinct products


@dataclass(frozen=True, slots=True)
class Cancel:
    pick: int  # which of the orders placed so far (modulo their number)


@dataclass(frozen=True, slots=True)
class Fulfil:
    pick: int


Step = Create | Cancel | Fulfil

creates = st.lists(
    st.tuples(st.integers(0, PRODUCTS - 1), st.integers(1, 3)),
    min_size=1,
    max_size=PRODUCTS,
    unique_by=lambda line: line[0],
).map(lambda lines: Create(tuple(lines)))


def _step(kind: str) -> st.SearchStrategy[Step]:
    if kind == "create":
        return creates
    return st.integers(0, 1000).map(Cancel if kind == "cancel" else Fulfil)


# Creates three times as likely as each transition, so stock runs out and orders pile up.
steps = st.lists(
    st.sampled_from(["create", "create", "create", "cancel", "fulfil"]).flatmap(_step),
    min_size=5,
    max_size=MAX_STEPS,
)
initial_stocks = st.lists(st.integers(0, 10), min_size=PRODUCTS, max_size=PRODUCTS)


# --- the model and the database's state ---------------------------------------------------------


@dataclass
class ModelOrder:
    id: str
    lines: tuple[tuple[int, int], ...]
    status: str = "pending"


@dataclass
class Model:
    initial: list[int]
    stock: list[int]
    orders: list[ModelOrder] = field(default_factory=list)

    def event_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for order in self.orders:
            counts["order.created"] += 1
            if order.status != "pending":
                counts[f"order.{order.status}"] += 1
        return counts


@dataclass(frozen=True, slots=True)
class State:
    stock: tuple[int, ...]
    held: tuple[int, ...]  # units in this account's pending and fulfilled orders
    statuses: dict[str, str]
    events: Counter[str]


async def read_state(db: Database, account_id: str, product_ids: Sequence[str]) -> State:
    async with db.read() as conn:
        stock_rows = await conn.execute(
            select(products.c.id, products.c.inventory_count).where(products.c.id.in_(product_ids))
        )
        stock = {row[0]: int(row[1]) for row in stock_rows}
        held_rows = await conn.execute(
            select(order_items.c.product_id, func.sum(order_items.c.quantity))
            .join(orders, orders.c.id == order_items.c.order_id)
            .where(
                order_items.c.product_id.in_(product_ids),
                orders.c.status.in_(["pending", "fulfilled"]),
            )
            .group_by(order_items.c.product_id)
        )
        held = {row[0]: int(row[1]) for row in held_rows}
        status_rows = await conn.execute(
            select(orders.c.id, orders.c.status).where(orders.c.account_id == account_id)
        )
        event_rows = await conn.execute(
            select(events.c.type, func.count())
            .where(events.c.account_id == account_id)
            .group_by(events.c.type)
        )
        return State(
            stock=tuple(stock[product_id] for product_id in product_ids),
            held=tuple(held.get(product_id, 0) for product_id in product_ids),
            statuses={row[0]: row[1] for row in status_rows},
            events=Counter({row[0]: int(row[1]) for row in event_rows}),
        )


def check(state: State, model: Model) -> None:
    for index in range(PRODUCTS):
        assert state.stock[index] >= 0
        assert state.stock[index] + state.held[index] == model.initial[index], (index, state)
    assert list(state.stock) == model.stock
    assert state.statuses == {order.id: order.status for order in model.orders}
    assert state.events == model.event_counts()


# --- set-up -------------------------------------------------------------------------------------


async def new_principal(db: Database) -> Principal:
    return (await factories.new_customer(db, "Stock invariant")).principal


async def new_products(db: Database, stocks: Sequence[int]) -> list[str]:
    return await factories.new_products(db, *stocks, price_minor=500, category="invariant")


def order_request(product_ids: Sequence[str], lines: Sequence[tuple[int, int]]) -> OrderCreate:
    items = [(product_ids[index], quantity) for index, quantity in lines]
    return factories.order_create(*items, customer_id="cus_invariant")


# --- running a step -----------------------------------------------------------------------------


@dataclass
class Tally:
    """What the examples did, to show they exercised every path."""

    examples: int = 0
    steps: Counter[str] = field(default_factory=Counter)


Work = Callable[[AsyncConnection], Awaitable[dict[str, Any]]]


async def _attempt(db: Database, work: Work) -> tuple[dict[str, Any] | None, APIError | None]:
    """Run ``work`` in a write transaction (as a request does): (result, None) when it commits,
    (None, the error) when it is refused and rolled back."""
    try:
        async with db.write() as conn:
            return await work(conn), None
    except APIError as exc:
        return None, exc


def create_order(principal: Principal, product_ids: list[str], step: Create) -> Work:
    request = order_request(product_ids, step.lines)

    async def work(conn: AsyncConnection) -> dict[str, Any]:
        return await desk.create_order(conn, principal, request, "USD")

    return work


def cancel_order(principal: Principal, order_id: str) -> Work:
    async def work(conn: AsyncConnection) -> dict[str, Any]:
        return await service.cancel_order(conn, principal, order_id)

    return work


def fulfil_order(principal: Principal, order_id: str) -> Work:
    async def work(conn: AsyncConnection) -> dict[str, Any]:
        return await service.fulfill_order(conn, principal, order_id, "sandbox")

    return work


async def run_create(
    db: Database, principal: Principal, product_ids: list[str], model: Model, step: Create
) -> str:
    # Stock is reserved in product-id order (= index order here): the first short line fails.
    short = sorted(
        (index, position)
        for position, (index, quantity) in enumerate(step.lines)
        if quantity > model.stock[index]
    )
    order, refused = await _attempt(db, create_order(principal, product_ids, step))
    if refused is not None:
        assert short, f"refused although the stock was there: {refused.message}"
        assert refused.status == 409
        assert refused.code == "invalid_request"
        assert refused.details == f"items[{short[0][1]}].quantity"
        return "create refused"
    assert not short, f"accepted although {short} had too little stock"
    assert order is not None
    assert order["status"] == "pending"
    assert [(item["product_id"], item["quantity"]) for item in order["items"]] == [
        (product_ids[index], quantity) for index, quantity in step.lines
    ]
    for index, quantity in step.lines:
        model.stock[index] -= quantity
    model.orders.append(ModelOrder(order["id"], step.lines))
    return "create"


async def run_transition(
    db: Database, principal: Principal, model: Model, step: Cancel | Fulfil
) -> str:
    if not model.orders:
        return "no order yet"
    target = model.orders[step.pick % len(model.orders)]
    verb = "cancel" if isinstance(step, Cancel) else "fulfil"
    if isinstance(step, Cancel):
        order, refused = await _attempt(db, cancel_order(principal, target.id))
    else:
        order, refused = await _attempt(db, fulfil_order(principal, target.id))
    if refused is not None:
        assert target.status != "pending", f"{verb} refused on a pending order: {refused.message}"
        assert refused.status == 409
        assert refused.details == "status"
        return f"{verb} refused"
    assert target.status == "pending", f"{verb} accepted on a {target.status} order"
    assert order is not None
    if isinstance(step, Cancel):
        target.status = "canceled"
        for index, quantity in target.lines:
            model.stock[index] += quantity
    else:
        target.status = "fulfilled"
    assert order["status"] == target.status
    return verb


@pytest.fixture
def examples_run() -> Iterator[Tally]:
    tally = Tally()
    yield tally
    # derandomize=True makes the run reproducible; these hold for the examples it draws.
    assert tally.examples >= MAX_EXAMPLES * 3 // 4, f"only {tally.examples} examples ran"
    for kind in ("create", "create refused", "cancel", "cancel refused", "fulfil"):
        assert tally.steps[kind] >= 3, f"too few {kind!r} steps: {tally.steps}"


@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(initial=initial_stocks, plan=steps)
async def test_stock_is_conserved_by_creates_cancels_and_fulfilments(
    db: Database, examples_run: Tally, initial: list[int], plan: list[Step]
) -> None:
    examples_run.examples += 1
    principal = await new_principal(db)
    assert principal.account_id is not None
    product_ids = await new_products(db, initial)
    model = Model(initial=list(initial), stock=list(initial))
    check(await read_state(db, principal.account_id, product_ids), model)

    for step in plan:
        before = await read_state(db, principal.account_id, product_ids)
        if isinstance(step, Create):
            outcome = await run_create(db, principal, product_ids, model, step)
        else:
            outcome = await run_transition(db, principal, model, step)
        examples_run.steps[outcome] += 1
        after = await read_state(db, principal.account_id, product_ids)
        if outcome.endswith("refused"):
            assert after == before, f"a refused {outcome.split()[0]} changed something"
        check(after, model)


# --- a crash between the stock change and the event ---------------------------------------------


async def crash_set_up(db: Database) -> tuple[Principal, str, list[str]]:
    """A principal, its account id, and two products with 5 and 2 in stock."""
    principal = await new_principal(db)
    assert principal.account_id is not None
    return principal, principal.account_id, await new_products(db, [5, 2])


async def _crash(*_args: Any, **_kwargs: Any) -> str:
    raise RuntimeError("crash while writing the event")


async def test_a_crash_before_the_event_rolls_back_the_reservation(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    principal, account_id, product_ids = await crash_set_up(db)
    before = await read_state(db, account_id, product_ids)
    helpers.crash_after_writing_orders(monkeypatch, "crash while writing the event")

    with pytest.raises(RuntimeError, match="crash while writing the event"):
        async with db.write() as conn:
            await desk.create_order(
                conn, principal, order_request(product_ids, [(0, 3), (1, 2)]), "USD"
            )

    after = await read_state(db, account_id, product_ids)
    assert after == before
    assert after.stock == (5, 2)
    assert after.statuses == {}
    async with db.read() as conn:
        lines = await conn.scalar(
            select(func.count())
            .select_from(order_items)
            .where(order_items.c.product_id.in_(product_ids))
        )
    assert lines == 0


async def test_a_crash_before_the_cancel_event_keeps_the_order_and_its_reservation(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    principal, account_id, product_ids = await crash_set_up(db)
    order = await factories.place_order(db, principal, (product_ids[0], 3), (product_ids[1], 2))
    before = await read_state(db, account_id, product_ids)
    assert before.stock == (2, 0)
    monkeypatch.setattr(service, "record_event", _crash)

    with pytest.raises(RuntimeError, match="crash while writing the event"):
        async with db.write() as conn:
            await service.cancel_order(conn, principal, order["id"])

    after = await read_state(db, account_id, product_ids)
    assert after == before
    assert after.statuses == {order["id"]: "pending"}
    assert after.events == Counter({"order.created": 1})
