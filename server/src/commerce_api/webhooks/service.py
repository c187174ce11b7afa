"""Webhook endpoints and the events API."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NewType

from commerce_api.accounts.service import Principal
from commerce_api.audit import service as audit
from commerce_api.core.errors import APIError, forbidden, invalid_request, not_found
from commerce_api.core.ids import looks_like, new_id
from commerce_api.core.pagination import page
from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.settings import Settings
from commerce_api.storage.crypto import SecretBox, load_secret_box
from commerce_api.storage.executor import Executor
from commerce_api.webhooks.repository import endpoints, outbox
from commerce_api.webhooks.schemas import WebhookEndpointCreate, WebhookEndpointUpdate
from commerce_api.webhooks.signing import new_secret
from commerce_api.webhooks.url_policy import UnsafeURL, redact_query, resolve

if TYPE_CHECKING:
    from commerce_api.storage.db import Database

# After a rotation the old secret keeps signing (beside the new one) this long.
ROTATION_OVERLAP = timedelta(hours=24)


async def open_secret_box(settings: Settings, db: Database) -> SecretBox:
    """The secret box of this process's secret key, with every stored endpoint secret re-encrypted
    under it first (after a key rotation, or from before HKDF): see ``crypto``'s docstring."""
    secret_box = await load_secret_box(settings, db)
    async with db.read() as conn:
        rows = await endpoints.stored_secrets(conn)
    stale = [
        (row.id, column, token)
        for row in rows
        for column, token in (
            ("secret_encrypted", row.secret_encrypted),
            ("previous_secret_encrypted", row.previous_secret_encrypted),
        )
        if token is not None and not secret_box.is_current(token)
    ]
    if stale:
        async with db.write() as conn:
            for endpoint_id, column, token in stale:
                await endpoints.replace_secret(
                    conn, endpoint_id, column, token, secret_box.reencrypt(token)
                )
    return secret_box


def render_endpoint(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "url": row.url,
        "events": list(row.event_types),
        "description": row.description,
        "enabled": row.enabled,
        "disabled_reason": row.disabled_reason,
        "created_at": format_timestamp(row.created_at),
        "updated_at": format_timestamp(row.updated_at),
    }


def _audited(row: Any) -> dict[str, Any]:
    """An endpoint's fields as the audit trail shows them (never its secrets)."""
    return {
        "url": row.url,
        "events": list(row.event_types),
        "description": row.description,
        "enabled": row.enabled,
        "disabled_reason": row.disabled_reason,
    }


def _redacted(changes: audit.Changes) -> audit.Changes:
    """``changes`` with the query string of its receiver URLs redacted: a receiver's token
    there (``?token=…``) is a secret, and the trail outlives the endpoint."""
    if "url" not in changes:
        return changes
    urls = [None if url is None else redact_query(url) for url in changes["url"]]
    return {**changes, "url": urls}


async def _record(
    conn: Executor,
    principal: Principal,
    action: audit.Action,
    endpoint_id: str,
    changes: audit.Changes | None = None,
) -> None:
    target = ("endpoint", endpoint_id)
    await audit.record(conn, audit.actor_of(principal), action, target, changes)


def _account(principal: Principal) -> str:
    if principal.account_id is None:
        raise forbidden("Webhook endpoints belong to an account: use a client key.")
    return principal.account_id


# A receiver URL that passed the URL policy, host name resolved included. Checking resolves
# names (network I/O), so callers check *before* they open a transaction and hand the result in:
# a slow resolver must never hold the database's write lock (or a pooled connection).
CheckedURL = NewType("CheckedURL", str)


async def check_receiver_url(url: str, settings: Settings) -> CheckedURL:
    try:
        await resolve(url, allow_private=settings.allow_private_webhook_urls)
    except UnsafeURL as exc:
        raise invalid_request(f"The receiver URL {exc}.", "url", reason="url_not_allowed") from None
    return CheckedURL(url)


def _endpoint_not_found(endpoint_id: str) -> APIError:
    return not_found(f"No webhook endpoint with id `{endpoint_id}`.", "id")


async def _get(conn: Executor, account_id: str, endpoint_id: str) -> Any:
    row = (
        await endpoints.get_endpoint(conn, account_id, endpoint_id)
        if looks_like("we", endpoint_id)
        else None
    )
    if row is None:
        raise _endpoint_not_found(endpoint_id)
    return row


async def create_endpoint(
    conn: Executor,
    principal: Principal,
    data: WebhookEndpointCreate,
    url: CheckedURL,
    settings: Settings,
    secret_box: SecretBox,
) -> dict[str, Any]:
    """Register an endpoint at ``url`` (``data.url``, checked by :func:`check_receiver_url`).

    An account has at most ``COMMERCE_WEBHOOK_MAX_ENDPOINTS`` live endpoints: every order fans
    out to each of them inside its transaction, so an unbounded number would let one tenant
    slow every tenant's orders and deliveries.
    """
    account_id = _account(principal)
    limit = settings.webhook_max_endpoints
    if await endpoints.count_endpoints(conn, account_id) >= limit:
        raise invalid_request(
            f"An account can have at most {limit} webhook endpoints; delete one you no longer "
            "use, or subscribe an existing endpoint to more event types.",
            "url",
            reason="endpoint_limit_reached",
        )
    secret = new_secret()
    now = utcnow()
    endpoint_id = new_id("we")
    await endpoints.insert_endpoint(
        conn,
        {
            "id": endpoint_id,
            "account_id": account_id,
            "url": url,
            "description": data.description,
            "event_types": sorted(set(data.events)),
            "enabled": True,
            "secret_encrypted": secret_box.encrypt(secret),
            "created_at": now,
            "updated_at": now,
        },
    )
    row = await _get(conn, account_id, endpoint_id)
    created = _redacted(audit.created(_audited(row)))
    await _record(conn, principal, "endpoint.create", endpoint_id, created)
    return {**render_endpoint(row), "secret": secret}


