"""The audit trail's page: who changed what, newest first, with the API's filters."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from fastapi import Request
from starlette.responses import Response

from commerce_api.audit import service as audit
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import PAGE_SIZE, page_number, pagination, render
from commerce_api.core.pagination import NewestFirst
from commerce_api.http.dependencies import ServicesDep

FILTERS = ("target_id", "actor_id", "action", "from", "to")


def _day(text: str) -> datetime | None:
    """A ``YYYY-MM-DD`` (a date input's value) as that day's start in UTC; None if not one."""
    try:
        return datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
    except ValueError:
        return None


async def audit_page(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    query = request.query_params
    filters = {name: query.get(name, "").strip()[:64] for name in FILTERS}
    if filters["action"] not in audit.ACTIONS:
        filters["action"] = ""
    first, last = _day(filters["from"]), _day(filters["to"])
    window = NewestFirst(first, last + timedelta(days=1) if last else None)
    number = page_number(request)
    async with services.db.read() as conn:
        page = await audit.list_audit_events(
            conn,
            target_id=filters["target_id"] or None,
            actor_id=filters["actor_id"] or None,
            action=filters["action"] or None,
            limit=PAGE_SIZE,
            offset=(number - 1) * PAGE_SIZE,
            chosen=window,
        )
    return render(
        request,
        "audit.html",
        {
            "nav": "audit",
            "rows": page["data"],
            "pages": pagination(number, page["pagination"]["total"]),
            "actions": audit.ACTIONS,
            "filters": filters,
        },
    )


def order_timeline(
    order: dict[str, Any], history: list[dict[str, Any]], events: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """An order's page's timeline, oldest first: its creation, each audit row (a change and
    its actor) and each event (with its deliveries). An order placed before the audit trail
    existed has no ``order.create`` row: its creation is shown without an actor. (The API's
    timestamps have one width, so their text sorts as their time.)"""
    entries: list[tuple[str, int, dict[str, Any]]] = []
    if not any(row["action"] == "order.create" for row in history):
        entries.append((order["created_at"], 0, {"kind": "created"}))
    entries += [(row["created_at"], 1, {"kind": "audit", "row": row}) for row in history]
    entries += [(event["created_at"], 2, {"kind": "event", "event": event}) for event in events]
    entries.sort(key=lambda entry: entry[:2])
    return [{"at": at, **entry} for at, _, entry in entries]
