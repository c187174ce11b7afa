"""Events: recording them (always inside the transaction of the change being reported, so the
change and its event commit together or not at all, with a delivery queued for each endpoint
that wants it), and reading, redelivering and pruning them (``/v1/events``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from commerce_api.accounts.service import Principal
from commerce_api.audit import service as audit
from commerce_api.core import tracing
from commerce_api.core.errors import APIError, not_found
from commerce_api.core.ids import looks_like, new_id
from commerce_api.core.pagination import (
    WHOLE_LIST,
    NewestFirst,
    newest_first_rows,
    page,
)
from commerce_api.core.timestamps import format_optional_timestamp, format_timestamp, utcnow
from commerce_api.events import repository as events_repository
from commerce_api.events.repository import EventFilter
from commerce_api.storage.bulk import insert_rows
from commerce_api.storage.executor import Executor
from commerce_api.storage.tables import events, webhook_deliveries
from commerce_api.webhooks import repository as webhooks
from commerce_api.webhooks import service as endpoints_service
from commerce_api.webhooks.repository import endpoints as endpoint_rows


@dataclass(frozen=True, slots=True)
class NewEvent:
    account_id: str
    data: dict[str, Any]
    created_at: datetime
    traceparent: str | None = None  # the trace its deliveries join (core.tracing)


async def record_event(conn: Executor, *, account_id: str, type: str, data: dict[str, Any]) -> str:
    """Record one event of ``type`` now; its id."""
    traceparent = tracing.current_traceparent() if tracing.ENABLED else None
    new_event = NewEvent(account_id, data, utcnow(), traceparent)
    (event_id,) = await record_events(conn, type, [new_event])
    return event_id


async def record_events(conn: Executor, type_: str, new_events: Sequence[NewEvent]) -> list[str]:
    """Record events of one type (a batch of orders' ``order.created``), each with its outbox
    deliveries — one per subscribed endpoint of its account — in the caller's transaction; a
    fixed number of statements however many events. Their ids, in order."""
    if not new_events:
        return []
    rows = event_rows(type_, new_events)
    ids = [row["id"] for row in rows]
    await insert_rows(conn, events, rows)
    subscribed = await webhooks.subscribers(conn, {event.account_id for event in new_events}, type_)
    deliveries = [
        webhooks.new_delivery(event_id, endpoint_id, event.created_at)
        for event_id, event in zip(ids, new_events, strict=True)
        for endpoint_id in sorted(subscribed.get(event.account_id, ()))
    ]
    await insert_rows(conn, webhook_deliveries, deliveries)
    return ids


def event_rows(type_: str, new_events: Sequence[NewEvent]) -> list[dict[str, Any]]:
    """The ``events`` rows of new events of one type, each with a new id (and, traced, the
    context its deliveries join; untraced, the column is left to its default, NULL)."""
    rows = [
        {
            "id": new_id("evt"),
            "account_id": event.account_id,
            "type": type_,
            "created_at": event.created_at,
            "data": event.data,
            "order_id": event.data.get("id"),  # every event is an order's: its data is the order
        }
        for event in new_events
    ]
    if tracing.ENABLED:
        for row, event in zip(rows, new_events, strict=True):
            row["traceparent"] = event.traceparent
    return rows


EVENT_RETENTION = timedelta(days=30)


def render_event(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "type": row.type,
        "created_at": format_timestamp(row.created_at),
        "data": row.data,
    }


def _event_scope(principal: Principal) -> str | None:
    return None if principal.is_admin else principal.account_id


async def list_events(
    conn: Executor,
    principal: Principal,
    *,
    event_type: str | None,
    limit: int,
    offset: int,
    order_id: str | None = None,
    chosen: NewestFirst = WHOLE_LIST,
    starting_after: str | None = None,
) -> dict[str, Any]:
    """The caller's events (every account's for an admin key), newest first; with
    ``starting_after``, those after that event (which must be one the caller can see), the
    ``offset`` counted from there."""
    scope = _event_scope(principal)

    def wanted(window: NewestFirst) -> EventFilter:
        return EventFilter(scope, event_type, order_id, window)

    rows, total, offset = await newest_first_rows(
        chosen,
        offset,
        starting_after,
        count=lambda window: events_repository.count_events(conn, wanted(window)),
        fetch=lambda window, skip: events_repository.page_events(conn, wanted(window), limit, skip),
        load=lambda event_id: _load_event(conn, principal, event_id),
        noun="event",
    )
    return page([render_event(row) for row in rows], total, limit, offset)


async def _load_event(conn: Executor, principal: Principal, event_id: str) -> Any:
    row = await events_repository.get_event(conn, event_id) if looks_like("evt", event_id) else None
    scope = _event_scope(principal)
    if row is None or (scope is not None and row.account_id != scope):
        raise not_found(f"No event with id `{event_id}`.", "id")
    return row


async def get_event(conn: Executor, principal: Principal, event_id: str) -> dict[str, Any]:
    event = await _load_event(conn, principal, event_id)
    return await _with_deliveries(conn, event)


async def _with_deliveries(conn: Executor, event: Any) -> dict[str, Any]:
    attempts_by_endpoint: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for attempt in await webhooks.attempts_of(conn, event.id):
        attempts_by_endpoint[attempt.endpoint_id].append(
            {
                "attempted_at": format_timestamp(attempt.attempted_at),
                "status_code": attempt.status_code,
                "duration_ms": attempt.duration_ms,
                "error": attempt.error,
            }
        )
    deliveries = [
        {
            "endpoint_id": delivery.endpoint_id,
            "status": delivery.status,
            "next_attempt_at": format_optional_timestamp(delivery.next_attempt_at),
            "attempts": attempts_by_endpoint[delivery.endpoint_id],
        }
        for delivery in await webhooks.deliveries_of(conn, event.id)
    ]
    return {**render_event(event), "deliveries": deliveries}


async def redeliver_event(conn: Executor, principal: Principal, event_id: str) -> dict[str, Any]:
    """Send the event again, now, to every enabled endpoint of its account that wants it.

    Refused (429) while an earlier redelivery of the event still waits for its first attempt:
    a redelivery re-fans the event, so repeating it faster than the dispatcher sends would only
    grow the outbox.
    """
    event = await _load_event(conn, principal, event_id)
    if await webhooks.has_queued_redelivery(conn, event.id, utcnow()):
        raise APIError(
            429,
            "rate_limited",
            "A redelivery of this event is still queued; redeliver it again once that attempt "
            "has been made (see the event's deliveries).",
            "id",
            {"Retry-After": "5"},
            reason="redelivery_pending",
        )
    if event.type == TEST_EVENT_TYPE:  # to the endpoint it was sent to, if still enabled
        endpoint_ids = [
            delivery.endpoint_id
            for delivery in await webhooks.deliveries_of(conn, event.id)
            if await _is_enabled(conn, event.account_id, delivery.endpoint_id)
        ]
    else:
        endpoint_ids = await webhooks.subscribed_endpoints(conn, event.account_id, event.type)
    await webhooks.enqueue(conn, event.id, endpoint_ids, utcnow())
    await audit.record(conn, audit.actor_of(principal), "event.redeliver", ("event", event.id))
    return await _with_deliveries(conn, event)


# A test event (the console's "Send test event"): sent to one endpoint whatever types it
# subscribes to, never fanned out to others, and not a type an endpoint subscribes to. Its
# ``data`` is the endpoint; receivers that ignore unknown types answer 200 (the specification).
TEST_EVENT_TYPE = "webhook.test"


async def _is_enabled(conn: Executor, account_id: str, endpoint_id: str) -> bool:
    row = await endpoint_rows.get_endpoint(conn, account_id, endpoint_id)
    return row is not None and bool(row.enabled)


async def send_test_event(conn: Executor, principal: Principal, endpoint_id: str) -> dict[str, Any]:
    """Record a ``webhook.test`` event with one delivery, due now, to this endpoint of the
    caller's account: signed and sent by the dispatcher like any event. A disabled endpoint is
    refused (409 ``endpoint_disabled``): the delivery would wait until it is re-enabled."""
    endpoint = await endpoints_service.get_endpoint(conn, principal, endpoint_id)
    if not endpoint["enabled"]:
        raise APIError(
            409,
            "invalid_request",
            "The endpoint is disabled; re-enable it, then send it a test event.",
            "enabled",
            reason="endpoint_disabled",
        )
    assert principal.account_id is not None  # get_endpoint refuses a principal without one
    data = {"id": endpoint["id"], "object": "webhook_endpoint", "url": endpoint["url"]}
    now = utcnow()
    [row] = event_rows(TEST_EVENT_TYPE, [NewEvent(principal.account_id, data, now)])
    row["order_id"] = None  # about no order
    await insert_rows(conn, events, [row])
    await insert_rows(
        conn, webhook_deliveries, [webhooks.new_delivery(row["id"], endpoint_id, now)]
    )
    changes = {"event": [None, row["id"]]}
    actor = audit.actor_of(principal)
    await audit.record(conn, actor, "endpoint.test", ("endpoint", endpoint_id), changes)
    return await _with_deliveries(conn, await _load_event(conn, principal, row["id"]))


async def prune_events(conn: Executor) -> int:
    return await events_repository.delete_events_before(conn, utcnow() - EVENT_RETENTION)
