"""The console's pages under ``/dashboard``: plain HTML forms, each action one service call.

Every page but the sign-in page and the static files needs a session (:class:`ConsoleRoute`
redirects to the sign-in page without one) and every POST a CSRF token. A service's
``APIError`` is shown on the page with its status, never as the API's JSON. Pages are left out
of the OpenAPI document: they are not part of the API.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.routing import APIRoute
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from commerce_api.accounts import service as accounts
from commerce_api.accounts.service import Principal
from commerce_api.catalog import service as catalog
from commerce_api.catalog.schemas import ProductCreate, ProductUpdate
from commerce_api.console import repository, sessions
from commerce_api.console.sessions import ConsoleSession
from commerce_api.core.errors import APIError, describe_validation_error
from commerce_api.core.timestamps import format_timestamp
from commerce_api.events import service as event_service
from commerce_api.http.context import context as request_context
from commerce_api.http.dependencies import ServicesDep, get_services
from commerce_api.http.routing import json_response
from commerce_api.observability import metrics
from commerce_api.orders import repository as orders_repository
from commerce_api.orders import service as orders
from commerce_api.orders.domain import OrderStatus
from commerce_api.settings import Tier
from commerce_api.webhooks import service as webhooks
from commerce_api.webhooks.schemas import WebhookEndpointUpdate

PREFIX = "/dashboard"
SIGN_IN_URL = f"{PREFIX}/sign-in"


def uncounted(path: str) -> bool:
    """Whether a request for ``path`` is left out of the rate limit: the console's pages need
    a session, which needs an admin key (its live status polls would use up a per-IP quota).
    The sign-in form is counted, per client IP, like any request without a key."""
    return (path == PREFIX or path.startswith(PREFIX + "/")) and path != SIGN_IN_URL


PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
_HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=_HERE / "templates")

# Pages run only our own script and stylesheet, are never framed, and are not cached.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

# Messages shown after a redirect, by code: the query string never carries text to show.
NOTICES = {
    "signed-out": "You are signed out.",
    "session-ended": "Your session has ended; sign in again.",
    "product-created": "Product created.",
    "product-saved": "Product saved.",
    "product-archived": "Product archived: it is hidden from the catalogue, kept for orders.",
    "order-fulfilled": "Order fulfilled: an order.fulfilled event was sent.",
    "order-canceled": "Order canceled: its stock was returned.",
    "endpoint-enabled": "Endpoint re-enabled: its pending deliveries resume.",
    "event-redelivered": "Redelivery queued: the dispatcher sends it now.",
    "account-created": "Account created.",
    "key-revoked": "Key revoked: it is refused from now on.",
}

_PUBLIC = "__console_public__"


def public(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a page reachable without a session (apply below the ``@router`` decorator)."""
    setattr(endpoint, _PUBLIC, True)
    return endpoint


def _set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        path=sessions.COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=get_services(request).settings.environment == "production",
    )


def _clear_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(
        name,
        path=sessions.COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=get_services(request).settings.environment == "production",
    )


