"""Refusals on record (issue 44): 503 ``server_busy``, 408, 413 and 431 counted in ``/metrics``
with their reason and written to the request log, one line per address and reason a second
with a count."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from starlette.types import Receive, Scope, Send

from commerce_api.app.server_guard import ServerGuardMiddleware
from commerce_api.observability.refusals import RefusalLog
from tests.helpers import guard_scope, never_receive, sent_by
from tests.server_process import running_server


def refusals(reason: str) -> float:
    value = REGISTRY.get_sample_value("commerce_http_refusals_total", {"reason": reason})
    return value or 0.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "commerce_api.access"]


def test_a_flood_is_one_line_per_address_and_reason_a_second_with_its_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    log = RefusalLog(clock)
    before = refusals("server_busy")
    with caplog.at_level(logging.INFO, logger="commerce_api.access"):
        for _ in range(50):
            log.refused("server_busy", 503, "203.0.113.5")
        log.refused("server_busy", 503, "203.0.113.6")  # another address: its own line
        log.refused("header_too_large", 431, "203.0.113.5")  # another reason: its own line
        clock.now += 1.0
        log.refused("server_busy", 503, "203.0.113.5")
    assert refusals("server_busy") - before == 52  # the metric counts every one
    lines = _lines(caplog)
    assert [(r.client, r.reason, r.count) for r in lines] == [  # type: ignore[attr-defined]
        ("203.0.113.5", "server_busy", 1),
        ("203.0.113.6", "server_busy", 1),
        ("203.0.113.5", "header_too_large", 1),
        ("203.0.113.5", "server_busy", 50),  # the 49 unlogged of the second before, and this
    ]
    assert (
        lines[0].getMessage() == "refused 503 server_busy from 203.0.113.5 (1 since the last line)"
    )


# --- the guard in process ---------------------------------------------------------------------


async def _statuses(guard: ServerGuardMiddleware, scope: Scope, receive: Receive) -> list[int]:
    sent = await sent_by(guard, scope, receive)
    return [m["status"] for m in sent if m["type"] == "http.response.start"]


async def test_the_guards_refusals_are_counted_by_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "POST":
            await receive()  # waits for a body that never comes
        else:
            await release.wait()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    guard = ServerGuardMiddleware(
        app, max_header_bytes=1024, max_headers=64, max_requests_per_client=1, body_timeout=0.05
    )
    before = {r: refusals(r) for r in ("header_too_large", "server_busy", "request_timeout")}
    with caplog.at_level(logging.INFO, logger="commerce_api.access"):
        big = [(b"x-big", b"v" * 2000)]
        assert await _statuses(guard, guard_scope(headers=big), never_receive) == [431]
        held = asyncio.create_task(_statuses(guard, guard_scope(), never_receive))
        await asyncio.sleep(0)
        assert await _statuses(guard, guard_scope(), never_receive) == [503]
        release.set()
        assert await held == [204]
        assert await _statuses(guard, guard_scope("POST"), never_receive) == [408]
    for reason in before:
        assert refusals(reason) - before[reason] == 1, reason
    assert {(r.reason, r.status) for r in _lines(caplog)} == {  # type: ignore[attr-defined]
        ("header_too_large", 431),
        ("server_busy", 503),
        ("request_timeout", 408),
    }


async def test_a_413_is_counted_in_metrics_with_its_reason(client: httpx.AsyncClient) -> None:
    before = refusals("payload_too_large")
    answer = await client.post(
        "/v1/orders", content=b"{}", headers={"content-length": str(2 * 1024 * 1024)}
    )
    assert answer.status_code == 413
    scraped = (await client.get("/metrics")).text
    line = re.search(r'commerce_http_refusals_total\{reason="payload_too_large"\} (\S+)', scraped)
    assert line is not None, scraped[:2000]
    assert float(line.group(1)) - before == 1


@pytest.mark.slow
def test_a_served_431_is_in_metrics_and_the_request_log(tmp_path: Path) -> None:
    """The review's check, through ``serve``: a head over COMMERCE_HTTP_MAX_HEADER_BYTES."""
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    settings = {"COMMERCE_HTTP_MAX_HEADER_BYTES": "2048", "COMMERCE_LOG_FORMAT": "json"}
    with running_server(database_url, tmp_path, settings=settings) as server:
        with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
            for _ in range(3):
                refused = http.get("/healthz", headers={"x-big": "v" * 3000})
                assert refused.status_code == 431
                assert refused.json()["error"]["reason"] == "header_too_large"
            scraped = http.get("/metrics").text
        deadline = time.monotonic() + 5
        log = ""
        while time.monotonic() < deadline and '"reason":"header_too_large"' not in log:
            time.sleep(0.1)
            log = server.stderr_path.read_text(encoding="utf-8")
    assert 'commerce_http_refusals_total{reason="header_too_large"} 3.0' in scraped, scraped
    assert '"reason":"header_too_large"' in log, log[-2000:]
