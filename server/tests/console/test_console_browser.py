"""The console in a real headless Chromium, offline, against a real server and receiver.

Drives Debian's ``chromium`` over the Chrome DevTools Protocol with the helpers of
``tests/http/test_docs_browser.py`` (same flags, same rule: skip without Chromium locally, fail
in CI; no browser is downloaded). Like an operator would: sign in with an admin key, create a
product, fulfil an order placed through the API (accepting the confirmation), see the
``order.fulfilled`` delivery's attempt, redeliver it, revoke a key and see its next API call
refused. Only loopback requests are allowed, so the console must work offline.

A screenshot of each page is written to the test's temporary directory, or to the directory
named by ``COMMERCE_CONSOLE_SCREENSHOTS`` (``docs/console/`` holds the committed ones).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.factories import ADDRESS, cli_admin_key
from tests.helpers import bearer
from tests.http.test_docs_browser import (
    STEP_SECONDS,
    CDPError,
    Page,
    _is_loopback,
    chromium_or_skip,
    chromium_page,
)
from tests.server_process import RunningServer, running_server
from tests.webhook_receiver import running_receiver

pytestmark = pytest.mark.slow

PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}


def _accept_dialogs(page: Page) -> list[str]:
    """Accept every ``confirm()`` the page opens, as an operator clicking OK; their texts."""
    dialogs: list[str] = []
    handle_other: Callable[[str, dict[str, Any]], None] = page._on_event

    def on_event(method: str, params: dict[str, Any]) -> None:
        if method == "Page.javascriptDialogOpening":
            dialogs.append(params["message"])
            page._send("Page.handleJavaScriptDialog", {"accept": True})
        else:
            handle_other(method, params)

    page._on_event = on_event  # type: ignore[method-assign]
    return dialogs


def _until(page: Page, expression: str, what: str) -> Any:
    """Like ``page.wait_for``, but a navigation in between (no page to ask) is no failure."""
    deadline = time.monotonic() + STEP_SECONDS
    while time.monotonic() < deadline:
        try:
            value = page.evaluate(expression)
        except CDPError:
            value = None
        if value:
            return value
        page.pump(0.1)
    text = page.evaluate("document.body ? document.body.innerText.slice(0, 3000) : ''")
    raise AssertionError(f"timed out waiting for {what}; the page says:\n{text}")


def _open(page: Page, url: str) -> None:
    page.call("Page.navigate", {"url": url})
    _until(
        page,
        f"document.readyState === 'complete' && location.href.startsWith({url!r})",
        f"{url} to load",
    )


def _submit(page: Page, form_selector: str) -> None:
    """Click the form's submit button (a navigation follows)."""
    page.evaluate(f"document.querySelector({form_selector!r}).dataset.testSubmitted = '1'")
    page.click(f"document.querySelector({form_selector!r} + ' button[type=submit]')", "submit")
    _until(
        page,
        f"document.readyState === 'complete' && !document.querySelector({form_selector!r})"
        "?.dataset.testSubmitted",
        "the page after the form",
    )


def _fill(page: Page, values: dict[str, str]) -> None:
    for field, value in values.items():
        page.evaluate(f"document.getElementById({field!r}).focus()")
        page.evaluate(f"document.getElementById({field!r}).value = ''")
        page.call("Input.insertText", {"text": value})


def _text(page: Page) -> str:
    text: str = page.evaluate("document.body.innerText")
    return text