class ConsoleRoute(APIRoute):
    """A console page: a session first (else a redirect to sign in), a CSRF token on every
    POST, and the page headers on every answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        is_public = getattr(self.endpoint, _PUBLIC, False)

        async def console_handler(request: Request) -> Response:
            response = None if is_public else await _guarded(request)
            if response is None:
                response = await handler(request)
            for name, value in PAGE_HEADERS.items():
                response.headers.setdefault(name, value)
            return response

        return console_handler


async def _guarded(request: Request) -> Response | None:
    """The answer for a request without a live session or a valid CSRF token; None when the
    page may run (its session is then in the request's state)."""
    services = get_services(request)
    token = request.cookies.get(sessions.SESSION_COOKIE)
    session = None
    if token:
        session = await sessions.resume_session(
            services.db, token, services.settings.console_idle_seconds
        )
    if session is None:
        target = SIGN_IN_URL + ("?notice=session-ended" if token else "")
        redirect = RedirectResponse(target, 303)
        if token:
            _clear_cookie(redirect, request, sessions.SESSION_COOKIE)
        return redirect
    request.scope.setdefault("state", {})["console_session"] = session
    if request.method == "POST":
        given = (await request.form()).get(sessions.CSRF_FIELD)
        if not isinstance(given, str) or not sessions.tokens_match(session.csrf_token, given):
            return _page(
                request,
                "message.html",
                {
                    "title": "Form expired",
                    "error": "This form's security token is missing or out of date, so nothing "
                    "was changed. Go back, reload the page and try again.",
                },
                403,
            )
    return None


async def _current_session(request: Request) -> ConsoleSession:
    # async: FastAPI would run a plain function dependency on a worker thread.
    session = request.scope.get("state", {}).get("console_session")
    assert isinstance(session, ConsoleSession), "ConsoleRoute sets the session first"
    return session


SessionDep = Annotated[ConsoleSession, Depends(_current_session)]

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=ConsoleRoute)


# --- rendering ---------------------------------------------------------------------------------


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


def _page(
    request: Request, template: str, context: Mapping[str, Any], status: int = 200
) -> HTMLResponse:
    session = request.scope.get("state", {}).get("console_session")
    notice = NOTICES.get(request.query_params.get("notice", ""))
    values = {
        "session": session,
        "csrf_token": session.csrf_token if isinstance(session, ConsoleSession) else "",
        "notice": notice,
        "currency": get_services(request).settings.currency,
        "environment": get_services(request).settings.environment,
        **context,
    }
    return templates.TemplateResponse(request, template, values, status_code=status)


def _redirect(path: str, notice: str | None = None, **query: str) -> RedirectResponse:
    params = {key: value for key, value in query.items() if value}
    if notice:
        params["notice"] = notice
    return RedirectResponse(path + (f"?{urlencode(params)}" if params else ""), 303)


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _page_number(request: Request) -> int:
    text = request.query_params.get("page", "1")
    return int(text) if text.isdigit() and 0 < int(text) < 10**9 else 1


