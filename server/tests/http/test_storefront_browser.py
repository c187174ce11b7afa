"""A storefront's page on another origin, in a real headless Chromium, against a real server.

The page is served from its own origin (a second HTTP server on loopback), listed in
``COMMERCE_CORS_ORIGINS``; with a publishable key it reads the catalogue and then tries to place
an order, and reads the refusal (``publishable_key_not_allowed``) from the envelope, as
``http/cors.py`` promises. The same page from an origin not listed gets nothing readable (the
browser's "Failed to fetch"), and the server logs the refused origin. Chromium is driven over
CDP as in ``test_docs_browser.py`` (which skips, or fails in CI, without it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests import factories
from tests.http.test_docs_browser import chromium_or_skip, chromium_page
from tests.server_process import HOST, running_server

pytestmark = pytest.mark.slow

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Shop</title></head><body><p>Shop</p><script>
const api = %(api)r, key = %(key)r;
(async () => {
  const auth = {Authorization: "Bearer " + key};
  const out = {};
  const products = await fetch(api + "/v1/products?limit=2", {headers: auth});
  out.products = products.status;
  out.total = (await products.json()).pagination.total;
  const order = await fetch(api + "/v1/orders", {
    method: "POST",
    headers: {...auth, "Content-Type": "application/json", "Idempotency-Key": "shop-page-1"},
    body: JSON.stringify({customer_id: "cus_page", items: []}),
  });
  out.order = order.status;
  out.reason = (await order.json()).error.reason;
  out.requestId = order.headers.get("X-Request-Id");
  window.result = out;
})().catch(error => { window.result = {failed: String(error)}; });
</script></body></html>
"""


@contextmanager
def storefront(pages: dict[str, bytes]) -> Iterator[int]:
    """An HTTP server on loopback answering every GET with ``pages["page"]`` (set once the
    API's address is known); its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = pages["page"]
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


async def _publishable_key(database_url: str) -> str:
    async with factories.opened(database_url) as db:
        account_id = await factories.new_account(db)
        await factories.new_product(db, 3)
        return (await factories.new_key(db, account_id, role="publishable")).secret


async def test_a_storefront_page_reads_the_catalogue_and_sees_its_refusal(
    sqlite_database_url: str, tmp_path: Path
) -> None:
    binary = chromium_or_skip()
    key = await _publishable_key(sqlite_database_url)
    pages: dict[str, bytes] = {}
    results = {}
    with storefront(pages) as port:
        origin = f"http://{HOST}:{port}"
        settings = {"COMMERCE_CORS_ORIGINS": origin, "COMMERCE_SECRET_KEY": "s" * 32}
        with running_server(sqlite_database_url, tmp_path, settings=settings) as server:
            pages["page"] = (PAGE % {"api": server.base_url, "key": key}).encode()
            with chromium_page(binary, tmp_path) as browser:
                # The same page from the listed origin, then from another (another host name).
                for name, url in (
                    ("listed", f"{origin}/"),
                    ("unlisted", f"http://localhost:{port}/"),
                ):
                    browser.call("Page.navigate", {"url": url})
                    results[name] = browser.wait_for("window.result", f"the {name} page")
            log = server.stderr_path.read_text(encoding="utf-8")

    seen = results["listed"]
    assert seen["products"] == 200, seen
    assert seen["total"] >= 1
    assert seen["order"] == 403
    assert seen["reason"] == "publishable_key_not_allowed"
    assert seen["requestId"].startswith("req_")  # exposed to the page
    assert "Failed to fetch" in results["unlisted"].get("failed", ""), results["unlisted"]
    assert f"refused a preflight from origin http://localhost:{port}" in log, log[-2000:]
