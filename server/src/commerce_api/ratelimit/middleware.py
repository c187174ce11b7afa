"""Counts every request against its quota and puts ``X-RateLimit-*`` on every response.

Authenticated requests count against their account (an operator key without an account
against itself); the rest against the client's IP at the development quota. Health and metrics
endpoints are for the operator's infrastructure and are not counted.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from commerce_api.accounts.service import Principal
from commerce_api.dependencies import get_services, optional_principal
from commerce_api.errors import error_body
from commerce_api.middleware import add_headers, send_json
from commerce_api.observability.metrics import METRICS_PATH, REJECTED_IP, REJECTED_KEY
from commerce_api.ratelimit.limiter import Decision, RateLimiter

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", METRICS_PATH})
# The operator console (console/) is not counted either: it needs a session, which needs an
# admin key. Its sign-in page is, per client IP, like any request without a key.
CONSOLE_PREFIX = "/dashboard/"
CONSOLE_SIGN_IN = "/dashboard/sign-in"


def exempt(path: str) -> bool:
    if path in EXEMPT_PATHS:
        return True
    return (path == CONSOLE_PREFIX[:-1] or path.startswith(CONSOLE_PREFIX)) and (
        path != CONSOLE_SIGN_IN
    )


async def decide(limiter: RateLimiter, scope: Scope, principal: Principal | None) -> Decision:
    """Count this request against its quota: the key's account (or the key), else the IP."""
    if principal is not None:
        return await limiter.check(principal.account_id or principal.key_id, principal.tier)
    client = scope.get("client")
    return await limiter.check(f"ip:{client[0] if client else '-'}", "development")


def rejection(decision: Decision, principal: Principal | None) -> bytes:
    """The 429 body for a refused request (and count the refusal)."""
    (REJECTED_KEY if principal is not None else REJECTED_IP).inc()
    return error_body(
        "rate_limited",
        f"Rate limit of {decision.limit} requests per window exceeded. Retry after "
        f"{decision.retry_after} seconds (see the Retry-After header).",
        "X-RateLimit-Limit",
    )


class RateLimitMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or exempt(scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        limiter = get_services(request).rate_limiter
        if not limiter.settings.rate_limit_enabled:
            await self.app(scope, receive, send)
            return
        principal = await optional_principal(request)
        decision = await decide(limiter, scope, principal)
        if not decision.allowed:
            body = rejection(decision, principal)
            await send_json(add_headers(send, decision.headers()), 429, body, [])
            return
        await self.app(scope, receive, add_headers(send, decision.headers()))