def screenshots_dir(tmp_path: Path) -> Path:
    """Where a test's screenshots go: ``COMMERCE_CONSOLE_SCREENSHOTS``, else its temporary one."""
    shots = Path(os.environ.get("COMMERCE_CONSOLE_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    return shots


@contextmanager
def demo_console(tmp_path: Path) -> Iterator[tuple[RunningServer, httpx.Client, str, str]]:
    """A ``serve --demo`` on a SQLite file in ``tmp_path``, an HTTP client on it, the client key
    it printed and a new admin key (to sign in to the console with)."""
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with (
        running_server(database_url, tmp_path, args=["--demo"], expect_key=True) as server,
        httpx.Client(base_url=server.base_url, timeout=10.0) as api,
    ):
        assert server.key is not None
        yield server, api, server.key, cli_admin_key(database_url, tmp_path)


def test_console_signs_in_fulfils_redelivers_and_revokes(tmp_path: Path) -> None:
    binary = chromium_or_skip()
    shots = screenshots_dir(tmp_path)
    with (
        running_receiver() as receiver,
        demo_console(tmp_path) as (server, api, client_key, admin_key),
    ):
        endpoint = api.post(
            "/v1/webhook_endpoints",
            json={"url": receiver.url("/hook"), "description": "Shop backend"},
            headers=bearer(client_key),
        )
        assert endpoint.status_code == 201, endpoint.text

        with chromium_page(binary, tmp_path) as page:
            dialogs = _accept_dialogs(page)

            # Nothing without a session: /dashboard leads to the sign-in form.
            _open(page, f"{server.base_url}/dashboard")
            _until(page, "location.pathname === '/dashboard/sign-in'", "the sign-in page")
            label = page.evaluate(
                "document.querySelector(`label[for=${document.querySelector("
                "'input[type=password]').id}]`).textContent"
            )
            assert "key" in label.lower()
            page.screenshot(shots / "sign-in.png")
            page.evaluate("document.querySelector('input[type=password]').focus()")
            page.call("Input.insertText", {"text": admin_key})
            _submit(page, "form[action='/dashboard/sign-in']")
            _until(page, "location.pathname === '/dashboard'", "the overview")
            assert "Waiting for fulfilment" in _text(page)

            # Create a product.
            _open(page, f"{server.base_url}/dashboard/products/new")
            _fill(
                page,
                {
                    "name": "Console teapot",
                    "description": "Made in the console.",
                    "price": "24.50",
                    "category": "kitchen",
                    "inventory_count": "8",
                },
            )
            _submit(page, "form[action='/dashboard/products']")
            _until(page, "document.body.innerText.includes('Product created.')", "the product")
            product_id = page.evaluate("location.pathname.split('/').pop()")
            page.screenshot(shots / "product.png")
            _open(page, f"{server.base_url}/dashboard/products?category=kitchen")
            assert "Console teapot" in _text(page)
            page.screenshot(shots / "products.png")

            # An order placed through the API, fulfilled in the console.
            placed = api.post(
                "/v1/orders",
                json={
                    "customer_id": "cus_console",
                    "items": [{"product_id": product_id, "quantity": 2}],
                    "shipping_address": ADDRESS,
                },
                headers=bearer(client_key),
            )
            assert placed.status_code == 201, placed.text
            order_id = placed.json()["id"]
            _open(page, f"{server.base_url}/dashboard/orders?status=pending")
            assert order_id in _text(page)
            page.screenshot(shots / "orders.png")
            _open(page, f"{server.base_url}/dashboard/orders/{order_id}")
            assert "49.00" in _text(page)
            _submit(page, f"form[action='/dashboard/orders/{order_id}/fulfil']")
            _until(
                page,
                "document.getElementById('order-status')?.textContent === 'fulfilled'",
                "the status to read fulfilled",
            )
            assert any("Fulfil order" in text for text in dialogs), dialogs
            assert api.get(f"/v1/orders/{order_id}", headers=bearer(client_key)).json()[
                "status"
            ] == ("fulfilled")

            # The order.fulfilled delivery's attempt, on the event's page.
            deadline = time.monotonic() + STEP_SECONDS
            while not any(r.path == "/hook" for r in receiver.requests()):
                assert time.monotonic() < deadline, "no delivery reached the receiver"
                time.sleep(0.1)
            events = api.get("/v1/events", headers=bearer(client_key)).json()["data"]
            event_id = next(e["id"] for e in events if e["type"] == "order.fulfilled")
            _open(page, f"{server.base_url}/dashboard/events/{event_id}")
            for _ in range(100):
                if page.evaluate("document.querySelectorAll('tr.attempt').length") >= 1:
                    break
                page.pump(0.2)
                _open(page, f"{server.base_url}/dashboard/events/{event_id}")
            cells = page.evaluate("[...document.querySelectorAll('tr.attempt')][0].innerText")
            assert "200" in cells, cells
            assert "ms" in cells, cells
            _open(page, f"{server.base_url}/dashboard/orders/{order_id}")
            assert "order.fulfilled" in _text(page)
            page.screenshot(shots / "order.png")

            # Redeliver it: a second attempt with the same webhook-id.
            _open(page, f"{server.base_url}/dashboard/events/{event_id}")
            _submit(page, f"form[action='/dashboard/events/{event_id}/redeliver']")
            _until(page, "document.body.innerText.includes('Redelivery queued')", "the notice")
            for _ in range(100):
                _open(page, f"{server.base_url}/dashboard/events/{event_id}")
                if page.evaluate("document.querySelectorAll('tr.attempt').length") >= 2:
                    break
                page.pump(0.2)
            assert page.evaluate("document.querySelectorAll('tr.attempt').length") >= 2
            assert len([r for r in receiver.requests("/hook") if r.webhook_id == event_id]) >= 2
            page.screenshot(shots / "event.png")

            _open(page, f"{server.base_url}/dashboard/webhooks")
            assert receiver.url("/hook") in _text(page)
            page.screenshot(shots / "webhooks.png")

            # Create a client key (shown once, with a copy button), then revoke it: its next
            # API call is refused.
            _open(page, f"{server.base_url}/dashboard/accounts")
            _submit(page, "form[action='/dashboard/keys']")
            _until(page, "!!document.getElementById('new-key-secret')", "the new key")
            new_key = page.evaluate("document.getElementById('new-key-secret').value")
            assert api.get("/v1/products", headers=bearer(new_key)).status_code == 200
            page.click("document.querySelector('[data-copy=new-key-secret]')", "Copy")
            _until(
                page,
                "document.querySelector('[data-copy=new-key-secret]').textContent === 'Copied'",
                "the copy button to confirm",
            )
            page.screenshot(shots / "accounts.png")
            revoke = page.evaluate(
                "[...document.querySelectorAll('tr')].find(r => r.innerText.includes("
                f"{new_key[-4:]!r}) && r.innerText.includes('client'))"
                "?.querySelector('form[action$=\"/revoke\"]')?.getAttribute('action')"
            )
            assert revoke, "the new key's revoke button"
            _submit(page, f"form[action='{revoke}']")
            _until(page, "document.body.innerText.includes('Key revoked')", "the notice")
            assert any("Revoke key" in text for text in dialogs), dialogs
            assert api.get("/v1/products", headers=bearer(new_key)).status_code == 401
            assert api.get("/v1/products", headers=bearer(client_key)).status_code == 200

            _open(page, f"{server.base_url}/dashboard")
            page.screenshot(shots / "overview.png")
            # Phone width: the layout reflows, nothing needs sideways scrolling.
            page.call("Emulation.setDeviceMetricsOverride", PHONE)
            _open(page, f"{server.base_url}/dashboard/orders/{order_id}")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], width
            page.screenshot(shots / "order-phone.png")

            assert not page.blocked, f"the console asked for non-loopback hosts: {page.blocked}"
            assert not [url for url in page.requested if not _is_loopback(url)]
            assert not page.exceptions, page.exceptions
