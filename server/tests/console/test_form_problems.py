"""A form the service refuses shows every problem: each message without markup (a parameter
as code, never between literal backticks) and each field at fault marked, its message next to
it. On both backends."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.console.helpers import form_token, page_token, sign_in


@pytest.fixture
async def console(client: httpx.AsyncClient, admin_key: str) -> httpx.AsyncClient:
    assert (await sign_in(client, admin_key)).status_code == 303
    return client


def _marked(html: str) -> dict[str, str]:
    """Each control marked invalid → the text of the message it is described by."""
    marked = {}
    for control in re.finditer(r"<(?:input|textarea|fieldset)\b[^>]*>", html):
        tag = control.group(0)
        if 'aria-invalid="true"' not in tag:
            continue
        assert 'class="invalid"' in tag, tag
        field = re.search(r'name="([^"]+)"', tag) or re.search(r'aria-describedby="([^"]+)"', tag)
        described = re.search(r'aria-describedby="([^"]+)"', tag)
        assert field is not None, tag
        assert described is not None, tag
        message = re.search(
            rf'<span class="field-problem" id="{described.group(1)}">(.*?)</span>', html
        )
        assert message is not None, f"no message for {tag}"
        marked[field.group(1)] = message.group(1)
    return marked


def _text_of(html: str) -> str:
    """What the page shows as text (tags and the stylesheet/script aside)."""
    main = html[html.index("<main") :]
    return re.sub(r"<[^>]+>", "", main)


async def test_three_bad_product_fields_are_marked_each_with_its_message(
    console: httpx.AsyncClient,
) -> None:
    token = await page_token(console, "/dashboard/products/new")
    response = await console.post(
        "/dashboard/products",
        data={
            "name": "",
            "price": "1.234",
            "category": "",
            "inventory_count": "3",
            "csrf_token": token,
        },
    )
    assert response.status_code == 400
    marked = _marked(response.text)
    assert set(marked) == {"name", "price", "category"}
    assert "<code>price</code>" in marked["price"]
    assert "two decimal places" in marked["price"]
    assert "must not be empty" in marked["name"]
    assert 'id="inventory_count"' in response.text
    assert "`" not in _text_of(response.text), "no literal backticks in what is shown"
    summary = response.text[response.text.index("Nothing was saved") :].split("</ul>")[0]
    assert summary.count("<li>") == 3


async def test_a_refused_stock_marks_the_stock_field_only(
    console: httpx.AsyncClient,
) -> None:
    token = await page_token(console, "/dashboard/products/new")
    created = await console.post(
        "/dashboard/products",
        data={
            "name": "Lamp",
            "price": "5",
            "category": "home",
            "inventory_count": "1",
            "csrf_token": token,
        },
    )
    assert created.status_code == 303
    path = created.headers["location"].split("?")[0]
    page = await console.get(path)
    refused = await console.post(
        f"{path}/stock", data={"inventory_count": "-4", "csrf_token": form_token(page.text)}
    )
    assert refused.status_code == 400
    assert set(_marked(refused.text)) == {"inventory_count"}
    assert 'id="stock" name="inventory_count" class="invalid"' in refused.text


async def test_a_refused_webhook_endpoint_marks_its_fields(
    console: httpx.AsyncClient, client_key: str
) -> None:
    page = await console.get("/dashboard/webhooks")
    account_id = re.search(r'<option value="(acct_[^"]+)"', page.text)
    assert account_id is not None
    page = await console.get(f"/dashboard/webhooks?account_id={account_id.group(1)}")
    response = await console.post(
        f"/dashboard/webhooks/{account_id.group(1)}/endpoints",
        data={"url": "ftp://x", "events": "order.nope", "csrf_token": form_token(page.text)},
    )
    assert response.status_code == 400
    marked = _marked(response.text)
    assert set(marked) == {"url", "endpoint-events-problem"}
    assert "<code>url</code>" in marked["url"]
    assert "`" not in _text_of(response.text)
