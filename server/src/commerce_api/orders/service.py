"""Order use cases. Each runs inside the caller's write transaction: the order, its stock
change and its event commit together or not at all."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from commerce_api.accounts.service import Principal
from commerce_api.audit import service as audit
from commerce_api.core.errors import (
    APIError,
    forbidden,
    not_found,
    validation_error,
)
from commerce_api.core.ids import looks_like
from commerce_api.core.money import to_major
from commerce_api.core.pagination import (
    WHOLE_LIST,
    NewestFirst,
    newest_first_rows,
    page,
)
from commerce_api.core.timestamps import format_optional_timestamp, format_timestamp, utcnow
from commerce_api.events.service import record_event
from commerce_api.orders import repository, search_repository
from commerce_api.orders.domain import (
    EVENT_FOR_STATUS,
    IllegalTransition,
    OrderAction,
    OrderStatus,
    next_status,
)
from commerce_api.orders.schemas import OrderFulfill, TrackingCreate
from commerce_api.settings import Environment
from commerce_api.storage.executor import Executor

if TYPE_CHECKING:
    from commerce_api.storage.db import Database

ADDRESS_FIELDS = ("street", "line2", "city", "state", "postal_code", "country")
TRACKING_FIELDS = ("carrier", "number", "url")
_STAMP_FOR_STATUS = {OrderStatus.FULFILLED: "fulfilled_at", OrderStatus.CANCELED: "canceled_at"}


def render_order(order: Any, lines: list[Any]) -> dict[str, Any]:
    """The order record of the API (and of the events' ``data``)."""
    return {
        "id": order.id,
        "status": order.status,
        "customer_id": order.customer_id,
        "items": [
            {
                "product_id": line.product_id,
                "name": line.name,
                "quantity": line.quantity,
                "unit_price": to_major(line.unit_price_minor),
            }
            for line in lines
        ],
        "shipping_address": {field: order.shipping_address.get(field) for field in ADDRESS_FIELDS},
        "total": to_major(order.total_minor),
        "currency": order.currency,
        "created_at": format_timestamp(order.created_at),
        "updated_at": format_timestamp(order.updated_at),
        "fulfilled_at": format_optional_timestamp(order.fulfilled_at),
        "canceled_at": format_optional_timestamp(order.canceled_at),
        "tracking": _rendered_tracking(order.tracking),
        "version": order.version,
    }


def _rendered_tracking(tracking: dict[str, Any] | None) -> dict[str, Any] | None:
    if tracking is None:
        return None
    return {field: tracking.get(field) for field in TRACKING_FIELDS}


def _order_not_found(order_id: str) -> APIError:
    return not_found(f"No order with id `{order_id}`.", "id")


async def _load(conn: Executor, principal: Principal | None, order_id: str) -> Any:
    """The order if this caller may see it (``None`` = the operator's CLI), else 404."""
    order = await repository.get_order(conn, order_id) if looks_like("ord", order_id) else None
    visible = order is not None and (
        principal is None or principal.is_admin or order.account_id == principal.account_id
    )
    if not visible:
        raise _order_not_found(order_id)
    return order


async def _rendered(conn: Executor, order_id: str) -> dict[str, Any]:
    order = await repository.get_order(conn, order_id)
    return render_order(order, await repository.lines_of(conn, [order_id]))


async def get_order(conn: Executor, principal: Principal, order_id: str) -> dict[str, Any]:
    order = await _load(conn, principal, order_id)
    return render_order(order, await repository.lines_of(conn, [order_id]))


async def list_orders(
    conn: Executor,
    principal: Principal,
    *,
    status: str | None,
    customer_id: str | None,
    limit: int,
    offset: int,
    chosen: NewestFirst = WHOLE_LIST,
    starting_after: str | None = None,
    search: str | None = None,
) -> dict[str, Any]:
    """The caller's orders (every account's for an admin key), newest first; with
    ``starting_after``, those after that order (which must be one the caller can see), the
    ``offset`` counted from there; with ``search``, those whose order id or customer id holds
    it (``search_repository.search_condition``)."""
    account_id = None if principal.is_admin else principal.account_id
    rows, total, offset = await newest_first_rows(
        chosen,
        offset,
        starting_after,
        count=lambda window: repository.count_orders(
            conn, account_id, status, customer_id, window, search=search
        ),
        fetch=lambda window, skip: repository.page_orders(
            conn, account_id, status, customer_id, window, limit, skip, search=search
        ),
        load=lambda order_id: _load(conn, principal, order_id),
        noun="order",
    )
    lines_by_order: dict[str, list[Any]] = defaultdict(list)
    for line in await repository.lines_of(conn, [row.id for row in rows]):
        lines_by_order[line.order_id].append(line)
    items = [render_order(row, lines_by_order[row.id]) for row in rows]
    return page(items, total, limit, offset)


SEARCH_INDEXED_AT_ONCE = 20_000
"""The most queued orders one search moves into the index (about 0.2 s of writing on SQLite):
a search after a day without one catches up over a few; what is still queued is found by
reading the queue meanwhile."""


async def index_for_search(conn: Executor, search: str | None) -> int:
    """Before a list with ``search``: the orders placed since the last search moved into the
    search index (``search_repository.index_pending``), in ``conn``'s write transaction; how many
    moved. Nothing for a search matched whole (shorter than the index's trigrams)."""
    if search is None or len(search) < search_repository.SEARCH_MIN_LENGTH:
        return 0
    return await search_repository.index_pending(conn, SEARCH_INDEXED_AT_ONCE)


async def _transition(
    conn: Executor,
    order: Any,
    action: OrderAction,
    actor: audit.Actor,
    tracking: TrackingCreate | None = None,
) -> dict[str, Any]:
    """Move the order on (``action``), with its event and its audit row (by ``actor``)."""
    try:
        target = next_status(OrderStatus(order.status), action)
    except IllegalTransition as exc:
        raise APIError(
            409, "invalid_request", str(exc), "status", reason="invalid_transition"
        ) from None
    now = utcnow()
    moved = await repository.change_status(
        conn,
        order.id,
        from_status=order.status,
        to_status=target.value,
        at=now,
        stamp=_STAMP_FOR_STATUS[target],
        tracking=None if tracking is None else tracking.model_dump(),
    )
    if not moved:  # another request changed it first; report what it is now
        current = await repository.get_order(conn, order.id)
        assert current is not None  # orders are never deleted
        raise APIError(
            409,
            "invalid_request",
            str(IllegalTransition(OrderStatus(current.status), action)),
            "status",
            reason="invalid_transition",
        )
    if target is OrderStatus.CANCELED:
        lines = await repository.lines_of(conn, [order.id])
        for line in sorted(lines, key=lambda line: line.product_id):  # lock order, as above
            await repository.release_stock(conn, line.product_id, line.quantity)
    changes: dict[str, list[Any]] = {"status": [order.status, target.value]}
    if tracking is not None:
        changes["tracking"] = [None, tracking.model_dump()]
    audited: audit.Action = "order.fulfill" if action is OrderAction.FULFILL else "order.cancel"
    await audit.record(conn, actor, audited, ("order", order.id), changes)
    rendered = await _rendered(conn, order.id)
    await record_event(
        conn, account_id=order.account_id, type=EVENT_FOR_STATUS[target], data=rendered
    )
    return rendered


async def cancel_order(conn: Executor, principal: Principal, order_id: str) -> dict[str, Any]:
    """Cancel a pending order and give its stock back."""
    order = await _load(conn, principal, order_id)
    return await _transition(conn, order, OrderAction.CANCEL, audit.actor_of(principal))


async def fulfill_order(
    conn: Executor,
    principal: Principal | None,
    order_id: str,
    environment: Environment,
    *,
    tracking: TrackingCreate | None = None,
) -> dict[str, Any]:
    """Mark a pending order fulfilled, with the parcel's ``tracking`` if given: an admin key
    or the CLI (``principal=None``); in the sandbox the owning client too, so it can exercise
    its webhook handler."""
    order = await _load(conn, principal, order_id)
    if principal is not None and not principal.is_admin and environment != "sandbox":
        raise forbidden("Fulfilling an order needs an admin key.")
    actor = audit.actor_of(principal)
    return await _transition(conn, order, OrderAction.FULFILL, actor, tracking)


def tracking_from_fields(
    carrier: str | None, number: str | None, url: str | None
) -> TrackingCreate | None:
    """The tracking an operator typed (the CLI's options, the console's Fulfil form), each
    field trimmed: None when all are empty, else validated as the API validates the body of
    ``POST /v1/orders/{id}/fulfill`` (an ``invalid_request`` naming ``tracking.url``, say)."""
    fields = {"carrier": carrier, "number": number, "url": url}
    given = {name: value.strip() for name, value in fields.items() if value and value.strip()}
    if not given:
        return None
    try:
        return OrderFulfill.model_validate({"tracking": given}).tracking
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None


EXPIRY_BATCH = 100


async def expire_pending_orders(db: Database, ttl_seconds: int) -> int:
    """Cancel the pending orders older than ``ttl_seconds`` (0: never), giving their stock back
    with an ``order.canceled`` event each, as a client's cancel would; the number canceled.

    Each order is canceled in its own transaction, by the same conditional status change as a
    cancel request: several processes may sweep at once, and a client that fulfils or cancels
    an order meanwhile wins (that order is skipped).
    """
    if ttl_seconds <= 0:
        return 0
    cutoff = utcnow() - timedelta(seconds=ttl_seconds)
    canceled = 0
    while True:
        async with db.read() as conn:
            expired = await repository.pending_created_before(conn, cutoff, EXPIRY_BATCH)
        for order in expired:
            try:
                async with db.write() as conn:
                    await _transition(conn, order, OrderAction.CANCEL, audit.SWEEPER)
            except APIError:  # changed meanwhile by a client or another process
                continue
            canceled += 1
        if len(expired) < EXPIRY_BATCH:
            return canceled
