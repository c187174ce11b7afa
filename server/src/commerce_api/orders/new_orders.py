"""The rules of a new order, before any stock is counted: who may place it, its lines (one per
product), the operator's unit limits, the refusal of a line whose stock cannot be taken, and the
rows it is written as."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from commerce_api.accounts.service import Principal
from commerce_api.core.errors import (
    APIError,
    Problem,
    forbidden,
    invalid_request,
    not_found,
    summary,
)
from commerce_api.core.ids import new_id
from commerce_api.core.timestamps import utcnow
from commerce_api.orders.domain import Line, OrderStatus, RequestedLine, merge_lines, total_minor
from commerce_api.orders.schemas import OrderCreate
from commerce_api.settings import Settings


def requested_lines(principal: Principal, data: OrderCreate) -> list[RequestedLine]:
    """The order's lines, each product once (two lines for one product are merged, their
    quantities summed), in the request's order. Refuses an order a key without an account
    would place."""
    if principal.account_id is None:
        raise forbidden("Orders are placed with a client key, for its account.")
    return merge_lines((item.product_id, item.quantity) for item in data.items)


def check_units(data: OrderCreate, settings: Settings) -> None:
    """Refuse an order over the operator's unit limits (``COMMERCE_ORDER_MAX_UNITS_PER_LINE``,
    ``COMMERCE_ORDER_MAX_UNITS``): one client must not reserve a product's whole stock. The
    lines for one product count as the one line they are merged into; the error names the
    line that takes them over the limit."""
    per_line = settings.order_max_units_per_line
    units: dict[str, int] = defaultdict(int)
    over: dict[str, Problem] = {}  # per product: the line that takes it over the limit
    for index, item in enumerate(data.items):
        units[item.product_id] += item.quantity
        if units[item.product_id] > per_line:
            merged = units[item.product_id] != item.quantity
            message = f"A line may order at most {per_line} units" + (
                f"; the lines for `{item.product_id}` add up to {units[item.product_id]}."
                if merged
                else "."
            )
            over.setdefault(
                item.product_id,
                Problem(f"items[{index}].quantity", "order_limit_exceeded", message),
            )
    total = sum(units.values())
    problems = list(over.values())
    if total > settings.order_max_units:
        message = (
            f"An order may hold at most {settings.order_max_units} units in all; "
            f"this one has {total}."
        )
        problems.append(Problem("items", "order_limit_exceeded", message))
    if problems:
        raise invalid_request(
            summary(problems),
            problems[0].parameter,
            reason="order_limit_exceeded",
            problems=problems,
        )


def cannot_reserve(index: int, product_id: str, quantity: int, available: int | None) -> APIError:
    """The error for a line whose stock could not be taken (``available``: None = no such
    active product)."""
    if available is None:
        return not_found(f"No product with id `{product_id}`.", f"items[{index}].product_id")
    return APIError(
        409,
        "invalid_request",
        f"Not enough stock for `{product_id}`: {quantity} requested, {available} available.",
        f"items[{index}].quantity",
        reason="insufficient_stock",
    )


def new_order_rows(
    account_id: str, data: OrderCreate, currency: str, lines: list[Line]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The new order's row and its lines' rows (``lines`` in the request's order)."""
    now = utcnow()
    order_id = new_id("ord")
    order = {
        "id": order_id,
        "account_id": account_id,
        "status": OrderStatus.PENDING.value,
        "customer_id": data.customer_id,
        "shipping_address": data.shipping_address.model_dump(exclude_none=True),
        "total_minor": total_minor(lines),
        "currency": currency,
        "created_at": now,
        "updated_at": now,
        "fulfilled_at": None,
        "canceled_at": None,
        "version": 1,
    }
    items = [
        {
            "order_id": order_id,
            "position": position,
            "product_id": line.product_id,
            "name": line.name,
            "quantity": line.quantity,
            "unit_price_minor": line.unit_price_minor,
        }
        for position, line in enumerate(lines)
    ]
    return order, items
