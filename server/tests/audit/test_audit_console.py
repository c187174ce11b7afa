"""The console and the audit trail, on both backends: its actions are recorded with the
session's key, the Audit page lists and filters the rows, and an order's page shows its
timeline (created, each change with its actor, each event)."""

from __future__ import annotations

import re

import httpx
import pytest

from commerce_api.accounts.service import CreatedKey
from commerce_api.audit import service as audit
from commerce_api.storage.db import Database
from tests import factories
from tests.audit.helpers import by, key_actor, trail
from tests.console.helpers import form_token, page_token, sign_in


@pytest.fixture
async def console(client: httpx.AsyncClient, admin: CreatedKey) -> httpx.AsyncClient:
    assert (await sign_in(client, admin.secret)).status_code == 303
    return client


async def test_console_actions_are_recorded_with_the_sessions_key(
    console: httpx.AsyncClient, db: Database, admin: CreatedKey, customer: CreatedKey
) -> None:
    product = await factories.create_product(console, admin.secret, inventory_count=4)
    token = await page_token(console, f"/dashboard/products/{product['id']}")
    form = {
        "csrf_token": token,
        "name": product["name"],
        "description": "",
        "price": "12.50",
        "category": product["category"],
        "inventory_count": "9",
    }
    saved = await console.post(f"/dashboard/products/{product['id']}", data=form)
    assert saved.status_code == 303, saved.text[:2000]
    order = await factories.place_ok(console, customer.secret, (product["id"], 1))
    done = await console.post(f"/dashboard/orders/{order['id']}/fulfil", data={"csrf_token": token})
    assert done.status_code == 303
    revoked = await console.post(
        f"/dashboard/keys/{customer.id}/revoke", data={"csrf_token": token}
    )
    assert revoked.status_code == 303

    (update,) = await trail(db, action="product.update")
    assert by(update) == key_actor(admin.id)
    assert update["changes"] == {"inventory_count": [4, 9]}
    (fulfil,) = await trail(db, action="order.fulfill")
    assert by(fulfil) == key_actor(admin.id)
    (revoke,) = await trail(db, action="key.revoke")
    assert (by(revoke), revoke["target"]["id"]) == (key_actor(admin.id), customer.id)


async def test_the_audit_page_lists_and_filters(
    console: httpx.AsyncClient, admin: CreatedKey, customer: CreatedKey
) -> None:
    product = await factories.create_product(console, admin.secret)
    order = await factories.place_ok(console, customer.secret, (product["id"], 1))
    page = await console.get("/dashboard/audit")
    assert page.status_code == 200
    assert 'aria-current="page"' in page.text
    assert "/dashboard/audit" in page.text
    assert '<code class="action">product.create</code>' in page.text
    assert '<code class="action">order.create</code>' in page.text
    assert admin.id in page.text
    assert customer.id in page.text
    only = await console.get("/dashboard/audit", params={"action": "order.create"})
    assert order["id"] in only.text
    product_target = f'product <code class="id" title="{product["id"]}">{product["id"]}</code>'
    assert product_target in page.text
    assert product_target not in only.text
    by_target = await console.get("/dashboard/audit", params={"target_id": product["id"]})
    assert '<code class="action">product.create</code>' in by_target.text
    assert '<code class="action">order.create</code>' not in by_target.text
    by_day = await console.get(
        "/dashboard/audit", params={"from": "2000-01-01", "to": "2000-01-02"}
    )
    assert "No audit events match." in by_day.text
    odd = await console.get("/dashboard/audit", params={"action": "<b>", "from": "not a day"})
    assert odd.status_code == 200
    assert "<b>" not in odd.text


async def test_an_orders_page_shows_its_timeline(
    console: httpx.AsyncClient, admin: CreatedKey, customer: CreatedKey
) -> None:
    product = await factories.create_product(console, admin.secret)
    order = await factories.place_ok(console, customer.secret, (product["id"], 1))
    page = await console.get(f"/dashboard/orders/{order['id']}")
    done = await console.post(
        f"/dashboard/orders/{order['id']}/fulfil", data={"csrf_token": form_token(page.text)}
    )
    assert done.status_code == 303
    page = await console.get(f"/dashboard/orders/{order['id']}")
    timeline = page.text.split('<ol class="timeline">', 1)[1].split("</ol>", 1)[0]
    entries = timeline.split("<li><time")[1:]
    assert len(entries) == 4, timeline
    assert "order.create" in entries[0]
    assert customer.id in entries[0]
    assert "order.created" in entries[1]
    assert "order.fulfill" in entries[2]
    assert admin.id in entries[2]
    assert '"pending" → "fulfilled"' in entries[2]
    assert "order.fulfilled" in entries[3]


async def test_sign_in_account_creation_and_sign_out_are_recorded(
    client: httpx.AsyncClient, db: Database, admin: CreatedKey
) -> None:
    assert (await sign_in(client, admin.secret)).status_code == 303
    token = await page_token(client, "/dashboard/accounts")
    made = await client.post(
        "/dashboard/accounts", data={"csrf_token": token, "name": "Shop", "tier": "production"}
    )
    assert made.status_code == 303, made.text[:2000]
    signed_out = await client.post("/dashboard/sign-out", data={"csrf_token": token})
    assert signed_out.status_code == 303, signed_out.text[:2000]

    rows = await trail(db, actor_id=admin.id)
    assert [row["action"] for row in rows] == ["key.sign_in", "account.create", "key.sign_out"]
    sign_in_row, account, sign_out_row = rows
    assert sign_in_row["target"] == sign_out_row["target"] == {"type": "key", "id": admin.id}
    assert account["target"]["type"] == "account"
    assert account["changes"] == {"name": [None, "Shop"], "tier": [None, "production"]}


async def test_the_audit_filter_offers_every_action(
    console: httpx.AsyncClient, db: Database, admin: CreatedKey
) -> None:
    page = await console.get("/dashboard/audit")
    offered = re.findall(r'<option value="([a-z_]+\.[a-z_]+)"', page.text)
    assert offered == list(audit.ACTIONS)
    assert "endpoint.test" in offered
    chosen = await console.get("/dashboard/audit", params={"action": "key.sign_in"})
    assert '<option value="key.sign_in" selected>' in chosen.text
    assert '<code class="action">key.sign_in</code>' in chosen.text


def test_a_row_with_an_action_outside_the_table_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown audit action"):
        audit.audit_row(audit.CLI, "product.delete", ("product", "prod_1"))  # type: ignore[arg-type]
