"""The webhooks' pages: an account's endpoints and recent events, and an event's deliveries."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from starlette.responses import Response

from commerce_api.console import repository
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    PREFIX,
    for_account,
    redirect,
    render,
)
from commerce_api.console.sessions import ConsoleSession
from commerce_api.core.errors import APIError
from commerce_api.events import service as event_service
from commerce_api.http.dependencies import ServicesDep
from commerce_api.webhooks import service as webhooks
from commerce_api.webhooks.schemas import WebhookEndpointUpdate


async def webhooks_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    account_id = request.query_params.get("account_id", "").strip()
    endpoints: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    async with services.db.read() as conn:
        account_rows = await repository.list_accounts(conn)
        if account_id not in {row.id for row in account_rows}:
            account_id = account_rows[0].id if account_rows else ""
        if account_id:
            principal = for_account(session, account_id)
            endpoints = (
                await webhooks.list_endpoints(conn, principal, limit=MAX_PAGE_SIZE, offset=0)
            )["data"]
            events = (  # the newest
                await event_service.list_events(
                    conn, principal, event_type=None, limit=PAGE_SIZE, offset=0
                )
            )["data"]
    return render(
        request,
        "webhooks.html",
        {
            "nav": "webhooks",
            "accounts": account_rows,
            "account_id": account_id,
            "endpoints": endpoints,
            "events": events,
        },
    )


async def enable_endpoint(
    account_id: str,
    endpoint_id: str,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
) -> Response:
    try:
        async with services.db.write() as conn:
            await webhooks.update_endpoint(
                conn,
                for_account(session, account_id),
                endpoint_id,
                WebhookEndpointUpdate(enabled=True),
                None,
            )
    except APIError as exc:
        return render(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    return redirect(f"{PREFIX}/webhooks", "endpoint-enabled", account_id=account_id)


async def _event_page(
    request: Request,
    services: ServicesDep,
    session: ConsoleSession,
    event_id: str,
    error: str | None = None,
    status: int = 200,
) -> Response:
    try:
        async with services.db.read() as conn:
            event = await event_service.get_event(conn, session.principal, event_id)
    except APIError as exc:
        return render(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    return render(
        request, "event.html", {"nav": "webhooks", "event": event, "error": error}, status
    )


async def event_page(
    event_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    return await _event_page(request, services, session, event_id)


async def redeliver_event(
    event_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    try:
        async with services.db.write() as conn:
            await event_service.redeliver_event(conn, session.principal, event_id)
    except APIError as exc:
        status = 404 if exc.status == 404 else 409
        return await _event_page(request, services, session, event_id, exc.message, status)
    return redirect(f"{PREFIX}/events/{event_id}", "event-redelivered")