async def list_endpoints(
    conn: Executor, principal: Principal, *, limit: int, offset: int
) -> dict[str, Any]:
    account_id = _account(principal)
    total = await endpoints.count_endpoints(conn, account_id)
    rows = await endpoints.page_endpoints(conn, account_id, limit, offset) if offset < total else []
    return page([render_endpoint(row) for row in rows], total, limit, offset)


async def get_endpoint(conn: Executor, principal: Principal, endpoint_id: str) -> dict[str, Any]:
    return render_endpoint(await _get(conn, _account(principal), endpoint_id))


async def update_endpoint(
    conn: Executor,
    principal: Principal,
    endpoint_id: str,
    data: WebhookEndpointUpdate,
    url: CheckedURL | None,
) -> dict[str, Any]:
    """Apply ``data``; ``url`` is ``data.url`` checked by :func:`check_receiver_url`, when set.
    Audited as ``endpoint.reenable`` when it enables a disabled endpoint, else as
    ``endpoint.update`` (nothing recorded when no value changes)."""
    account_id = _account(principal)
    before = _audited(await _get(conn, account_id, endpoint_id))
    changes = data.model_dump(exclude_unset=True)
    values: dict[str, Any] = {"updated_at": utcnow()}
    if "url" in changes:
        if url != changes["url"]:
            raise TypeError("update_endpoint: pass data.url checked by check_receiver_url")
        values["url"] = url
    if "events" in changes:
        values["event_types"] = sorted(set(changes["events"]))
    if "description" in changes:
        values["description"] = changes["description"]
    if "enabled" in changes:
        values["enabled"] = changes["enabled"]
        if changes["enabled"]:
            values.update(disabled_reason=None, failing_since=None)
    await endpoints.update_endpoint(conn, account_id, endpoint_id, values)
    row = await _get(conn, account_id, endpoint_id)
    if changed := audit.changed(before, _audited(row)):
        reenabled = changed.get("enabled") == [False, True]
        action: audit.Action = "endpoint.reenable" if reenabled else "endpoint.update"
        await _record(conn, principal, action, endpoint_id, _redacted(changed))
    return render_endpoint(row)


async def delete_endpoint(conn: Executor, principal: Principal, endpoint_id: str) -> None:
    account_id = _account(principal)
    await _get(conn, account_id, endpoint_id)
    now = utcnow()
    await endpoints.update_endpoint(
        conn, account_id, endpoint_id, {"deleted_at": now, "enabled": False, "updated_at": now}
    )
    changes = {"deleted_at": [None, format_timestamp(now)]}
    await _record(conn, principal, "endpoint.delete", endpoint_id, changes)


async def rotate_secret(
    conn: Executor, principal: Principal, endpoint_id: str, secret_box: SecretBox
) -> dict[str, Any]:
    """A new signing secret; the old one keeps signing beside it for 24 hours."""
    account_id = _account(principal)
    row = await _get(conn, account_id, endpoint_id)
    secret = new_secret()
    now = utcnow()
    await endpoints.update_endpoint(
        conn,
        account_id,
        endpoint_id,
        {
            "secret_encrypted": secret_box.encrypt(secret),
            "previous_secret_encrypted": row.secret_encrypted,
            "previous_secret_expires_at": now + ROTATION_OVERLAP,
            "updated_at": now,
        },
    )
    await _record(conn, principal, "endpoint.rotate_secret", endpoint_id)  # never the secret
    return {**render_endpoint(await _get(conn, account_id, endpoint_id)), "secret": secret}


async def recover_deliveries(
    conn: Executor, principal: Principal, endpoint_id: str, since: datetime
) -> dict[str, int]:
    """Send again every delivery to the endpoint that failed (given up, or waiting for a
    retry) for an event created at or after ``since``: due now, with a fresh schedule, after an
    outage of the receiver. A disabled endpoint is refused (409): it would send nothing, and
    re-enabling it is the caller's decision, by ``PATCH {"enabled": true}``."""
    account_id = _account(principal)
    row = await _get(conn, account_id, endpoint_id)
    if not row.enabled:
        why = f" {row.disabled_reason}" if row.disabled_reason else ""
        raise APIError(
            409,
            "invalid_request",
            f"The endpoint is disabled.{why} Re-enable it with PATCH "
            '{"enabled": true}, then recover its deliveries.',
            "enabled",
            reason="endpoint_disabled",
        )
    recovered = await outbox.requeue_failed(conn, endpoint_id, since, utcnow())
    await _record(conn, principal, "endpoint.recover", endpoint_id)
    return {"recovered": recovered}
