"""The orders' list: its search and filters and its bulk actions (fulfil, cancel), on the
selected orders or on every order the filters match. Its CSV export is ``order_export``; an
order's own page is ``orders``."""

from __future__ import annotations

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
from commerce_api.console.pages import bulk
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
from commerce_api.console.repository import listings
from commerce_api.console.sessions import ConsoleSession
from commerce_api.core.errors import APIError
from commerce_api.core.pagination import NewestFirst
from commerce_api.http.dependencies import ServicesDep
from commerce_api.orders import search_repository
from commerce_api.orders import service as orders
from commerce_api.orders.domain import OrderStatus

STATUSES = [status.value for status in OrderStatus]
LIST_URL = f"{PREFIX}/orders"
MAX_SEARCH = 255  # the longest customer id
MAX_MATCHING = 500
"""The most orders a bulk action on "all matching" takes (each in a transaction of its own)."""


def _one_line(text: str, limit: int) -> bool:
    return len(text) <= limit and text.isprintable()


def _day(text: str) -> date | None:
    return date.fromisoformat(text) if text else None


@dataclass(frozen=True, slots=True)
class OrderFilters:
    """The list's search and filters, from its query string. ``q`` is any part of an order id
    or customer id (``orders.search_repository.search_condition``); the dates are UTC days, both
    included: the API's ``created_gte`` (the first day's start) and ``created_lt`` (the day
    after the last)."""

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

    def fields(self) -> list[tuple[str, str]]:
        """The filters set, as ``(name, value)`` query fields."""
        values = {
            "q": self.q,
            "status": self.status,
            "account_id": self.account_id,
            "created_from": self.created_from.isoformat() if self.created_from else "",
            "created_to": self.created_to.isoformat() if self.created_to else "",
        }
        return [(key, value) for key, value in values.items() if value]

    def query(self) -> str:
        """The query string of these filters (for links: pages, export, back)."""
        return urlencode(self.fields())

    def window(self) -> NewestFirst:
        gte = datetime.combine(self.created_from, time.min, UTC) if self.created_from else None
        lt = None
        if self.created_to is not None and self.created_to < date.max:
            lt = datetime.combine(self.created_to + timedelta(days=1), time.min, UTC)
        return NewestFirst(created_gte=gte, created_lt=lt)

    def principal(self, session: ConsoleSession) -> Principal:
        return for_account(session, self.account_id) if self.account_id else session.principal


def _back_filters(form_value: str) -> OrderFilters:
    """The list's filters a bulk form carries back (parsed again: only known fields pass)."""
    return OrderFilters.parse(dict(parse_qsl(form_value)))[0]


async def _matching(
    conn: AsyncConnection, principal: Principal, filters: OrderFilters, limit: int, offset: int
) -> dict[str, Any]:
    """A page of the orders the filters match, newest first, and how many there are."""
    return await orders.list_orders(
        conn,
        principal,
        status=filters.status or None,
        customer_id=None,
        limit=limit,
        offset=offset,
        chosen=filters.window(),
        search=filters.q or None,
    )


async def orders_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    filters, error = OrderFilters.parse(request.query_params)
    number = page_number(request)
    found: list[dict[str, Any]] = []
    total = 0
    if error is None and filters.q:
        async with services.db.write() as conn:
            await orders.index_for_search(conn, filters.q)
    async with services.db.read() as conn:
        if error is None:
            principal = filters.principal(session)
            page = await _matching(conn, principal, filters, PAGE_SIZE, (number - 1) * PAGE_SIZE)
            found, total = page["data"], page["pagination"]["total"]
        account_rows = await listings.list_accounts(conn)
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
        "total": total,
        "search_min_length": search_repository.SEARCH_MIN_LENGTH,
        "max_selected": bulk.MAX_SELECTED,
        "max_matching": MAX_MATCHING,
        "export_fields": filters.fields(),
    }
    return render(request, "orders.html", context, 400 if error else 200)


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


def _summary(order: Mapping[str, Any]) -> str:
    total = f"{Decimal(str(order['total'])):.2f}"
    return f"{order['status']} · {order['customer_id']} · {total} {order['currency']}"


@dataclass(frozen=True, slots=True)
class BulkForm:
    """A bulk form as posted: its action, the ids selected (or, with ``matching``, every order
    the list's filters match), the list's filters and URL, and what is wrong with it."""

    action: bulk.BulkAction | None
    ids: list[str]
    matching: bool
    filters: OrderFilters
    back_url: str
    error: str | None


async def _bulk_form(request: Request, most: int) -> BulkForm:
    """The bulk form; at most ``most`` ids taken (the list's page, or a confirmation's)."""
    form = await request.form()
    filters = _back_filters(form_text(form, "back"))
    back = filters.query()
    back_url = LIST_URL + (f"?{back}" if back else "")
    action = BULK_ACTIONS.get(form_text(form, "action"))
    ids = bulk.selected_ids(form)
    matching = form_text(form, "matching") == "all"
    if action is None:
        error: str | None = "Choose Fulfil or Cancel: nothing was changed."
    elif matching:
        error = None
    else:
        error = bulk.selection_error(ids, "order", most)
    return BulkForm(action, ids, matching, filters, back_url, error)


async def _selected(
    conn: AsyncConnection, session: ConsoleSession, form: BulkForm
) -> list[bulk.Selected] | str:
    """The orders the form acts on as they are now, or why there are too many."""
    if form.matching:
        principal = form.filters.principal(session)
        page = await _matching(conn, principal, form.filters, MAX_MATCHING, 0)
        total = page["pagination"]["total"]
        if total > MAX_MATCHING:
            return (
                f"{total} orders match: at most {MAX_MATCHING} are changed at a time. Narrow the "
                "search or the filters (a status, a day): nothing was changed."
            )
        if total == 0:
            return "No order matches the filters: nothing was changed."
        return [bulk.Selected(order["id"], _summary(order)) for order in page["data"]]
    selected = []
    for order_id in form.ids:
        try:
            order = await orders.get_order(conn, session.principal, order_id)
        except APIError as exc:
            selected.append(bulk.Selected(order_id, exc.message))
        else:
            selected.append(bulk.Selected(order_id, _summary(order)))
    return selected


async def confirm_bulk(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """The confirmation page of a bulk action: the selected orders (or every one matching the
    list's filters, up to :data:`MAX_MATCHING`) as they are now. Its form names each of them:
    an order that comes to match after this page is not acted on."""
    form = await _bulk_form(request, bulk.MAX_SELECTED)
    if form.action is None or form.error is not None:
        return bulk.refused_selection(request, form.action, form.error or "", form.back_url)
    async with services.db.read() as conn:
        selected = await _selected(conn, session, form)
    if isinstance(selected, str):
        return bulk.refused_selection(request, form.action, selected, form.back_url)
    run_url = f"{LIST_URL}/bulk/run"
    back = form.filters.query()
    return bulk.confirmation(request, form.action, selected, run_url, back, form.back_url)


async def run_bulk(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """A confirmed bulk action: each order through the API's service call, in a transaction
    of its own; the page says what happened to each."""
    form = await _bulk_form(request, MAX_MATCHING)
    action, ids = form.action, form.ids
    if action is None or form.error is not None or form.matching:
        error = form.error or "Confirm the orders first: nothing was changed."
        return bulk.refused_selection(request, action, error, form.back_url)
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
    return bulk.results(request, action, outcomes, LIST_URL, form.back_url)
