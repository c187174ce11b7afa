"""The console's pages reachable without a session: its stylesheet and script, signing in,
and (with a session) signing out."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from starlette.responses import Response

from commerce_api.console import sessions
from commerce_api.console.pages.guard import SessionDep, clear_cookie, public, set_cookie
from commerce_api.console.pages.render import (
    CONSOLE_DIR,
    PREFIX,
    SIGN_IN_URL,
    form_text,
    redirect,
    render,
)
from commerce_api.core.errors import APIError
from commerce_api.http.context import context as request_context
from commerce_api.http.dependencies import ServicesDep

STATIC_FILES = (
    ("console.css", "text/css"),
    ("console.js", "text/javascript"),
    ("icon.svg", "image/svg+xml"),
)


def static_file(name: str, media_type: str) -> Callable[[], Coroutine[Any, Any, Response]]:
    """The page serving ``static/<name>`` (read once, here)."""
    content = (CONSOLE_DIR / "static" / name).read_bytes()

    async def asset() -> Response:
        return Response(content, media_type=media_type, headers={"Cache-Control": "no-cache"})

    return public(asset)


_ICON = (CONSOLE_DIR / "static" / "icon.svg").read_bytes()


async def favicon(request: Request) -> Response:
    """``/favicon.ico``: the console's icon (an SVG, which browsers take whatever its name)."""
    del request
    return Response(_ICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


def _sign_in_page(request: Request, error: str | None = None, status: int = 200) -> Response:
    token = sessions.new_sign_in_token()
    response = render(request, "sign_in.html", {"sign_in_token": token, "error": error}, status)
    set_cookie(response, request, sessions.SIGN_IN_COOKIE, token)
    return response


@public
async def sign_in_form(request: Request, services: ServicesDep) -> Response:
    token = request.cookies.get(sessions.SESSION_COOKIE)
    if token and await sessions.resume_session(
        services.db, token, services.settings.console_idle_seconds
    ):
        return redirect(PREFIX)
    return _sign_in_page(request)


@public
async def sign_in(request: Request, services: ServicesDep) -> Response:
    form = await request.form()
    expected = request.cookies.get(sessions.SIGN_IN_COOKIE, "")
    given = form_text(form, sessions.CSRF_FIELD)
    if not expected or not sessions.tokens_match(expected, given):
        return _sign_in_page(
            request, "The sign-in form had expired; nothing was sent. Please try again.", 403
        )
    key = form_text(form, "key")
    if not key:
        return _sign_in_page(request, "Enter an admin key.", 400)
    try:
        principal = await services.read_path.authenticate(key, request_context(request.scope))
    except APIError as exc:
        return _sign_in_page(request, exc.message, 401)
    if not principal.is_admin:
        return _sign_in_page(
            request,
            f"This is a {principal.role} key. The console needs an admin (operator) key: create "
            "one with `commerce-api keys create --admin`.",
            403,
        )
    token = await sessions.start_session(
        services.db, principal.key_id, services.settings.console_idle_seconds
    )
    response = redirect(PREFIX)
    set_cookie(response, request, sessions.SESSION_COOKIE, token)
    clear_cookie(response, request, sessions.SIGN_IN_COOKIE)
    return response


async def sign_out(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    token = request.cookies.get(sessions.SESSION_COOKIE, "")
    await sessions.sign_out(services.db, token, session.principal.key_id)
    response = redirect(SIGN_IN_URL, "signed-out")
    clear_cookie(response, request, sessions.SESSION_COOKIE)
    return response
