"""Signing in to the console over HTTP, and reading its forms' tokens."""

from __future__ import annotations

import re

import httpx

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def form_token(html: str) -> str:
    match = _CSRF.search(html)
    assert match is not None, html[:2000]
    return match.group(1)


async def sign_in(client: httpx.AsyncClient, key: str) -> httpx.Response:
    """Sign in with ``key``; the answer to the form's POST (a 303 to /dashboard on success)."""
    page = await client.get("/dashboard/sign-in")
    return await client.post(
        "/dashboard/sign-in", data={"key": key, "csrf_token": form_token(page.text)}
    )


async def page_token(client: httpx.AsyncClient, path: str = "/dashboard") -> str:
    """The CSRF token of the signed-in session (from any page's forms)."""
    response = await client.get(path)
    assert response.status_code == 200, response.text[:2000]
    return form_token(response.text)
