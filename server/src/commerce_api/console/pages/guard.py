"""Every console page but the public ones needs a session, and every POST a CSRF token.

:class:`ConsoleRoute` checks both before the page runs (redirecting to the sign-in page
without a session) and adds the page headers to every answer.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from starlette.responses import Response

from commerce_api.console import sessions
from commerce_api.console.pages.render import SIGN_IN_URL, redirect, render
from commerce_api.console.sessions import ConsoleSession
from commerce_api.http.dependencies import get_services

# Pages run only our own script and stylesheet, are never framed, and are not cached.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

_PUBLIC = "__console_public__"


def public(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a page reachable without a session (a decorator)."""
    setattr(endpoint, _PUBLIC, True)
    return endpoint


def set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        path=sessions.COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=get_services(request).settings.environment == "production",
    )


def clear_cookie(response: Response, request: Request, name: str) -> None:
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
        to_sign_in = redirect(SIGN_IN_URL, "session-ended" if token else None)
        if token:
            clear_cookie(to_sign_in, request, sessions.SESSION_COOKIE)
        return to_sign_in
    request.scope.setdefault("state", {})["console_session"] = session
    if request.method == "POST":
        given = (await request.form()).get(sessions.CSRF_FIELD)
        if not isinstance(given, str) or not sessions.tokens_match(session.csrf_token, given):
            return render(
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


async def current_session(request: Request) -> ConsoleSession:
    # async: FastAPI would run a plain function dependency on a worker thread.
    session = request.scope.get("state", {}).get("console_session")
    assert isinstance(session, ConsoleSession), "ConsoleRoute sets the session first"
    return session


SessionDep = Annotated[ConsoleSession, Depends(current_session)]
