"""The webhooks' pages: an account's endpoints (create one, send it a test event, recover its
failed deliveries, re-enable it) and recent events with their deliveries' status, and an
event's deliveries."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Request
from pydantic import ValidationError
from starlette.responses import Response

from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    PREFIX,
    for_account,
    form_problems,
    form_text,
    redirect,
    render,
)
from commerce_api.console.repository import listings
from commerce_api.console.sessions import ConsoleSession
from commerce_api.core.errors import APIError, Problem, validation_error
from commerce_api.core.timestamps import utcnow
from commerce_api.events import service as event_service
from commerce_api.http.dependencies import ServicesDep
from commerce_api.webhooks import service as webhooks
from commerce_api.webhooks.schemas import (
    EVENT_TYPES,
    WebhookEndpointCreate,
    WebhookEndpointUpdate,
)

SINCE_FORMAT = "%Y-%m-%dT%H:%M"  # an <input type="datetime-local">'s value


def delivery_summary(states: list[Any]) -> dict[str, int]:
    """An event's deliveries counted by the API's status — ``succeeded``, ``pending``,
    ``failed`` (docs/design.md, "Webhook delivery states") — and ``after_failure``: how many
    of the pending ones have a failed attempt behind them (a retry scheduled)."""
    counts: Counter[str] = Counter()
    for state in states:
        counts[state.status] += 1
        if state.status == "pending" and state.attempts > 0:
            counts["after_failure"] += 1
    return dict(counts)


async def _webhooks_page(
    request: Request,
    services: ServicesDep,
    session: ConsoleSession,
    account_id: str,
    extra: Mapping[str, Any] | None = None,
    status: int = 200,
) -> Response:
    endpoints: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    async with services.db.read() as conn:
        account_rows = await listings.list_accounts(conn)
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
            by_event: dict[str, list[Any]] = defaultdict(list)
            for state in await listings.delivery_states(conn, [e["id"] for e in events]):
                by_event[state.event_id].append(state)
            for event in events:
                event["delivery_summary"] = delivery_summary(by_event[event["id"]])
    since = (utcnow() - timedelta(days=1)).strftime(SINCE_FORMAT)
    context = {
        "nav": "webhooks",
        "accounts": account_rows,
        "account_id": account_id,
        "endpoints": endpoints,
        "events": events,
        "event_types": EVENT_TYPES,
        "since": since,
        **(extra or {}),
    }
    return render(request, "webhooks.html", context, status)


async def webhooks_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    account_id = request.query_params.get("account_id", "").strip()
    return await _webhooks_page(request, services, session, account_id)


async def create_endpoint(
    account_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    """Register an endpoint for the account, as ``POST /v1/webhook_endpoints`` does; its
    signing secret is shown on the answer, once."""
    form = await request.form()
    chosen = [value for value in form.getlist("events") if isinstance(value, str)]
    fields: dict[str, Any] = {"url": form_text(form, "url"), "events": chosen}
    if description := form_text(form, "description"):
        fields["description"] = description

    async def refused(errors: Sequence[Problem | str], status: int) -> Response:
        extra = {**form_problems(errors), "values": fields}
        return await _webhooks_page(request, services, session, account_id, extra, status)

    try:
        data = WebhookEndpointCreate.model_validate(fields)
    except ValidationError as exc:
        return await refused(validation_error(exc.errors()).problems, 400)
    async with services.db.read() as conn:
        if account_id not in {row.id for row in await listings.list_accounts(conn)}:
            return await refused([f"No account with id `{account_id}`."], 404)
    try:
        url = await webhooks.check_receiver_url(data.url, services.settings)
        async with services.db.write() as conn:
            created = await webhooks.create_endpoint(
                conn,
                for_account(session, account_id),
                data,
                url,
                services.settings,
                services.secret_box,
            )
    except APIError as exc:  # a URL the deployment refuses names `url`
        return await refused(exc.problems or [exc.message], exc.status)
    extra = {"created_endpoint": created}
    return await _webhooks_page(request, services, session, account_id, extra, 201)


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


async def send_test_event(
    account_id: str,
    endpoint_id: str,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
) -> Response:
    """Send the endpoint a ``webhook.test`` event (through the outbox: the dispatcher signs
    and delivers it); the answer is the event's page, where its delivery shows."""
    try:
        async with services.db.write() as conn:
            event = await event_service.send_test_event(
                conn, for_account(session, account_id), endpoint_id
            )
    except APIError as exc:
        extra = {"error": exc.message}
        return await _webhooks_page(request, services, session, account_id, extra, exc.status)
    return redirect(f"{PREFIX}/events/{event['id']}", "test-event-sent")


def parse_since(text: str) -> datetime | None:
    """A moment from the form: ``YYYY-MM-DDTHH:MM[:SS]`` in UTC (a datetime-local input's
    value), or an RFC 3339 time with its zone; None if it is neither."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


async def recover_endpoint(
    account_id: str,
    endpoint_id: str,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
) -> Response:
    """Queue again the endpoint's failed deliveries of events since a moment: the service
    call of ``POST /v1/webhook_endpoints/{id}/recover``."""
    form = await request.form()
    since = parse_since(form_text(form, "since"))
    if since is None:
        extra = {"error": "Give the moment as a date and time (UTC), such as 2026-11-25T14:00."}
        return await _webhooks_page(request, services, session, account_id, extra, 400)
    try:
        async with services.db.write() as conn:
            recovered = await webhooks.recover_deliveries(
                conn, for_account(session, account_id), endpoint_id, since
            )
    except APIError as exc:
        extra = {"error": exc.message}
        return await _webhooks_page(request, services, session, account_id, extra, exc.status)
    count = recovered["recovered"]
    notice = (
        f"Recovered {count} failed deliver{'y' if count == 1 else 'ies'} of events since "
        f"{since:%Y-%m-%d %H:%M} UTC: due now, each with a fresh retry schedule."
    )
    return await _webhooks_page(request, services, session, account_id, {"notice": notice})


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
