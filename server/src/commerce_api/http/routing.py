"""HTTP plumbing shared by every router: strict routes, JSON responses, documented errors."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from commerce_api.core.errors import REASONS, APIError, Problem, Reason, invalid_request, summary
from commerce_api.http import idempotency
from commerce_api.http.declaration import (
    depends_on,
    path_pattern,
    query_names,
    route_declaration,
    takes_body_anywhere,
)
from commerce_api.http.dependencies import (
    admin_principal,
    catalog_principal,
    current_principal,
)
from commerce_api.http.schemas import ErrorResponse

JSON = "application/json"
EndpointT = TypeVar("EndpointT", bound=Callable[..., Any])


def json_response(
    content: object, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """Serialise with orjson; our output is built from trusted rows, not re-validated."""
    return Response(
        orjson.dumps(content), status_code=status_code, media_type=JSON, headers=headers
    )


_MANAGES_IDEMPOTENCY = "__commerce_manages_idempotency__"


def manages_idempotency(endpoint: EndpointT) -> EndpointT:
    """Mark a POST endpoint that claims and records its ``Idempotency-Key`` itself, in the
    same write as its change (orders: see ``orders/placement.py``). Apply it below the
    ``@router.post`` decorator."""
    setattr(endpoint, _MANAGES_IDEMPOTENCY, True)
    return endpoint


_SERVED_FIRST = "__commerce_served_first__"


def served_first(endpoint: EndpointT) -> EndpointT:
    """Mark a route the fast lane (``app/fastlane.py``) answers before the framework runs: it
    reads what the endpoint's signature declares (``http/declaration.py``) and calls the endpoint
    itself, once, answering whatever it returns or raises (apply it below ``@router.get``). Its
    dependencies must be among those the fast lane provides: the services, the caller, the
    request's context."""
    setattr(endpoint, _SERVED_FIRST, "endpoint")
    return endpoint


def places_orders(endpoint: EndpointT) -> EndpointT:
    """Mark a POST the fast lane answers (``POST /v1/orders``): it validates the body with the
    route's model and counts the request before it calls the endpoint (under its
    ``Idempotency-Key``, as the routes do), since the order desk writes."""
    setattr(endpoint, _SERVED_FIRST, "orders")
    return endpoint


def served_first_as(endpoint: Callable[..., Any]) -> str | None:
    """How the fast lane serves a route's endpoint, if it does."""
    how: str | None = getattr(endpoint, _SERVED_FIRST, None)
    return how


# How a route runs under an ``Idempotency-Key`` (``key_handling``).
KEY_STORED = "stored"  # the answer stored as the key's outcome (``idempotency.run_keyed``)
KEY_IN_OWN_WRITE = "own_write"  # claimed and recorded by the endpoint (``manages_idempotency``)


def key_handling(route: APIRoute) -> str | None:
    """How a route runs under an ``Idempotency-Key``: a POST that needs a secret key runs under
    one (:data:`KEY_STORED`, or :data:`KEY_IN_OWN_WRITE` when marked ``manages_idempotency``);
    None for any other route, which reads no key. The routes and the fast lane both ask."""
    declared = route_declaration(route)
    if "POST" not in (route.methods or ()) or not depends_on(
        declared, route.path, current_principal
    ):
        return None
    return KEY_IN_OWN_WRITE if getattr(route.endpoint, _MANAGES_IDEMPOTENCY, False) else KEY_STORED


def admits_publishable_keys(route: APIRoute) -> bool:
    """Whether a route answers publishable keys: it declares ``CatalogPrincipal`` and no
    stricter caller (``http/dependencies.py``)."""
    declared = route_declaration(route)
    return depends_on(declared, route.path, catalog_principal) and not depends_on(
        declared, route.path, current_principal
    )


