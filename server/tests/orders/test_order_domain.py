"""The order rules in ``orders.domain``: the lifecycle table and the money of the lines."""

from __future__ import annotations

import contextlib
import itertools

import pytest

from commerce_api.orders.domain import (
    EVENT_FOR_STATUS,
    IllegalTransition,
    Line,
    OrderAction,
    OrderStatus,
    next_status,
    total_minor,
)

LEGAL: dict[tuple[OrderStatus, OrderAction], OrderStatus] = {
    (OrderStatus.PENDING, OrderAction.FULFILL): OrderStatus.FULFILLED,
    (OrderStatus.PENDING, OrderAction.CANCEL): OrderStatus.CANCELED,
}

EVERY_PAIR = list(itertools.product(OrderStatus, OrderAction))
ILLEGAL = [pair for pair in EVERY_PAIR if pair not in LEGAL]


def test_the_status_and_action_names_are_the_api_spellings() -> None:
    assert [status.value for status in OrderStatus] == ["pending", "fulfilled", "canceled"]
    assert [action.value for action in OrderAction] == ["fulfill", "cancel"]


@pytest.mark.parametrize(("status", "action"), list(LEGAL))
def test_a_pending_order_can_be_fulfilled_or_canceled(
    status: OrderStatus, action: OrderAction
) -> None:
    assert next_status(status, action) is LEGAL[(status, action)]


@pytest.mark.parametrize(("status", "action"), ILLEGAL)
def test_every_other_transition_is_illegal(status: OrderStatus, action: OrderAction) -> None:
    with pytest.raises(IllegalTransition) as caught:
        next_status(status, action)
    assert caught.value.status is status
    assert caught.value.action is action


def test_only_the_two_pending_transitions_are_legal() -> None:
    legal: dict[tuple[OrderStatus, OrderAction], OrderStatus] = {}
    for status, action in EVERY_PAIR:
        with contextlib.suppress(IllegalTransition):
            legal[(status, action)] = next_status(status, action)
    assert legal == LEGAL
    assert len(ILLEGAL) == 4


@pytest.mark.parametrize(
    ("status", "action", "message"),
    [
        (
            OrderStatus.FULFILLED,
            OrderAction.FULFILL,
            "The order is fulfilled; only pending orders can be fulfilled.",
        ),
        (
            OrderStatus.FULFILLED,
            OrderAction.CANCEL,
            "The order is fulfilled; only pending orders can be canceled.",
        ),
        (
            OrderStatus.CANCELED,
            OrderAction.FULFILL,
            "The order is canceled; only pending orders can be fulfilled.",
        ),
        (
            OrderStatus.CANCELED,
            OrderAction.CANCEL,
            "The order is canceled; only pending orders can be canceled.",
        ),
    ],
)
def test_an_illegal_transition_says_what_the_order_is_and_what_is_allowed(
    status: OrderStatus, action: OrderAction, message: str
) -> None:
    error = IllegalTransition(status, action)
    assert str(error) == message


def test_each_status_has_its_event_type() -> None:
    assert EVENT_FOR_STATUS == {
        OrderStatus.PENDING: "order.created",
        OrderStatus.FULFILLED: "order.fulfilled",
        OrderStatus.CANCELED: "order.canceled",
    }


def test_a_line_amount_is_quantity_times_unit_price_in_minor_units() -> None:
    assert Line("prod_a", "Pen", 7, 1999).amount_minor == 13993
    assert Line("prod_a", "Pen", 3, 10).amount_minor == 30
    assert Line("prod_a", "Pen", 1, 0).amount_minor == 0


def test_a_line_amount_is_exact_for_large_values() -> None:
    line = Line("prod_a", "Yacht", 10_000, 100_000_000_00)
    assert line.amount_minor == 100_000_000_000_000
    assert isinstance(line.amount_minor, int)


def test_the_total_is_the_sum_of_the_line_amounts() -> None:
    lines = [Line("prod_a", "Pen", 3, 10), Line("prod_b", "Book", 7, 1999)]
    assert total_minor(lines) == 30 + 13993


def test_the_total_of_no_lines_is_zero() -> None:
    assert total_minor([]) == 0


def test_the_total_accepts_any_iterable_of_lines() -> None:
    lines = (Line(f"prod_{n}", "Item", n, 1) for n in range(1, 5))
    assert total_minor(lines) == 10


def test_lines_are_immutable() -> None:
    line = Line("prod_a", "Pen", 1, 100)
    with pytest.raises(AttributeError):
        line.quantity = 2  # type: ignore[misc]
