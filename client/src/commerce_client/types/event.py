"""Events (``order.created``, ``order.fulfilled``, ``order.canceled``) and their deliveries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Self

from commerce_client import _parse
from commerce_client.types.order import Order

__all__ = ["DeliveryAttempt", "DeliveryStatus", "Event", "EventDelivery", "EventWithDeliveries"]

DeliveryStatus = Literal["pending", "succeeded", "failed"]
"""A delivery's state, the API's words (the console's too): ``pending`` (not attempted yet, or
failed with another attempt due at ``next_attempt_at``: ``attempts`` says which), ``succeeded``
(the receiver answered 2xx), ``failed`` (given up: retries spent, or the receiver answered 410)."""

ORDER_EVENT_TYPES = frozenset({"order.created", "order.fulfilled", "order.canceled"})
"""The event types whose ``data`` is an :class:`Order`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """An event, as listed and as delivered to your webhook endpoints."""

    id: str
    """``evt_…``; also the ``webhook-id`` of its deliveries (use it to drop duplicates)."""
    type: str
    created_at: datetime
    data: Order | dict[str, Any]
    """The order for the types in ``ORDER_EVENT_TYPES``; the raw object for any other type (one
    this version of the client does not know, such as a future ``order.refunded``) and for a
    payload it cannot read as an order. Check with ``isinstance(event.data, Order)``."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(**_event_fields(data))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryAttempt:
    attempted_at: datetime
    status_code: int | None
    """The receiver's HTTP status, or None when no response came (see ``error``)."""
    duration_ms: int | None
    """None when the attempt was interrupted (the dispatcher stopped; its end is unknown)."""
    error: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            attempted_at=_parse.timestamp(data["attempted_at"]),
            status_code=data.get("status_code"),
            duration_ms=data.get("duration_ms"),
            error=data.get("error"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDelivery:
    """The delivery of one event to one endpoint."""

    endpoint_id: str
    status: DeliveryStatus
    """``pending``, ``succeeded`` or ``failed`` (see :data:`DeliveryStatus`)."""
    next_attempt_at: datetime | None
    """When the next retry is due; None once the delivery succeeded or failed for good."""
    attempts: list[DeliveryAttempt]
    """Every attempt so far, oldest first."""

    @property
    def last_attempt(self) -> DeliveryAttempt | None:
        return self.attempts[-1] if self.attempts else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            endpoint_id=data["endpoint_id"],
            status=data["status"],
            next_attempt_at=_parse.optional_timestamp(data.get("next_attempt_at")),
            attempts=[DeliveryAttempt.from_dict(item) for item in data.get("attempts") or []],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EventWithDeliveries(Event):
    """One event with the state of its delivery to each endpoint (``events.get()``)."""

    deliveries: list[EventDelivery]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        deliveries = [EventDelivery.from_dict(item) for item in data.get("deliveries") or []]
        return cls(**_event_fields(data), deliveries=deliveries)


def _event_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    type_: str = data["type"]
    return {
        "id": data["id"],
        "type": type_,
        "created_at": _parse.timestamp(data["created_at"]),
        "data": event_data(type_, data["data"]),
    }


def event_data(type_: str, payload: Any) -> Order | dict[str, Any]:
    """An event's ``data``: an :class:`Order` for the order types, read leniently (unknown
    fields ignored); otherwise, or when it is not an order this version can read, the raw
    object."""
    if not isinstance(payload, Mapping):
        return {"value": payload}
    if type_ in ORDER_EVENT_TYPES:
        try:
            return Order.from_dict(payload)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass  # a shape this version does not know: the receiver still gets the event
    return dict(payload)
