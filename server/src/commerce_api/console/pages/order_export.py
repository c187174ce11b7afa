"""The orders' CSV export, a pick or shipping list: every order of the filtered list with its
shipping address, lines and tracking, one row per order or one per line (the operator's
``rows``), streamed by keyset chunks (``exports``), every cell neutralised against formulas."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from commerce_api.accounts.service import Principal
from commerce_api.console.pages import exports
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.order_list import OrderFilters
from commerce_api.console.pages.render import render
from commerce_api.core.pagination import Position
from commerce_api.http.dependencies import ServicesDep
from commerce_api.orders import repository as orders_repository
from commerce_api.orders import service as orders
from commerce_api.orders.service import ADDRESS_FIELDS, TRACKING_FIELDS

ROW_KINDS = ("order", "line")
"""What a row of the CSV is (the ``rows`` parameter): an order (its lines in one cell), or
one line of an order (the order's columns repeated on each)."""

_ORDER = ("id", "created_at", "status", "customer_id", "total", "currency")
_SHIPPING = (
    *(f"ship_{field}" for field in ADDRESS_FIELDS),
    *(f"tracking_{field}" for field in TRACKING_FIELDS),
    "fulfilled_at",
    "canceled_at",
)
HEADERS = {
    "order": (*_ORDER, "items", "lines", *_SHIPPING),
    "line": (*_ORDER, "line", "product_id", "name", "quantity", "unit_price", *_SHIPPING),
}


def money(value: Any) -> str:
    return f"{Decimal(str(value)):.2f}"


def _order_cells(order: Mapping[str, Any]) -> list[object]:
    return [*(order[name] for name in _ORDER[:4]), money(order["total"]), order["currency"]]


def _shipping_cells(order: Mapping[str, Any]) -> list[object]:
    address = order["shipping_address"] or {}
    tracking = order["tracking"] or {}
    return [
        *(address.get(field) or "" for field in ADDRESS_FIELDS),
        *(tracking.get(field) or "" for field in TRACKING_FIELDS),
        order["fulfilled_at"] or "",
        order["canceled_at"] or "",
    ]


def _line_text(line: Mapping[str, Any]) -> str:
    return (
        f"{line['quantity']} × {line['name']} ({line['product_id']}) @ {money(line['unit_price'])}"
    )


def csv_rows(order: Mapping[str, Any], kind: str) -> list[exports.CsvRow]:
    """An order's CSV rows: one (``kind`` "order"), or one per line."""
    head, tail = _order_cells(order), _shipping_cells(order)
    lines = order["items"]
    if kind == "order":
        units = sum(line["quantity"] for line in lines)
        return [[*head, units, "; ".join(_line_text(line) for line in lines), *tail]]
    return [
        [
            *head,
            number,
            line["product_id"],
            line["name"],
            line["quantity"],
            money(line["unit_price"]),
            *tail,
        ]
        for number, line in enumerate(lines, start=1)
    ]


def _chunk_reader(principal: Principal, filters: OrderFilters, kind: str) -> exports.ChunkReader:
    """Reads the filtered list's orders after a cursor, newest first, by keyset (no count)."""
    account_id = None if principal.is_admin else principal.account_id
    window = filters.window()

    async def read(
        conn: AsyncConnection, after: Position | None, limit: int
    ) -> tuple[list[exports.CsvRow], Position | None]:
        rows = await orders_repository.page_orders(
            conn,
            account_id,
            filters.status or None,
            None,
            replace(window, after=after),
            limit,
            0,
            search=filters.q or None,
        )
        lines: dict[str, list[Any]] = defaultdict(list)
        for line in await orders_repository.lines_of(conn, [row.id for row in rows]):
            lines[line.order_id].append(line)
        csv_rows_: list[exports.CsvRow] = []
        for row in rows:
            csv_rows_ += csv_rows(orders.render_order(row, lines[row.id]), kind)
        last = Position(rows[-1].created_at, rows[-1].id) if len(rows) == limit else None
        return csv_rows_, last

    return read


async def export_orders(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """The filtered list as CSV, every page of it, newest first; ``rows``: ``order`` (the
    default) or ``line``."""
    filters, error = OrderFilters.parse(request.query_params)
    kind = request.query_params.get("rows", "order")
    if error is None and kind not in ROW_KINDS:
        error = "Choose one row per order or one per line (rows is order or line)."
    if error is not None:
        return render(request, "message.html", {"title": "Cannot export", "error": error}, 400)
    if filters.q:
        async with services.db.write() as conn:
            await orders.index_for_search(conn, filters.q)
    reader = _chunk_reader(filters.principal(session), filters, kind)
    name = "orders" if kind == "order" else "order-lines"
    return exports.csv_download(name, HEADERS[kind], exports.keyset_chunks(services.db, reader))