class StrictRoute(APIRoute):
    """A route that authenticates first and refuses unknown query parameters and non-JSON bodies.

    Unknown parameters are refused rather than ignored so that a typo (``?limt=5``) is an
    error the integrator sees at once instead of a silent default.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        declared = route_declaration(self)
        known = frozenset(query_names(declared, self.path))
        takes_body = takes_body_anywhere(declared, self.path)
        needs_key = depends_on(declared, self.path, current_principal)
        needs_admin = depends_on(declared, self.path, admin_principal)
        reads_catalog = depends_on(declared, self.path, catalog_principal)
        keys = key_handling(self)

        async def strict_handler(request: Request) -> Response:
            # Authenticate before anything else is checked, so that a request without a valid
            # key is a 401 (or 403) whatever its query or body.
            if needs_key or needs_admin:
                principal = await current_principal(request)
                if needs_admin:
                    await admin_principal(principal)
            elif reads_catalog:
                await catalog_principal(request)
            unknown = [name for name in request.query_params if name not in known]
            if unknown:
                raise unknown_query_parameters(unknown)
            if takes_body and _has_body(request) and not _is_json(request):
                raise invalid_request(
                    "The request body must be JSON: send `Content-Type: application/json`.",
                    "Content-Type",
                    status=415,
                    reason="unsupported_media_type",
                )
            if keys is not None and (key := idempotency.read_key(request)) is not None:
                if keys == KEY_IN_OWN_WRITE:
                    return await idempotency.run_self_managed_route(handler, request, key)
                return await idempotency.run_keyed(handler, request, key)
            return await handler(request)

        return strict_handler


def unknown_query_parameters(names: list[str]) -> APIError:
    """One problem per unknown query parameter (each named once, in the order sent)."""
    problems = [
        Problem(name, "validation_failed", f"Unknown query parameter `{name}`.")
        for name in dict.fromkeys(names)
    ]
    return invalid_request(summary(problems), problems[0].parameter, problems=problems)


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    if length is not None:
        return length.strip() not in {"", "0"}
    return "transfer-encoding" in request.headers


def _is_json(request: Request) -> bool:
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media_type == JSON


_ERROR_DESCRIPTIONS = {
    400: "Invalid request: malformed JSON, a failed validation, an unknown parameter. "
    "`details` names the parameter.",
    401: "Missing, malformed, unknown or revoked API key.",
    403: "The key is valid but its role may not do this (a client key on an admin endpoint, "
    "a publishable key outside the catalogue).",
    404: "No such resource (or it belongs to another account).",
    409: "Conflict with the current state: `reason` is `insufficient_stock`, "
    "`invalid_transition` or `idempotency_key_in_use` (only the last is worth a retry).",
    413: "Request body larger than 1 MiB.",
    415: "Request body is not `application/json`.",
    500: "Unexpected server error; `details` carries the request id.",
}

# Every operation can answer these.
COMMON_ERRORS = (400, 404, 500)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the given error statuses, with the error envelope."""
    return {
        status: {
            "model": ErrorResponse,
            "description": _ERROR_DESCRIPTIONS[status],
            "content": {"application/json": {"example": _ERROR_EXAMPLES[status]}},
        }
        for status in sorted({*COMMON_ERRORS, *statuses})
    }


def _example(reason: Reason, message: str, details: str) -> dict[str, Any]:
    code = REASONS[reason][1]
    return {"error": {"code": code, "reason": reason, "message": message, "details": details}}


_ERROR_EXAMPLES = {
    400: _example("validation_failed", "Missing required parameter `customer_id`.", "customer_id"),
    401: _example("invalid_api_key", "Invalid API key (unknown or revoked).", "Authorization"),
    403: _example(
        "forbidden",
        "This endpoint needs an admin key; client keys cannot use it.",
        "Authorization",
    ),
    404: _example("not_found", "No product with id `prod_…`.", "id"),
    409: _example(
        "insufficient_stock",
        "Not enough stock for `prod_…`: 3 requested, 1 available.",
        "items[0].quantity",
    ),
    413: _example("payload_too_large", "The request body is larger than 1048576 bytes.", "body"),
    415: _example(
        "unsupported_media_type",
        "The request body must be JSON: send `Content-Type: application/json`.",
        "Content-Type",
    ),
    500: _example("internal_error", "Something went wrong on our side. …", "req_…"),
}


class MethodIndex:
    """Which methods each path answers, for the ``Allow`` header of a 405; and which route
    template a path falls under, for requests answered before routing (metrics, logs).

    FastAPI registers one route per method, and Starlette's own ``Allow`` names only the first
    route whose path matched; the index is built from our routers so it names them all.
    """

    def __init__(self, routers: Sequence[APIRouter]) -> None:
        # The routes as declared (FastAPI >= 0.16x keeps included routers as such in app.routes).
        self.routes = [
            route for router in routers for route in router.routes if isinstance(route, APIRoute)
        ]
        self._routes = [
            (path_pattern(route.path), frozenset(route.methods or ()), route.path)
            for route in self.routes
        ]

    def allowed(self, path: str) -> list[str]:
        methods: set[str] = set()
        for pattern, route_methods, _ in self._routes:
            if pattern.match(path):
                methods |= route_methods
        return sorted(methods)

    def template(self, path: str) -> str | None:
        """The template (``/v1/orders/{id}``) of the first route matching ``path``, if any."""
        for pattern, _, template in self._routes:
            if pattern.match(path):
                return template
        return None
