"""The accounts' page: accounts and API keys, created and revoked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import Request
from starlette.responses import Response

from commerce_api.accounts import service as accounts
from commerce_api.audit import keys as audited_keys
from commerce_api.console.pages.guard import SessionDep
from commerce_api.console.pages.render import PREFIX, form_text, redirect, render
from commerce_api.console.repository import listings
from commerce_api.http.dependencies import ServicesDep
from commerce_api.settings import Tier


async def _accounts_page(
    request: Request,
    services: ServicesDep,
    extra: Mapping[str, Any] | None = None,
    status: int = 200,
) -> Response:
    async with services.db.read() as conn:
        account_rows = await listings.list_accounts(conn)
        keys = await accounts.list_keys(conn)
    context = {"nav": "accounts", "accounts": account_rows, "keys": keys, **(extra or {})}
    return render(request, "accounts.html", context, status)


async def accounts_page(request: Request, services: ServicesDep, _session: SessionDep) -> Response:
    return await _accounts_page(request, services)


MAX_ACCOUNT_NAME = 200


async def create_account(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    form = await request.form()
    name = form_text(form, "name")
    tier: Tier = "production" if form_text(form, "tier") == "production" else "development"
    if not name or len(name) > MAX_ACCOUNT_NAME:
        error = f"An account needs a name of 1 to {MAX_ACCOUNT_NAME} characters."
        return await _accounts_page(request, services, {"error": error}, 400)
    async with services.db.write() as conn:
        await audited_keys.create_account(conn, session.principal, name, tier)
    return redirect(f"{PREFIX}/accounts", "account-created")


async def create_key(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    """A client key for an account, or an admin key (``account_id`` empty); with ``kind``
    ``publishable``, the account's publishable key. Shown once."""
    form = await request.form()
    account_id = form_text(form, "account_id") or None
    kind = form_text(form, "kind") or "secret"
    if kind not in ("secret", "publishable"):
        error = "A key's kind is `secret` or `publishable`."
        return await _accounts_page(request, services, {"error": error}, 400)
    if kind == "publishable" and account_id is None:
        error = "A publishable key belongs to an account: choose one (admin keys are secret)."
        return await _accounts_page(request, services, {"error": error}, 400)
    role: accounts.Role = (
        "publishable" if kind == "publishable" else "client" if account_id else "admin"
    )
    try:
        async with services.db.write() as conn:
            key = await audited_keys.create_key(
                conn,
                session.principal,
                services.settings.environment,
                account_id=account_id,
                role=role,
            )
    except accounts.AccountNotFound:
        error = f"No account with id `{account_id}`."
        return await _accounts_page(request, services, {"error": error}, 404)
    return await _accounts_page(request, services, {"created_key": key}, 201)


async def revoke_key(
    key_id: str, request: Request, services: ServicesDep, session: SessionDep
) -> Response:
    async with services.db.write() as conn:
        revoked = await audited_keys.revoke_key(conn, session.principal, key_id)
    if not revoked:
        error = f"No key with id `{key_id}`."
        return await _accounts_page(request, services, {"error": error}, 404)
    return redirect(f"{PREFIX}/accounts", "key-revoked")
