"""Console sessions and CSRF at the HTTP level, on both backends."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, update

from commerce_api.app.factory import create_app
from commerce_api.console.pages.render import NOTICE_COOKIE
from commerce_api.console.sessions import SESSION_COOKIE
from commerce_api.core.timestamps import utcnow
from commerce_api.storage.db import Database
from commerce_api.storage.tables import accounts, console_sessions
from tests.conftest import KeyFactory, make_settings
from tests.console.helpers import form_token, page_token, sign_in

PAGES = [
    "/dashboard",
    "/dashboard/products",
    "/dashboard/products/new",
    "/dashboard/orders",
    "/dashboard/webhooks",
    "/dashboard/accounts",
]


async def _account_count(db: Database) -> int:
    async with db.read() as conn:
        return int(await conn.scalar(select(func.count()).select_from(accounts)) or 0)


@pytest.mark.parametrize("path", PAGES)
async def test_pages_redirect_to_sign_in_without_a_session(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"


async def test_actions_without_a_session_change_nothing(
    client: httpx.AsyncClient, db: Database
) -> None:
    response = await client.post("/dashboard/accounts", data={"name": "Sneaky"})
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"
    assert await _account_count(db) == 0


async def test_sign_in_page_has_a_password_field_and_a_submit_button(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/dashboard/sign-in")
    assert page.status_code == 200
    assert '<label for="key">Admin API key</label>' in page.text
    assert 'type="password" id="key"' in page.text
    assert '<button type="submit">Sign in</button>' in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]


async def test_admin_key_signs_in_with_a_strict_http_only_cookie_stored_hashed(
    client: httpx.AsyncClient, admin_key: str, db: Database
) -> None:
    response = await sign_in(client, admin_key)
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard"
    cookie = next(
        value
        for value in response.headers.get_list("set-cookie")
        if value.startswith(SESSION_COOKIE)
    )
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/dashboard"} <= attributes
    assert "secure" not in attributes  # a sandbox on http://localhost must work
    token = cookie.split(";")[0].split("=", 1)[1]
    async with db.read() as conn:
        stored: list[str] = list(await conn.scalars(select(console_sessions.c.token_hash)))
    assert stored == [hashlib.sha256(token.encode()).hexdigest()]
    assert token not in stored
    overview = await client.get("/dashboard")
    assert overview.status_code == 200
    assert "Waiting for fulfilment" in overview.text


async def test_client_key_is_refused_with_a_clear_message(
    client: httpx.AsyncClient, client_key: str, db: Database
) -> None:
    response = await sign_in(client, client_key)
    assert response.status_code == 403
    assert "This is a client key" in response.text
    assert "admin" in response.text
    assert SESSION_COOKIE not in response.headers.get("set-cookie", "")
    async with db.read() as conn:
        assert await conn.scalar(select(func.count()).select_from(console_sessions)) == 0


async def test_unknown_key_is_refused(client: httpx.AsyncClient) -> None:
    response = await sign_in(client, "sk_sandbox_" + "x" * 32)
    assert response.status_code == 401
    assert "Invalid API key" in response.text


async def test_sign_in_without_the_form_token_is_refused(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    await client.get("/dashboard/sign-in")
    response = await client.post(
        "/dashboard/sign-in", data={"key": admin_key, "csrf_token": "forged"}
    )
    assert response.status_code == 403
    assert SESSION_COOKIE not in response.headers.get("set-cookie", "")
    assert (await client.get("/dashboard")).status_code == 303


@pytest.mark.parametrize("token", [None, "", "0" * 64])
async def test_forms_without_the_session_csrf_token_change_nothing(
    client: httpx.AsyncClient, admin_key: str, db: Database, token: str | None
) -> None:
    await sign_in(client, admin_key)
    data = {"name": "Forged"} | ({} if token is None else {"csrf_token": token})
    response = await client.post("/dashboard/accounts", data=data)
    assert response.status_code == 403
    assert "security token" in response.text
    assert await _account_count(db) == 0


async def test_another_sessions_csrf_token_is_refused(
    app: FastAPI, make_key: KeyFactory, db: Database
) -> None:
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as alice,
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as bob,
    ):
        await sign_in(alice, await make_key("admin"))
        await sign_in(bob, await make_key("admin"))
        bobs_token = await page_token(bob)
        assert bobs_token != await page_token(alice)
        response = await alice.post(
            "/dashboard/accounts", data={"name": "Forged", "csrf_token": bobs_token}
        )
        assert response.status_code == 403
    assert await _account_count(db) == 0


async def test_a_form_with_the_token_works(
    client: httpx.AsyncClient, admin_key: str, db: Database
) -> None:
    await sign_in(client, admin_key)
    token = await page_token(client, "/dashboard/accounts")
    response = await client.post(
        "/dashboard/accounts", data={"name": "Acme", "tier": "production", "csrf_token": token}
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/accounts"
    # The notice comes once, in a cookie: not in the URL, where a reload would show it again.
    assert client.cookies[NOTICE_COOKIE] == "account-created"
    shown = await client.get("/dashboard/accounts")
    assert "Account created." in shown.text
    assert NOTICE_COOKIE not in client.cookies
    assert "Account created." not in (await client.get("/dashboard/accounts")).text
    assert await _account_count(db) == 1


async def test_sign_out_ends_the_session(client: httpx.AsyncClient, admin_key: str) -> None:
    await sign_in(client, admin_key)
    cookie = client.cookies[SESSION_COOKIE]
    token = await page_token(client)
    response = await client.post("/dashboard/sign-out", data={"csrf_token": token})
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"
    assert "You are signed out." in (await client.get("/dashboard/sign-in")).text
    # The old cookie, replayed, is no session any more.
    client.cookies.set(SESSION_COOKIE, cookie, path="/dashboard")
    assert (await client.get("/dashboard")).status_code == 303


async def test_revoking_the_key_ends_its_sessions(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    await sign_in(client, admin_key)
    keys = await client.get("/dashboard/accounts")
    key_id = keys.text.split("/dashboard/keys/")[1].split("/revoke")[0]
    response = await client.post(
        f"/dashboard/keys/{key_id}/revoke", data={"csrf_token": form_token(keys.text)}
    )
    assert response.status_code == 303
    after = await client.get("/dashboard/accounts")
    assert after.status_code == 303
    assert after.headers["location"] == "/dashboard/sign-in"
    assert "Your session has ended" in (await client.get("/dashboard/sign-in")).text
    again = await sign_in(client, admin_key)
    assert again.status_code == 401


async def test_idle_sessions_end(client: httpx.AsyncClient, admin_key: str, db: Database) -> None:
    await sign_in(client, admin_key)
    assert (await client.get("/dashboard")).status_code == 200
    async with db.write() as conn:
        await conn.execute(
            update(console_sessions).values(last_seen_at=utcnow() - timedelta(seconds=1801))
        )
    response = await client.get("/dashboard")
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"
    assert client.cookies[NOTICE_COOKIE] == "session-ended"
    async with db.read() as conn:
        assert await conn.scalar(select(func.count()).select_from(console_sessions)) == 0


async def test_sessions_hold_across_processes(database_url: str, admin_key: str) -> None:
    """A session started by one app instance is honoured (and ended) by another."""
    first, second = create_app(make_settings(database_url)), create_app(make_settings(database_url))
    async with first.router.lifespan_context(first), second.router.lifespan_context(second):
        one = httpx.AsyncClient(transport=httpx.ASGITransport(app=first), base_url="http://t")
        two = httpx.AsyncClient(transport=httpx.ASGITransport(app=second), base_url="http://t")
        async with one, two:
            await sign_in(one, admin_key)
            two.cookies.set(SESSION_COOKIE, one.cookies[SESSION_COOKIE], path="/dashboard")
            assert (await two.get("/dashboard")).status_code == 200
            token = await page_token(two)
            await two.post("/dashboard/sign-out", data={"csrf_token": token})
            assert (await one.get("/dashboard")).status_code == 303


@pytest.fixture
async def production_client(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    application = create_app(make_settings(database_url, environment="production"))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as http:
            yield http


async def test_cookies_are_secure_in_production(production_client: httpx.AsyncClient) -> None:
    page = await production_client.get("/dashboard/sign-in")
    cookie = page.headers["set-cookie"].lower()
    assert "secure" in cookie
    assert "httponly" in cookie
    assert "samesite=strict" in cookie


async def test_console_is_not_rate_limited_nor_in_the_openapi_document(
    client: httpx.AsyncClient, admin_key: str
) -> None:
    await sign_in(client, admin_key)
    page = await client.get("/dashboard")
    assert "x-ratelimit-limit" not in page.headers
    assert "x-ratelimit-limit" in (await client.get("/dashboard/sign-in")).headers
    document = (await client.get("/v1/openapi.json")).json()
    assert not [path for path in document["paths"] if path.startswith("/dashboard")]


async def test_activity_keeps_a_session_alive(database_url: str, admin_key: str) -> None:
    """Each request counts as activity, even with an idle time shorter than a minute."""
    application = create_app(make_settings(database_url, console_idle_seconds=20))
    db = Database(database_url)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            await sign_in(http, admin_key)
            async with db.write() as conn:
                await conn.execute(
                    update(console_sessions).values(last_seen_at=utcnow() - timedelta(seconds=15))
                )
            assert (await http.get("/dashboard")).status_code == 200
            async with db.read() as conn:
                seen = await conn.scalar(select(console_sessions.c.last_seen_at))
            assert seen is not None
            assert utcnow() - seen < timedelta(seconds=5)
    await db.dispose()
