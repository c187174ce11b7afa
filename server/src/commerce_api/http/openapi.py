"""The OpenAPI 3.1 document at ``/v1/openapi.json`` and the offline ``/docs`` page.

FastAPI generates the document from the routes, and its ``webhooks`` section from the
declarations in ``app.webhooks`` (the deliveries' bodies and headers); :func:`finalise` then
makes it describe what the service really does: the bearer scheme, the error envelope on every
error status (never FastAPI's default 422 body), the 403 a publishable key meets outside the
catalogue, and the headers every response carries.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import re
from collections.abc import Iterable
from importlib import resources
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.responses import HTMLResponse, Response

from commerce_api.http.pipeline import EXEMPT_PATHS
from commerce_api.http.routing import admits_publishable_keys, key_handling
from commerce_api.idempotency import service as idempotency

OPENAPI_URL = "/v1/openapi.json"
DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
BEARER = "bearerAuth"

_REQUEST_ID_HEADER = {
    "description": "Identifies this request; quote it when reporting a problem.",
    "schema": {"type": "string"},
}

DESCRIPTION = """\
The Commerce API: a product catalogue, orders, and order events by signed webhook.

Authenticate every `/v1` request with `Authorization: Bearer <API_KEY>`: a secret key (`sk_…`)
from a server, or in a storefront's pages a publishable key (`pk_…`), which reads the catalogue
(the operations that document no 403) and nothing else (any other operation: 403, reason
`publishable_key_not_allowed`). Errors always have the body
`{"error": {"code", "reason", "message", "details", "problems"}}`, where `reason` is a stable
word a program can switch on (`insufficient_stock`, `idempotency_key_in_use`, …: the `reason`
of the `ErrorDetail` schema below lists every one), `details` names the (first) offending
parameter and `problems` lists every problem of the request as `{parameter, reason, message}`.
Money is a JSON number with at most two decimals; timestamps are ISO 8601 UTC.
"""


_IDEMPOTENCY_PARAMETER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Makes a retry safe: the same key with the same request replays the first "
    "response; with a different request it is a 422. Scoped to your account, kept 24 hours.",
    "schema": {"type": "string", "pattern": f"^{idempotency.KEY_PATTERN.pattern}$"},
}
_REPLAYED_HEADER = {
    "description": "`true` when this response is the replay of an earlier request with the "
    "same `Idempotency-Key`.",
    "schema": {"type": "string", "enum": ["true"]},
}


_IDEMPOTENCY_CONFLICT = {
    "description": "`Idempotency-Key` reused with a different request.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
}


_RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": {
        "description": "Requests allowed in the current window.",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Remaining": {
        "description": "Requests left in the current window.",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Reset": {
        "description": "When the window resets: Unix time in seconds.",
        "schema": {"type": "integer"},
    },
}
_RATE_LIMITED = {
    "description": "Rate limit exceeded: retry after `Retry-After` seconds.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    "headers": {
        "Retry-After": {
            "description": "Seconds until the window resets.",
            "schema": {"type": "integer"},
        }
    },
}


_PUBLISHABLE_KEY_REFUSED = {
    "description": "The key is valid but its role may not do this: a publishable key (`pk_…`) "
    "outside the catalogue's reads, or a client key on an admin operation.",
    "content": {
        "application/json": {
            "schema": {"$ref": "#/components/schemas/ErrorResponse"},
            "example": {
                "error": {
                    "code": "unauthorized",
                    "reason": "publishable_key_not_allowed",
                    "message": "Publishable keys (pk_…) may only read the catalogue …",
                    "details": "Authorization",
                    "problems": [
                        {
                            "parameter": "Authorization",
                            "reason": "publishable_key_not_allowed",
                            "message": "Publishable keys (pk_…) may only read the catalogue …",
                        }
                    ],
                }
            },
        }
    },
}


def finalise(
    schema: dict[str, Any],
    public_paths: frozenset[str],
    catalog_reads: frozenset[tuple[str, str]] = frozenset(),
    keyed: frozenset[tuple[str, str]] = frozenset(),
) -> dict[str, Any]:
    """The document as published; ``catalog_reads``: the (path, method) of the operations that
    admit publishable keys (every other authenticated one may answer them 403); ``keyed``:
    those that run under an ``Idempotency-Key`` (``routing.key_handling``)."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})[BEARER] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key: `sk_sandbox_…` on a sandbox instance, `sk_live_…` in "
        "production; publishable keys (catalogue reads only) `pk_sandbox_…` and `pk_live_…`.",
    }
    for name in ("HTTPValidationError", "ValidationError"):
        components.get("schemas", {}).pop(name, None)
    for operations in schema.get("webhooks", {}).values():
        for operation in operations.values():
            # The receiver's answer: FastAPI's 422 would say it validates bodies as we do.
            operation.get("responses", {}).pop("422", None)
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses: dict[str, Any] = operation.setdefault("responses", {})
            # FastAPI documents a 422 validation body; ours are 400s. A 422 exists only for
            # an Idempotency-Key reused with a different request.
            responses.pop("422", None)
            authenticated = path not in public_paths
            if authenticated:
                operation["security"] = [{BEARER: []}]
                if (path, method) not in catalog_reads and "403" not in responses:
                    responses["403"] = copy.deepcopy(_PUBLISHABLE_KEY_REFUSED)
            idempotent = (path, method) in keyed
            if idempotent:
                operation.setdefault("parameters", []).append(_IDEMPOTENCY_PARAMETER)
                responses["422"] = _IDEMPOTENCY_CONFLICT
            rate_limited = path not in EXEMPT_PATHS
            if rate_limited:
                responses["429"] = copy.deepcopy(_RATE_LIMITED)
            for response in responses.values():
                headers = response.setdefault("headers", {})
                headers["X-Request-Id"] = _REQUEST_ID_HEADER
                if rate_limited:
                    headers.update(_RATE_LIMIT_HEADERS)
                if idempotent:
                    headers["Idempotent-Replayed"] = _REPLAYED_HEADER
    return schema


