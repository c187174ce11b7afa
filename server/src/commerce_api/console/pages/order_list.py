"""The orders' list: its search and filters, its CSV export and its bulk actions (fulfil,
cancel). An order's own page is ``orders``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from commerce_api.accounts.service import Principal
from commerce_api.console import repository
from commerce_api.console.pages import bulk, exports
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import (
    PAGE_SIZE,
    PREFIX,
    for_account,
    form_text,
    page_number,
    pagination,
    render,
)
from commerce_api.console.sessions import ConsoleSession
from commerce_api.core.errors import APIError
from commerce_api.core.pagination import NewestFirst, Position
from commerce_api.http.dependencies import ServicesDep
from commerce_api.orders import repository as orders_repository
from commerce_api.orders import service as orders
from commerce_api.orders.domain import OrderStatus

STATUSES = [status.value for status in OrderStatus]
LIST_URL = f"{PREFIX}/orders"
MAX_SEARCH = 255  # the longest customer id
CSV_HEADER = ("id", "created_at", "status", "customer_id", "total", "currency", "items")


def _one_line(text: str, limit: int) -> bool:
    return len(text) <= limit and text.isprintable()


def _day(text: str) -> date | None:
    return date.fromisoformat(text) if text else None


@dataclass(frozen=True, slots=True)
class OrderFilters:
    """The list's search and filters, from its query string. ``q`` is an order id (that order)
    or else a customer id (their orders); the dates are UTC days, both included: the API's
    ``created_gte`` (the first day's start) and ``created_lt`` (the day after the last)."""

    q: str = ""
    status: str = ""
    account_id: str = ""
    created_from: date | None = None
    created_to: date | None = None

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> tuple[OrderFilters, str | None]:
        """The filters, and what was wrong with them (its filter then left out)."""
        status = query.get("status", "")
        filters = cls(
            q=(query.get("q", "") or query.get("customer_id", "")).strip(),  # the old name too
            status=status if status in STATUSES else "",
            account_id=query.get("account_id", "").strip(),
        )
        if not _one_line(filters.q, MAX_SEARCH) or not _one_line(filters.account_id, MAX_SEARCH):
            return cls(), f"Search for one line of at most {MAX_SEARCH} characters."
        try:
            days = _day(query.get("created_from", "")), _day(query.get("created_to", ""))
        except ValueError:
            return filters, "Dates are days such as 2026-11-24."
        if days[0] and days[1] and days[0] > days[1]:
            return filters, "The first day comes after the last: no order can match."
        return replace(filters, created_from=days[0], created_to=days[1]), None

    def query(self) -> str:
        """The query string of these filters (for links: pages, export, back)."""
        values = {
            "q": self.q,
            "status": self.status,
            "account_id": self.account_id,
            "created_from": self.created_from.isoformat() if self.created_from else "",
            "created_to": self.created_to.isoformat() if self.created_to else "",
        }
        return urlencode({key: value for key, value in values.items() if value})

    def window(self) -> NewestFirst:
        gte = datetime.combine(self.created_from, time.min, UTC) if self.created_from else None
        lt = None
        if self.created_to is not None and self.created_to < date.max:
            lt = datetime.combine(self.created_to + timedelta(days=1), time.min, UTC)
        return NewestFirst(created_gte=gte, created_lt=lt)

    def principal(self, session: ConsoleSession) -> Principal:
        return for_account(session, self.account_id) if self.account_id else session.principal

    def admits(self, order: Mapping[str, Any]) -> bool:
        """Whether an order (the API's record) passes the status and date filters."""
        window = self.window()
        created = datetime.fromisoformat(order["created_at"])
        return (
            (not self.status or order["status"] == self.status)
            and (window.created_gte is None or created >= window.created_gte)
            and (window.created_lt is None or created < window.created_lt)
        )


def _back_filters(form_value: str) -> OrderFilters:
    """The list's filters a bulk form carries back (parsed again: only known fields pass)."""
    return OrderFilters.parse(dict(parse_qsl(form_value)))[0]


async def _by_id(
    conn: AsyncConnection, principal: Principal, filters: OrderFilters
) -> dict[str, Any] | None:
    """The order whose id the search is, if the caller sees it; None when there is none."""
    if not filters.q:
        return None
    try:
        return await orders.get_order(conn, principal, filters.q)
    except APIError:
        return None


async def orders_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    filters, error = OrderFilters.parse(request.query_params)
    number = page_number(request)
    principal = filters.principal(session)
    found: list[dict[str, Any]] = []
    total = 0
    async with services.db.read() as conn:
        if error is None and (order := await _by_id(conn, principal, filters)) is not None:
            found = [order] if filters.admits(order) else []
            total = len(found)
        elif error is None:
            page = await orders.list_orders(
                conn,
                principal,
                status=filters.status or None,
                customer_id=filters.q or None,
                limit=PAGE_SIZE,
                offset=(number - 1) * PAGE_SIZE,
                chosen=filters.window(),
            )
            found, total = page["data"], page["pagination"]["total"]
        account_rows = await repository.list_accounts(conn)
    query = filters.query()
    context = {
        "nav": "orders",
        "orders": found,
        "pages": pagination(number, total),
        "statuses": STATUSES,
        "accounts": account_rows,
        "filters": filters,
        "query": query,
        "error": error,
        "max_selected": bulk.MAX_SELECTED,
    }
    return render(request, "orders.html", context, 400 if error else 200)


# --- export ------------------------------------------------------------------------------------


def _total(order: Mapping[str, Any]) -> str:
    return f"{Decimal(str(order['total'])):.2f}"


def _csv_row(order: Mapping[str, Any]) -> exports.CsvRow:
    units = sum(line["quantity"] for line in order["items"])
    return (
        order["id"],
        order["created_at"],
        order["status"],
        order["customer_id"],
        _total(order),
        order["currency"],
        units,
    )


def _chunk_reader(principal: Principal, filters: OrderFilters) -> exports.ChunkReader:
    """Reads the filtered list's orders after a cursor, newest first, by keyset (no count)."""
    account_id = None if principal.is_admin else principal.account_id
    window = filters.window()

    async def read(
        conn: AsyncConnection, after: Position | None, limit: int
    ) -> tuple[list[exports.CsvRow], Position | None]:
        if after is None and (order := await _by_id(conn, principal, filters)) is not None:
            return ([_csv_row(order)] if filters.admits(order) else []), None
        rows = await orders_repository.page_orders(
            conn,
            account_id,
            filters.status or None,
            filters.q or None,
            replace(window, after=after),
            limit,
            0,
        )
        lines: dict[str, list[Any]] = defaultdict(list)
        for line in await orders_repository.lines_of(conn, [row.id for row in rows]):
            lines[line.order_id].append(line)
        csv_rows = [_csv_row(orders.render_order(row, lines[row.id])) for row in rows]
        last = Position(rows[-1].created_at, rows[-1].id) if len(rows) == limit else None
        return csv_rows, last

    return read


async def export_orders(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """The filtered list as CSV, every page of it, newest first."""
    filters, error = OrderFilters.parse(request.query_params)
    if error is not None:
        return render(request, "message.html", {"title": "Cannot export", "error": error}, 400)
    reader = _chunk_reader(filters.principal(session), filters)
    return exports.csv_download("orders", CSV_HEADER, exports.keyset_chunks(services.db, reader))


# --- bulk actions ------------------------------------------------------------------------------

BULK_ACTIONS = {
    "fulfil": bulk.BulkAction(
        "orders",
        "order",
        "fulfil",
        "Fulfil",
        "Fulfilled",
        "Each order is marked fulfilled, and its account's endpoints get an order.fulfilled event.",
    ),
    "cancel": bulk.BulkAction(
        "orders",
        "order",
        "cancel",
        "Cancel",
        "Canceled",
        "Each order is canceled and its stock returned; its account's endpoints get an "
        "order.canceled event.",
        danger=True,
    ),
}


async def _bulk_form(
    request: Request,
) -> tuple[bulk.BulkAction | None, list[str], str, str, str | None]:
    """The bulk form's action, ids, back query and URL, and what is wrong with it."""
    form = await request.form()
    back = _back_filters(form_text(form, "back")).query()
    back_url = LIST_URL + (f"?{back}" if back else "")
    action = BULK_ACTIONS.get(form_text(form, "action"))
    ids = bulk.selected_ids(form)
    if action is None:
        return None, ids, back, back_url, "Choose Fulfil or Cancel: nothing was changed."
    return action, ids, back, back_url, bulk.selection_error(ids, "order")


async def confirm_bulk(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """The confirmation page of a bulk action: the selected orders as they are now."""
    action, ids, back, back_url, error = await _bulk_form(request)
    if action is None or error is not None:
        return bulk.refused_selection(request, action, error or "", back_url)
    selected = []
    async with services.db.read() as conn:
        for order_id in ids:
            try:
                order = await orders.get_order(conn, session.principal, order_id)
            except APIError as exc:
                selected.append(bulk.Selected(order_id, exc.message))
                continue
            summary = f"{order['status']} · {order['customer_id']} · {_total(order)}"
            selected.append(bulk.Selected(order_id, f"{summary} {order['currency']}"))
    run_url = f"{LIST_URL}/bulk/run"
    return bulk.confirmation(request, action, selected, run_url, back, back_url)


async def run_bulk(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """A confirmed bulk action: each order through the API's service call, in a transaction
    of its own; the page says what happened to each."""
    action, ids, _back, back_url, error = await _bulk_form(request)
    if action is None or error is not None:
        return bulk.refused_selection(request, action, error or "", back_url)
    principal, environment = session.principal, services.settings.environment
    if action.value == "fulfil":
        outcomes = await bulk.run_each(
            services.db,
            ids,
            lambda conn, order_id: orders.fulfill_order(conn, principal, order_id, environment),
        )
    else:
        outcomes = await bulk.run_each(
            services.db,
            ids,
            lambda conn, order_id: orders.cancel_order(conn, principal, order_id),
        )
    return bulk.results(request, action, outcomes, LIST_URL, back_url)
