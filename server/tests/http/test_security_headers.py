"""Headers for a production deployment: HSTS on every answer in production (its max-age a
setting), none in the sandbox; ``/docs`` under a Content-Security-Policy and never framed."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from commerce_api.app.factory import create_app
from commerce_api.storage.db import Database
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer


@pytest.fixture
async def production(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(database_url, environment="production", hsts_max_age_seconds=600)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as http:
            yield http


async def test_every_answer_in_production_carries_hsts(
    production: httpx.AsyncClient, db: Database
) -> None:
    account_id = await factories.new_account(db)
    key = await factories.new_key(db, account_id, environment="production")
    answers = [
        await production.get("/v1/products", headers=bearer(key.secret)),  # the fast lane
        await production.get("/v1/orders", headers=bearer(key.secret)),  # the routes
        await production.get("/v1/orders"),  # a 401
        await production.get("/nowhere"),  # a 404
        await production.get("/healthz"),
        await production.get("/docs"),
        await production.get("/dashboard/sign-in"),
    ]
    for answer in answers:
        assert answer.headers["strict-transport-security"] == "max-age=600", answer.url


async def test_the_sandbox_sends_no_hsts(client: httpx.AsyncClient, client_key: str) -> None:
    for answer in (
        await client.get("/v1/products", headers=bearer(client_key)),
        await client.get("/docs"),
    ):
        assert "strict-transport-security" not in answer.headers


async def test_docs_carry_a_content_security_policy_and_are_never_framed(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/docs")
    assert response.status_code == 200
    assert response.headers["x-frame-options"] == "DENY"
    policy = {
        name: value
        for name, _, value in (
            directive.partition(" ")
            for directive in response.headers["content-security-policy"].split("; ")
        )
    }
    assert policy["default-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["connect-src"] == "'self'"
    assert "'unsafe-inline'" not in policy["script-src"]
    # The page's inline script is allowed by its hash, and by nothing wider.
    scripts = re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL)
    assert scripts
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy["script-src"]
