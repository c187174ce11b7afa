"""Order rules as plain Python: the lifecycle and the money. No web, no database."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class OrderStatus(StrEnum):
    PENDING = "pending"
    FULFILLED = "fulfilled"
    CANCELED = "canceled"


class OrderAction(StrEnum):
    FULFILL = "fulfill"
    CANCEL = "cancel"


# pending → fulfilled, pending → canceled; nothing else.
_TRANSITIONS: dict[tuple[OrderStatus, OrderAction], OrderStatus] = {
    (OrderStatus.PENDING, OrderAction.FULFILL): OrderStatus.FULFILLED,
    (OrderStatus.PENDING, OrderAction.CANCEL): OrderStatus.CANCELED,
}

EVENT_FOR_STATUS = {
    OrderStatus.PENDING: "order.created",
    OrderStatus.FULFILLED: "order.fulfilled",
    OrderStatus.CANCELED: "order.canceled",
}


_PAST_TENSE = {OrderAction.FULFILL: "fulfilled", OrderAction.CANCEL: "canceled"}


class IllegalTransition(Exception):
    def __init__(self, status: OrderStatus, action: OrderAction) -> None:
        self.status = status
        self.action = action
        super().__init__(
            f"The order is {status.value}; only pending orders can be {_PAST_TENSE[action]}."
        )


def next_status(status: OrderStatus, action: OrderAction) -> OrderStatus:
    """The status after ``action``, or :class:`IllegalTransition`."""
    try:
        return _TRANSITIONS[(status, action)]
    except KeyError:
        raise IllegalTransition(status, action) from None


@dataclass(frozen=True, slots=True)
class Line:
    product_id: str
    name: str
    quantity: int
    unit_price_minor: int

    @property
    def amount_minor(self) -> int:
        return self.quantity * self.unit_price_minor


def total_minor(lines: Iterable[Line]) -> int:
    return sum(line.amount_minor for line in lines)


@dataclass(frozen=True, slots=True)
class RequestedLine:
    """One product's units in an order request: the quantities of its lines summed. ``index``
    is its first line in the request, which an error about it names."""

    product_id: str
    quantity: int
    index: int


def merge_lines(items: Iterable[tuple[str, int]]) -> list[RequestedLine]:
    """The request's ``(product id, quantity)`` lines with each product once, in the order the
    products first appear: two lines for one product are one line of both quantities."""
    merged: dict[str, RequestedLine] = {}
    for index, (product_id, quantity) in enumerate(items):
        first = merged.get(product_id)
        merged[product_id] = (
            RequestedLine(product_id, quantity, index)
            if first is None
            else RequestedLine(product_id, first.quantity + quantity, first.index)
        )
    return list(merged.values())


# How often each process sweeps for expired pending orders: every 5 % of the TTL, no more often
# than every second and at least every 10 minutes. An order is then canceled within half of
# max(30 s, 10 % of the TTL) after its TTL (the other half is the sweep's own time).
EXPIRY_SWEEP_SHARE = 0.05
MIN_EXPIRY_SWEEP_SECONDS = 1.0
MAX_EXPIRY_SWEEP_SECONDS = 600.0


def expiry_sweep_seconds(ttl_seconds: int) -> float:
    """The interval between two sweeps for a TTL (``COMMERCE_PENDING_ORDER_TTL_SECONDS``)."""
    share = ttl_seconds * EXPIRY_SWEEP_SHARE
    return min(MAX_EXPIRY_SWEEP_SECONDS, max(MIN_EXPIRY_SWEEP_SECONDS, share))