def install_openapi(app: FastAPI, public_paths: frozenset[str]) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version="3.1.0",
                description=DESCRIPTION,
                routes=app.routes,
                webhooks=app.webhooks.routes,
                servers=[{"url": "/", "description": "This server"}],
            )
            routes = app.state.method_index.routes  # ``routing.MethodIndex``: as declared
            catalog_reads = _operations(route for route in routes if admits_publishable_keys(route))
            keyed = _operations(route for route in routes if key_handling(route) is not None)
            app.openapi_schema = finalise(schema, public_paths, catalog_reads, keyed)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _operations(routes: Iterable[APIRoute]) -> frozenset[tuple[str, str]]:
    """The (path, method) of each operation of ``routes``, as the document names them."""
    return frozenset(
        (route.path, method.lower()) for route in routes for method in route.methods or ()
    )


def docs_router(title: str) -> APIRouter:
    """``/docs`` (Swagger UI) with its assets served from the swagger-ui-py package."""
    router = APIRouter(include_in_schema=False)
    static = resources.files("swagger_ui") / "static"

    page = get_swagger_ui_html(
        openapi_url=OPENAPI_URL,
        title=f"{title} — reference",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
        # A pasted key stays in the page only: Swagger UI must not keep it in localStorage.
        swagger_ui_parameters={"persistAuthorization": False},
    ).body
    headers = docs_page_headers(bytes(page))

    @router.get(DOCS_URL)
    async def docs() -> HTMLResponse:
        return HTMLResponse(page, headers=headers)

    for name, media_type in (
        ("swagger-ui-bundle.js", "text/javascript"),
        ("swagger-ui.css", "text/css"),
        ("favicon-32x32.png", "image/png"),
    ):
        endpoint = _static_asset((static / name).read_bytes(), media_type)
        router.add_api_route(f"{ASSETS_URL}/{name}", endpoint, methods=["GET"])
    return router


_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


def docs_page_headers(page: bytes) -> dict[str, str]:
    """The ``/docs`` page's own policy: only its own scripts (the page's one inline script by
    its hash), styles (Swagger UI sets inline styles) and images (its icons are ``data:``
    URIs); requests to this origin only; never framed."""
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'"
        for script in _INLINE_SCRIPT.findall(page)
    )
    policy = (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "same-origin",
    }


def _static_asset(content: bytes, media_type: str) -> Any:
    headers = {"Cache-Control": "public, max-age=86400"}

    async def asset() -> Response:
        return Response(content, media_type=media_type, headers=headers)

    return asset
