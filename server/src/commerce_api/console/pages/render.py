"""The console's templates and what every page shares: notices, paging, redirects."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.datastructures import FormData
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from commerce_api.accounts.service import Principal
from commerce_api.console.sessions import COOKIE_PATH, ConsoleSession
from commerce_api.core.errors import APIError, Problem
from commerce_api.core.timestamps import format_timestamp
from commerce_api.http.dependencies import get_services
from commerce_api.storage.db import Database

PREFIX = "/dashboard"
SIGN_IN_URL = f"{PREFIX}/sign-in"
PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
CONSOLE_DIR = Path(__file__).resolve().parents[1]
templates = Jinja2Templates(directory=CONSOLE_DIR / "templates")

# Messages shown after a redirect, by code: the query string never carries text to show.
# The code travels in a one-shot cookie (:data:`NOTICE_COOKIE`), not in the URL: the page
# after the redirect shows it and clears it, so a reload (or a bookmark) does not show it again.
NOTICE_COOKIE = "commerce_console_notice"
NOTICE_SECONDS = 60  # a notice not shown by then (the redirect not followed) is dropped
NOTICES = {
    "signed-out": "You are signed out.",
    "session-ended": "Your session has ended; sign in again.",
    "product-created": "Product created.",
    "product-saved": "Product saved.",
    "product-archived": "Product archived: it is hidden from the catalogue, kept for orders.",
    "stock-set": "Stock set.",
    "order-fulfilled": "Order fulfilled: an order.fulfilled event was sent.",
    "order-canceled": "Order canceled: its stock was returned.",
    "endpoint-enabled": "Endpoint re-enabled: its pending deliveries resume.",
    "event-redelivered": "Redelivery queued: the dispatcher sends it now.",
    "test-event-sent": "Test event queued: the dispatcher signs and sends it to the endpoint "
    "now; its delivery shows below (reload to follow it).",
    "account-created": "Account created.",
    "key-revoked": "Key revoked: it is refused from now on.",
}


def _money(value: object) -> str:
    return f"{Decimal(str(value)):.2f}" if isinstance(value, int | float | Decimal) else ""


def _when(value: object) -> str:
    """An ISO timestamp (or datetime) as ``2026-11-24 23:50:25 UTC``."""
    if isinstance(value, datetime):
        value = format_timestamp(value)
    if not isinstance(value, str) or not value:
        return ""
    return value.replace("T", " ").split(".")[0].removesuffix("Z") + " UTC"


templates.env.filters["money"] = _money
templates.env.filters["when"] = _when


def form_problems(problems: Iterable[Problem | str]) -> dict[str, Any]:
    """What a form's page shows of its problems: ``errors``, every message (above the form),
    and ``invalid``, each form field at fault with its first message (marked and shown next to
    it; ``items[0].quantity`` is the field ``items``). A plain string is about no one field."""
    errors: list[str] = []
    invalid: dict[str, str] = {}
    for problem in problems:
        if isinstance(problem, str):
            errors.append(problem)
            continue
        errors.append(problem.message)
        if field := re.split(r"[.\[]", problem.parameter, maxsplit=1)[0]:
            invalid.setdefault(field, problem.message)
    return {"errors": errors, "invalid": invalid}


def render(
    request: Request, template: str, context: Mapping[str, Any], status: int = 200
) -> HTMLResponse:
    session = request.scope.get("state", {}).get("console_session")
    notice_code = request.cookies.get(NOTICE_COOKIE)
    values = {
        "session": session,
        "csrf_token": session.csrf_token if isinstance(session, ConsoleSession) else "",
        "notice": NOTICES.get(notice_code or ""),
        "currency": get_services(request).settings.currency,
        "environment": get_services(request).settings.environment,
        **context,
    }
    response = templates.TemplateResponse(request, template, values, status_code=status)
    if notice_code is not None:  # shown once
        response.delete_cookie(NOTICE_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


def redirect(path: str, notice: str | None = None, **query: str) -> RedirectResponse:
    """A redirect after a POST (303) to ``path`` with ``query``; the page there shows
    ``notice`` (a code of :data:`NOTICES`) once."""
    params = {key: value for key, value in query.items() if value}
    response = RedirectResponse(path + (f"?{urlencode(params)}" if params else ""), 303)
    if notice:
        # Not Secure-only: a notice's code is no secret, and a plain-HTTP development
        # server must show it too (the session cookie's ``secure`` follows the environment).
        response.set_cookie(
            NOTICE_COOKIE,
            notice,
            max_age=NOTICE_SECONDS,
            path=COOKIE_PATH,
            httponly=True,
            samesite="strict",
        )
    return response


async def change_then_redirect(
    db: Database,
    change: Callable[[AsyncConnection], Awaitable[object]],
    refused: Callable[[APIError], Awaitable[Response]],
    path: str,
    notice: str,
) -> Response:
    """Run ``change`` in a write transaction, then redirect to ``path`` with ``notice``; a
    change the service refuses is answered by ``refused`` (the page again, with the error)."""
    try:
        async with db.write() as conn:
            await change(conn)
    except APIError as exc:
        return await refused(exc)
    return redirect(path, notice)


def form_text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def page_number(request: Request) -> int:
    text = request.query_params.get("page", "1")
    return int(text) if text.isdigit() and 0 < int(text) < 10**9 else 1


def pagination(number: int, total: int, size: int = PAGE_SIZE) -> dict[str, Any]:
    last = max(1, -(-total // size))
    return {"number": number, "last": last, "total": total}


def for_account(session: ConsoleSession, account_id: str) -> Principal:
    """The operator acting within one account, so that the API's account-scoped service calls
    (its orders, webhook endpoints and events) answer for that account."""
    return Principal(
        key_id=session.principal.key_id,
        account_id=account_id,
        role="client",
        tier=session.principal.tier,
    )
