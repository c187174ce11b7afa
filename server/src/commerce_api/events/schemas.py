"""Events as the API shows them: ``/v1/events``, with each event's deliveries and attempts."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from commerce_api.core.timestamps import TimestampText
from commerce_api.http.schemas import Pagination, ResponseModel


class Event(ResponseModel):
    id: str
    type: str
    created_at: TimestampText
    data: dict[str, object] = Field(description="The order, as it was after the change.")


class DeliveryAttempt(ResponseModel):
    attempted_at: TimestampText
    status_code: int | None = Field(description="The receiver's status; null if none came.")
    duration_ms: int | None = Field(
        description="How long the attempt took; null if it was interrupted (its end is unknown)."
    )
    error: str | None = Field(
        description="Why the attempt failed (timeout, refused, HTTP 500, or interrupted: the "
        "dispatcher stopped before it finished)."
    )


class Delivery(ResponseModel):
    endpoint_id: str
    status: Literal["pending", "succeeded", "failed"] = Field(
        description="`pending`: not attempted yet, or failed with another attempt due at "
        "`next_attempt_at` (its `attempts` say which); `succeeded`: the receiver answered 2xx; "
        "`failed`: given up (its retries ran out, or the receiver answered 410)."
    )
    next_attempt_at: TimestampText | None
    attempts: list[DeliveryAttempt]


class EventWithDeliveries(Event):
    deliveries: list[Delivery]


class EventList(ResponseModel):
    data: list[Event]
    pagination: Pagination