def _pages(page_number: int, total: int, size: int = PAGE_SIZE) -> dict[str, Any]:
    last = max(1, -(-total // size))
    return {"number": page_number, "last": last, "total": total}


def _for_account(session: ConsoleSession, account_id: str) -> Principal:
    """The operator acting within one account, so that the API's account-scoped service calls
    (its orders, webhook endpoints and events) answer for that account."""
    return Principal(
        key_id=session.principal.key_id,
        account_id=account_id,
        role="client",
        tier=session.principal.tier,
    )


# --- static files ------------------------------------------------------------------------------


def _static(name: str, media_type: str) -> Callable[[], Coroutine[Any, Any, Response]]:
    content = (_HERE / "static" / name).read_bytes()

    async def asset() -> Response:
        return Response(content, media_type=media_type, headers={"Cache-Control": "no-cache"})

    return asset


for _name, _type in (("console.css", "text/css"), ("console.js", "text/javascript")):
    router.add_api_route(f"/static/{_name}", public(_static(_name, _type)), methods=["GET"])


# --- signing in and out ------------------------------------------------------------------------


def _sign_in_page(request: Request, error: str | None = None, status: int = 200) -> Response:
    token = sessions.new_sign_in_token()
    response = _page(request, "sign_in.html", {"sign_in_token": token, "error": error}, status)
    _set_cookie(response, request, sessions.SIGN_IN_COOKIE, token)
    return response


@router.get("/sign-in")
@public
async def sign_in_form(request: Request, services: ServicesDep) -> Response:
    token = request.cookies.get(sessions.SESSION_COOKIE)
    if token and await sessions.resume_session(
        services.db, token, services.settings.console_idle_seconds
    ):
        return _redirect(PREFIX)
    return _sign_in_page(request)


@router.post("/sign-in")
@public
async def sign_in(request: Request, services: ServicesDep) -> Response:
    form = await request.form()
    expected = request.cookies.get(sessions.SIGN_IN_COOKIE, "")
    given = _text(form, sessions.CSRF_FIELD)
    if not expected or not sessions.tokens_match(expected, given):
        return _sign_in_page(
            request, "The sign-in form had expired; nothing was sent. Please try again.", 403
        )
    key = _text(form, "key")
    if not key:
        return _sign_in_page(request, "Enter an admin key.", 400)
    try:
        principal = await services.read_path.authenticate(key, request_context(request.scope))
    except APIError as exc:
        return _sign_in_page(request, exc.message, 401)
    if not principal.is_admin:
        return _sign_in_page(
            request,
            "This is a client key. The console needs an admin (operator) key: create one with "
            "`commerce-api keys create --admin`.",
            403,
        )
    token = await sessions.start_session(
        services.db, principal.key_id, services.settings.console_idle_seconds
    )
    response = _redirect(PREFIX)
    _set_cookie(response, request, sessions.SESSION_COOKIE, token)
    _clear_cookie(response, request, sessions.SIGN_IN_COOKIE)
    return response


@router.post("/sign-out")
async def sign_out(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    token = request.cookies.get(sessions.SESSION_COOKIE, "")
    await sessions.end_session(services.db, token)
    response = _redirect(SIGN_IN_URL, "signed-out")
    _clear_cookie(response, request, sessions.SESSION_COOKIE)
    return response


# --- overview ----------------------------------------------------------------------------------


def _metric_sums(text: str) -> dict[str, float]:
    """What the overview shows of the ``/metrics`` text."""
    sums = {"rejected_key": 0.0, "rejected_ip": 0.0, "server_errors": 0.0}
    sums.update(outbox_pending=0.0, outbox_oldest=0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "commerce_rate_limit_rejections_total":
                sums[f"rejected_{sample.labels.get('caller')}"] = sample.value
            elif sample.name == "commerce_http_requests_total" and sample.labels.get(
                "status", ""
            ).startswith("5"):
                sums["server_errors"] += sample.value
            elif sample.name == "commerce_webhook_outbox_pending":
                sums["outbox_pending"] = sample.value
            elif sample.name == "commerce_webhook_outbox_oldest_due_age_seconds":
                sums["outbox_oldest"] = sample.value
    return sums


@router.get("")
async def overview(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.read() as conn:
        pending = await orders.list_orders(
            conn, session.principal, status="pending", customer_id=None, limit=1, offset=0
        )
    figures = _metric_sums((await metrics.render(services.db)).decode())
    return _page(
        request,
        "overview.html",
        {
            "nav": "overview",
            "pending_orders": pending["pagination"]["total"],
            "figures": figures,
            "metrics_on": services.settings.metrics == "on",
        },
    )


# --- products ----------------------------------------------------------------------------------

PRODUCT_FIELDS = ("name", "description", "price", "category", "inventory_count")


def _product_fields(form: FormData) -> tuple[dict[str, Any], list[str]]:
    """The product's fields from a form (numbers parsed), and what could not be parsed."""
    fields: dict[str, Any] = {}
    errors: list[str] = []
    for name in PRODUCT_FIELDS:
        value = form.get(name)
        if isinstance(value, str):
            fields[name] = value if name == "description" else value.strip()
    try:
        if "price" in fields:
            fields["price"] = float(Decimal(fields["price"]))
    except InvalidOperation:
        errors.append("Price must be a number such as 19.99.")
    try:
        if "inventory_count" in fields:
            fields["inventory_count"] = int(fields["inventory_count"] or "0")
    except ValueError:
        errors.append("Stock must be a whole number.")
    return fields, errors


def _validation_messages(exc: ValidationError) -> list[str]:
    return [describe_validation_error(error)[0] for error in exc.errors()]


async def _catalogue_page(
    request: Request, services: ServicesDep, extra: Mapping[str, Any], status: int = 200
) -> Response:
    category = request.query_params.get("category", "").strip() or None
    name = request.query_params.get("q", "").strip() or None
    number = _page_number(request)
    async with services.db.read() as conn:
        total = await repository.count_products(conn, category, name)
        rows = await repository.page_products(
            conn, category, name, PAGE_SIZE, (number - 1) * PAGE_SIZE
        )
        categories = await repository.categories(conn)
    imported = request.query_params.get("created"), request.query_params.get("updated")
    return _page(
        request,
        "products.html",
        {
            "nav": "products",
            "products": [catalog.product_detail(row) for row in rows],
            "categories": categories,
            "category": category or "",
            "q": name or "",
            "pages": _pages(number, total),
            "imported": imported if all(n and n.isdigit() for n in imported) else None,
            **extra,
        },
        status,
    )


@router.get("/products")
async def products_page(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    return await _catalogue_page(request, services, {})


@router.get("/products/new")
async def new_product_form(request: Request, _session: SessionDep) -> Response:
    return _page(request, "product.html", {"nav": "products", "product": None, "values": {}})


@router.post("/products")
async def create_product(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    form = await request.form()
    fields, errors = _product_fields(form)
    if not errors:
        try:
            data = ProductCreate.model_validate(fields)
        except ValidationError as exc:
            errors = _validation_messages(exc)
    if errors:
        context = {"nav": "products", "product": None, "values": form, "errors": errors}
        return _page(request, "product.html", context, 400)
    async with services.db.write() as conn:
        product = await catalog.create_product(conn, data)
    return _redirect(f"{PREFIX}/products/{product['id']}", "product-created")


class _ImportRefused(Exception):
    """Rolls the import's transaction back (some record was invalid)."""


@router.post("/products/import")
async def import_products(
    request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    """All or nothing, with every invalid record named: each record goes through the
    service's import on its own, in one transaction rolled back if any was refused."""
    upload = (await request.form()).get("file")
    errors: list[str] = []
    records: list[dict[str, Any]] = []
    if not isinstance(upload, UploadFile) or not upload.filename:
        errors.append("Choose a .json or .csv file to import.")
    else:
        try:
            content = (await upload.read()).decode("utf-8")
            records = catalog.parse_import_file(upload.filename, content)
        except UnicodeDecodeError:
            errors.append("The file is not UTF-8 text.")
        except catalog.InvalidImport as exc:
            errors.append(f"The file could not be read: {exc}.")
    created = updated = 0
    if not errors:
        try:
            async with services.db.write() as conn:
                for index, record in enumerate(records, start=1):
                    try:
                        result = await catalog.import_products(conn, [record])
                    except catalog.InvalidImport as exc:
                        errors.append(f"record {index}: {str(exc).split(': ', 1)[-1]}")
                        continue
                    created, updated = created + result.created, updated + result.updated
                if errors:
                    raise _ImportRefused
        except _ImportRefused:
            pass
    if errors:
        return await _catalogue_page(request, services, {"import_errors": errors}, 400)
    return _redirect(f"{PREFIX}/products", created=str(created), updated=str(updated))


async def _product_page(
    request: Request, services: ServicesDep, product_id: str, extra: Mapping[str, Any], status: int
) -> Response:
    try:
        async with services.db.read() as conn:
            product = await catalog.get_product(conn, product_id)
    except APIError as exc:
        return _page(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    context = {"nav": "products", "product": product, "values": product, **extra}
    return _page(request, "product.html", context, status)


@router.get("/products/{product_id}")
async def product_page(
    product_id: str, request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    return await _product_page(request, services, product_id, {}, 200)


@router.post("/products/{product_id}")
async def update_product(
    product_id: str, request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    form = await request.form()
    fields, errors = _product_fields(form)
    if not errors:
        try:
            data = ProductUpdate.model_validate(fields)
            async with services.db.write() as conn:
                await catalog.update_product(conn, product_id, data)
        except ValidationError as exc:
            errors = _validation_messages(exc)
        except APIError as exc:
            errors = [exc.message]
    if errors:
        extra = {"values": form, "errors": errors}
        return await _product_page(request, services, product_id, extra, 400)
    return _redirect(f"{PREFIX}/products/{product_id}", "product-saved")


@router.post("/products/{product_id}/archive")
async def archive_product(
    product_id: str, request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    try:
        async with services.db.write() as conn:
            await catalog.archive_product(conn, product_id)
    except APIError as exc:
        return await _product_page(request, services, product_id, {"errors": [exc.message]}, 404)
    return _redirect(f"{PREFIX}/products", "product-archived")


# --- orders ------------------------------------------------------------------------------------

STATUSES = [status.value for status in OrderStatus]


@router.get("/orders")
async def orders_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    query = request.query_params
    status = query.get("status", "") if query.get("status", "") in STATUSES else ""
    customer_id = query.get("customer_id", "").strip()
    account_id = query.get("account_id", "").strip()
    number = _page_number(request)
    principal = _for_account(session, account_id) if account_id else session.principal
    async with services.db.read() as conn:
        page = await orders.list_orders(
            conn,
            principal,
            status=status or None,
            customer_id=customer_id or None,
            limit=PAGE_SIZE,
            offset=(number - 1) * PAGE_SIZE,
        )
        account_rows = await repository.list_accounts(conn)
    return _page(
        request,
        "orders.html",
        {
            "nav": "orders",
            "orders": page["data"],
            "pages": _pages(number, page["pagination"]["total"]),
            "statuses": STATUSES,
            "accounts": account_rows,
            "filters": {"status": status, "customer_id": customer_id, "account_id": account_id},
        },
    )


async def _order_page(
    request: Request,
    services: ServicesDep,
    session: ConsoleSession,
    order_id: str,
    error: str | None = None,
    status: int = 200,
) -> Response:
    try:
        async with services.db.read() as conn:
            order = await orders.get_order(conn, session.principal, order_id)
            row = await orders_repository.get_order(conn, order_id)
            assert row is not None  # get_order found it
            events = [
                await event_service.get_event(conn, session.principal, event.id)
                for event in await repository.order_events(conn, row.account_id, order_id)
            ]
    except APIError as exc:
        return _page(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    context = {
        "nav": "orders",
        "order": order,
        "account_id": row.account_id,
        "events": events,
        "error": error,
    }
    return _page(request, "order.html", context, status)


@router.get("/orders/{order_id}")
async def order_page(
    order_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    return await _order_page(request, services, session, order_id)


@router.get("/orders/{order_id}/status")
async def order_status(order_id: str, services: ServicesDep, session: SessionDep) -> Response:
    """The order's status, for the page's live status (console.js)."""
    try:
        async with services.db.read() as conn:
            order = await orders.get_order(conn, session.principal, order_id)
    except APIError as exc:
        return json_response({"error": exc.message}, exc.status)
    return json_response({"status": order["status"], "updated_at": order["updated_at"]})


@router.post("/orders/{order_id}/fulfil")
async def fulfil_order(
    order_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    try:
        async with services.db.write() as conn:
            await orders.fulfill_order(
                conn, session.principal, order_id, services.settings.environment
            )
    except APIError as exc:
        return await _order_page(request, services, session, order_id, exc.message, 409)
    return _redirect(f"{PREFIX}/orders/{order_id}", "order-fulfilled")


@router.post("/orders/{order_id}/cancel")
async def cancel_order(
    order_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    try:
        async with services.db.write() as conn:
            await orders.cancel_order(conn, session.principal, order_id)
    except APIError as exc:
        return await _order_page(request, services, session, order_id, exc.message, 409)
    return _redirect(f"{PREFIX}/orders/{order_id}", "order-canceled")


# --- webhooks ----------------------------------------------------------------------------------


@router.get("/webhooks")
async def webhooks_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    account_id = request.query_params.get("account_id", "").strip()
    endpoints: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    async with services.db.read() as conn:
        account_rows = await repository.list_accounts(conn)
        if account_id not in {row.id for row in account_rows}:
            account_id = account_rows[0].id if account_rows else ""
        if account_id:
            principal = _for_account(session, account_id)
            endpoints = (
                await webhooks.list_endpoints(conn, principal, limit=MAX_PAGE_SIZE, offset=0)
            )["data"]
            newest = await event_service.list_events(
                conn, principal, event_type=None, limit=1, offset=0
            )
            offset = max(0, newest["pagination"]["total"] - PAGE_SIZE)
            events = (
                await event_service.list_events(
                    conn, principal, event_type=None, limit=PAGE_SIZE, offset=offset
                )
            )["data"][::-1]
    return _page(
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


@router.post("/webhooks/{account_id}/endpoints/{endpoint_id}/enable")
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
                _for_account(session, account_id),
                endpoint_id,
                WebhookEndpointUpdate(enabled=True),
                None,
            )
    except APIError as exc:
        return _page(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    return _redirect(f"{PREFIX}/webhooks", "endpoint-enabled", account_id=account_id)


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
        return _page(request, "message.html", {"title": "Not found", "error": exc.message}, 404)
    return _page(request, "event.html", {"nav": "webhooks", "event": event, "error": error}, status)


@router.get("/events/{event_id}")
async def event_page(
    event_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    return await _event_page(request, services, session, event_id)


@router.post("/events/{event_id}/redeliver")
async def redeliver_event(
    event_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    try:
        async with services.db.write() as conn:
            await event_service.redeliver_event(conn, session.principal, event_id)
    except APIError as exc:
        status = 404 if exc.status == 404 else 409
        return await _event_page(request, services, session, event_id, exc.message, status)
    return _redirect(f"{PREFIX}/events/{event_id}", "event-redelivered")


# --- accounts and keys -------------------------------------------------------------------------


async def _accounts_page(
    request: Request,
    services: ServicesDep,
    extra: Mapping[str, Any] | None = None,
    status: int = 200,
) -> Response:
    async with services.db.read() as conn:
        account_rows = await repository.list_accounts(conn)
        keys = await accounts.list_keys(conn)
    context = {"nav": "accounts", "accounts": account_rows, "keys": keys, **(extra or {})}
    return _page(request, "accounts.html", context, status)


@router.get("/accounts")
async def accounts_page(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    return await _accounts_page(request, services)


MAX_ACCOUNT_NAME = 200


@router.post("/accounts")
async def create_account(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    form = await request.form()
    name = _text(form, "name")
    tier: Tier = "production" if _text(form, "tier") == "production" else "development"
    if not name or len(name) > MAX_ACCOUNT_NAME:
        error = f"An account needs a name of 1 to {MAX_ACCOUNT_NAME} characters."
        return await _accounts_page(request, services, {"error": error}, 400)
    async with services.db.write() as conn:
        await accounts.create_account(conn, name, tier)
    return _redirect(f"{PREFIX}/accounts", "account-created")


@router.post("/keys")
async def create_key(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    """A client key for an account, or an admin key (``account_id`` empty); shown once."""
    account_id = _text(await request.form(), "account_id") or None
    try:
        async with services.db.write() as conn:
            key = await accounts.create_key(
                conn,
                services.settings.environment,
                account_id=account_id,
                role="client" if account_id else "admin",
            )
    except accounts.AccountNotFound:
        error = f"No account with id `{account_id}`."
        return await _accounts_page(request, services, {"error": error}, 404)
    return await _accounts_page(request, services, {"created_key": key}, 201)


@router.post("/keys/{key_id}/revoke")
async def revoke_key(
    key_id: str, request: Request, services: ServicesDep, _session: SessionDep
) -> Response:
    async with services.db.write() as conn:
        revoked = await accounts.revoke_key(conn, key_id)
    if not revoked:
        error = f"No key with id `{key_id}`."
        return await _accounts_page(request, services, {"error": error}, 404)
    return _redirect(f"{PREFIX}/accounts", "key-revoked")
