"""``/docs`` in a real headless Chromium, with no internet access, against a real server.

The test starts ``commerce-api serve --demo`` (reading the key it prints), starts Debian's
``chromium`` headless with a fresh profile, and drives it over the Chrome DevTools Protocol
(a websocket; ``websockets`` comes with ``uvicorn[standard]``, so nothing is added). Every
request the page makes is paused by the ``Fetch`` domain: loopback ones continue, any other
host is refused and recorded, so the page must work offline. Then, like a reader would, it
authorises with the key in Swagger UI's Authorize dialog, opens ``GET /v1/products``, clicks
"Try it out" and "Execute", and reads the response code and a product's name off the page.

Where Chromium is not installed the test skips, saying so; in CI (``CI=true``,
``COMMERCE_TEST_REQUIRE_POSTGRES=1`` or ``COMMERCE_TEST_REQUIRE_BROWSER=1``) it fails instead.
``COMMERCE_TEST_CHROMIUM`` names another binary. A full-page screenshot is saved in the test's
temporary directory (its path is printed; ``pytest -s`` shows it).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tests.helpers import bearer
from tests.server_process import running_server, stop_process

pytestmark = pytest.mark.slow

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
REQUIRE_BROWSER = (
    os.environ.get("CI", "").lower() == "true"
    or os.environ.get("COMMERCE_TEST_REQUIRE_POSTGRES") == "1"
    or os.environ.get("COMMERCE_TEST_REQUIRE_BROWSER") == "1"
)
# The flags this machine needs (no sandbox as root, no background connections to Google).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--window-size=1280,1400",
    "--remote-debugging-port=0",
)
BROWSER_START_SECONDS = 30.0
STEP_SECONDS = 20.0
NON_NETWORK_SCHEMES = {"data", "blob", "about", "chrome", "devtools"}


def _chromium() -> str | None:
    explicit = os.environ.get("COMMERCE_TEST_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_or_skip() -> str:
    """The Chromium binary; the test skips without one, saying why (fails in CI)."""
    binary = _chromium()
    if binary is None:
        message = (
            "Chromium is not installed (looked for "
            + ", ".join(CHROMIUM_NAMES)
            + " on PATH; Debian/Ubuntu: apt-get install chromium chromium-driver)"
        )
        if REQUIRE_BROWSER:
            pytest.fail(message + " — required in CI, where .ci/run installs it")
        pytest.skip(message)
    return binary


def _is_loopback(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in NON_NETWORK_SCHEMES:
        return True
    host = (parts.hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CDPError(Exception):
    pass


@dataclass
class Page:
    """One page target over CDP: commands, and the events the test cares about."""

    ws: ClientConnection
    requested: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    _next_id: int = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a command and wait for its result, handling the events that arrive meanwhile."""
        self._next_id += 1
        command_id = self._next_id
        self.ws.send(json.dumps({"id": command_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + STEP_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CDPError(f"no answer to {method} within {STEP_SECONDS} s")
            message = json.loads(self.ws.recv(timeout=remaining))
            if message.get("id") == command_id:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self._on_event(message["method"], message.get("params", {}))

    def pump(self, seconds: float) -> None:
        """Handle events for a while (never just sleep: paused requests would hang)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                message = json.loads(self.ws.recv(timeout=remaining))
            except TimeoutError:
                return
            if "method" in message:
                self._on_event(message["method"], message.get("params", {}))

    def _send(self, method: str, params: dict[str, Any]) -> None:
        """A command whose answer nobody waits for (``call`` ignores unknown ids)."""
        self._next_id += 1
        self.ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Fetch.requestPaused":
            url = params["request"]["url"]
            if _is_loopback(url):
                self._send("Fetch.continueRequest", {"requestId": params["requestId"]})
            else:
                self.blocked.append(url)
                self._send(
                    "Fetch.failRequest",
                    {"requestId": params["requestId"], "errorReason": "BlockedByClient"},
                )
        elif method == "Network.requestWillBeSent":
            self.requested.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.exceptions.append(
                str(details.get("exception", {}).get("description") or details.get("text"))
            )

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise CDPError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, what: str) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + STEP_SECONDS
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            self.pump(0.1)
        text = self.evaluate("document.body ? document.body.innerText.slice(0, 2000) : ''")
        raise AssertionError(f"timed out waiting for {what}; the page says:\n{text}")

    def click(self, expression: str, what: str) -> None:
        """Click the element an expression finds, once it exists."""
        self.wait_for(f"!!({expression})", what)
        self.evaluate(f"({expression}).scrollIntoView({{block: 'center'}}); ({expression}).click()")

    def screenshot(self, path: Path) -> None:
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.call(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
        )
        path.write_bytes(base64.b64decode(shot["data"]))


@contextmanager
def chromium_page(binary: str, workdir: Path) -> Iterator[Page]:
    """Start Chromium with a fresh profile; yield its first tab, network interception on."""
    profile = workdir / "chromium-profile"
    profile.mkdir()
    log_path = workdir / "chromium.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + BROWSER_START_SECONDS
        while not (port_file.exists() and port_file.read_text().strip()):
            if process.poll() is not None or time.monotonic() > deadline:
                log_text = log_path.read_text(errors="replace")[-3000:]
                raise AssertionError(f"Chromium did not start ({binary}):\n{log_text}")
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as http:
            targets = http.get("/json/list").json()
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        with connect(ws_url, max_size=None, open_timeout=10) as ws:
            page = Page(ws)
            page.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
            page.call("Network.enable")
            page.call("Runtime.enable")
            page.call("Page.enable")
            yield page
    finally:
        stop_process(process)


def _operation(method: str, path: str) -> str:
    """JavaScript finding Swagger UI's block for one operation."""
    return (
        f"[...document.querySelectorAll('.opblock.opblock-{method}')].find(b => "
        f"b.querySelector('.opblock-summary-path')?.getAttribute('data-path') === {path!r})"
    )


def test_docs_page_works_offline_and_tries_a_request(tmp_path: Path) -> None:
    binary = chromium_or_skip()

    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with running_server(database_url, tmp_path, args=["--demo"], expect_key=True) as server:
        assert server.key is not None
        key = server.key
        with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
            products = http.get("/v1/products", headers=bearer(key)).json()["data"]
        # A name that the JSON view shows verbatim (no escapes).
        name = next(p["name"] for p in products if re.fullmatch(r"[\w ,.'()-]+", p["name"]))

        with chromium_page(binary, tmp_path) as page:
            page.call("Page.navigate", {"url": f"{server.base_url}/docs"})

            # The reference renders from the served assets and the OpenAPI document.
            summaries = page.wait_for(
                "(() => { const s = [...document.querySelectorAll('.opblock-summary-description')]"
                ".map(e => e.textContent.trim()); return s.length > 10 ? s : null; })()",
                "the operations to render",
            )
            for summary in ("List products", "Retrieve a product", "Create an order"):
                assert summary in summaries, summaries
            title = page.evaluate("document.querySelector('.info .title')?.textContent || ''")
            assert "Commerce API" in title

            # Authorize: the dialog takes the key for the bearer scheme.
            page.click("document.querySelector('.auth-wrapper .authorize')", "Authorize")
            page.wait_for("!!document.querySelector('.modal-ux input')", "the Authorize dialog")
            page.evaluate("document.querySelector('.modal-ux input').focus()")
            page.call("Input.insertText", {"text": key})
            page.click(
                "document.querySelector('.modal-ux .auth-btn-wrapper button.authorize')",
                "the dialog's Authorize button",
            )
            page.wait_for(
                "document.querySelector('.modal-ux')?.innerText.includes('Logout')",
                "the dialog to show the scheme as authorised",
            )
            page.click("document.querySelector('.modal-ux .btn-done')", "Close")

            # Try it out: GET /v1/products, executed by the page against the running server.
            block = _operation("get", "/v1/products")
            page.click(f"{block}?.querySelector('.opblock-summary-control')", "GET /v1/products")
            page.click(f"{block}?.querySelector('.try-out__btn')", "Try it out")
            page.click(f"{block}?.querySelector('.execute')", "Execute")
            status = page.wait_for(
                f"{block}?.querySelector('.live-responses-table tr.response .response-col_status')"
                "?.textContent.trim()",
                "the live response",
            )
            body = page.evaluate(f"{block}.querySelector('.live-responses-table').innerText")
            curl = page.evaluate(f"{block}.querySelector('.curl-command')?.innerText || ''")
            page.pump(0.5)

            shot = tmp_path / "docs.png"
            page.screenshot(shot)
            print(f"screenshot: {shot}")

            assert status == "200", body
            assert name in body, (name, body[:2000])
            assert f"Authorization: Bearer {key}" in curl, curl
            assert not page.blocked, f"the page asked for non-loopback hosts: {page.blocked}"
            offsite = [url for url in page.requested if not _is_loopback(url)]
            assert not offsite, offsite
            for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
                assert f"{server.base_url}/docs/assets/{asset}" in page.requested
            assert f"{server.base_url}/v1/openapi.json" in page.requested
            assert not page.exceptions, page.exceptions
