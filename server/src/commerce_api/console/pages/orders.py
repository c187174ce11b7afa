"""An order's page: its lines, address and events, its live status, Fulfil and Cancel. The
list of orders is ``order_list``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Request
from starlette.responses import Response

from commerce_api.audit import service as audit
from commerce_api.console.pages.audit import order_timeline
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import PREFIX, change_then_redirect, form_text, render
from commerce_api.console.repository import listings
from commerce_api.console.sessions import ConsoleSession
from commerce_api.core.errors import APIError
from commerce_api.events import service as event_service
from commerce_api.http.dependencies import ServicesDep
from commerce_api.http.errors import error_response
from commerce_api.http.routing import json_response
from commerce_api.orders import repository as orders_repository
from commerce_api.orders import service as orders


async def _order_page(
    request: Request,
    services: ServicesDep,
    session: ConsoleSession,
    order_id: str,
    error: str | None = None,
    status: int = 200,
    values: Mapping[str, Any] | None = None,
) -> Response:
    try:
        async with services.db.read() as conn:
            order = await orders.get_order(conn, session.principal, order_id)
            row = await orders_repository.get_order(conn, order_id)
            assert row is not None  # get_order found it
            events = [
                await event_service.get_event(conn, session.principal, event.id)
                for event in await listings.order_events(conn, row.account_id, order_id)
            ]
            history = await audit.history_of(conn, order_id)
    except APIError as exc:
        return render(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    context = {
        "nav": "orders",
        "order": order,
        "account_id": row.account_id,
        "events": events,
        "timeline": order_timeline(order, history, events),
        "error": error,
        "values": values or {},  # the Fulfil form's fields, as typed
    }
    return render(request, "order.html", context, status)


async def order_page(
    order_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    return await _order_page(request, services, session, order_id)


async def order_status(order_id: str, services: ServicesDep, session: SessionDep) -> Response:
    """The order's status, for the page's live status (console.js)."""
    try:
        async with services.db.read() as conn:
            order = await orders.get_order(conn, session.principal, order_id)
    except APIError as exc:
        return error_response(exc)
    return json_response({"status": order["status"], "updated_at": order["updated_at"]})


async def fulfil_order(
    order_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    """Fulfil, with the form's tracking fields if any are filled in (validated as the API's
    body is: an invalid one shows the page again with the error, nothing changed)."""
    environment = services.settings.environment
    form = await request.form()
    try:
        tracking = orders.tracking_from_fields(
            *(form_text(form, name) for name in ("carrier", "tracking_number", "tracking_url"))
        )
    except APIError as exc:
        return await _order_page(request, services, session, order_id, exc.message, 400, form)
    return await change_then_redirect(
        services.db,
        lambda conn: orders.fulfill_order(
            conn, session.principal, order_id, environment, tracking=tracking
        ),
        lambda exc: _order_page(request, services, session, order_id, exc.message, 409),
        f"{PREFIX}/orders/{order_id}",
        "order-fulfilled",
    )


async def cancel_order(
    order_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    return await change_then_redirect(
        services.db,
        lambda conn: orders.cancel_order(conn, session.principal, order_id),
        lambda exc: _order_page(request, services, session, order_id, exc.message, 409),
        f"{PREFIX}/orders/{order_id}",
        "order-canceled",
    )
