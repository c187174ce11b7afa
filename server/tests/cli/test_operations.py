"""Operations, against real processes: logs never hold a secret, SIGTERM is graceful, and
``/metrics`` adds up every worker of ``serve --workers N``.

Processes, receivers and data helpers are shared with ``test_webhook_delivery_processes.py``
and ``test_rate_limit_processes.py``; every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from commerce_api.app.factory import create_app
from commerce_api.http.pipeline import RequestObserver
from commerce_api.storage.db import Database
from commerce_api.storage.tables import webhook_attempts, webhook_deliveries
from commerce_api.webhooks.repository import INTERRUPTED
from tests.conftest import make_settings
from tests.factories import run_cli
from tests.helpers import bearer
from tests.ratelimit.test_rate_limit_processes import base_env, cli
from tests.ratelimit.test_rate_limits import redis_test_url, unique_redis_prefix
from tests.webhook_receiver import Receiver, Reply, eventually, running_receiver
from tests.webhooks.test_webhook_delivery_processes import (
    FAST_DISPATCH,
    child,
    client_key_and_product,
    place_order,
    register_endpoint,
    serving,
)

pytestmark = pytest.mark.slow

# app.serving.GRACEFUL_SHUTDOWN_SECONDS (14 s: requests in flight, then the dispatcher's 5 s) bounds
# the exit.
EXIT_WITHIN_SECONDS = 15.0
LOAD_REQUESTS = 200
LOAD_CONCURRENCY = 20
SIGNAL_AFTER_REQUESTS = 60


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as running:
        yield running


async def claimed_deliveries(database_url: str) -> list[Any]:
    db = Database(database_url)
    try:
        async with db.read() as conn:
            rows = await conn.execute(select(webhook_deliveries))
            return list(rows.all())
    finally:
        await db.dispose()


# --- logs ----------------------------------------------------------------------------------------


async def test_the_server_log_never_contains_a_key_a_webhook_secret_or_a_signature(
    sqlite_database_url: str, tmp_path: Path, receiver: Receiver
) -> None:
    env = base_env(sqlite_database_url)
    account_id = cli(env, tmp_path, "accounts", "create", "Acme")
    key = cli(env, tmp_path, "keys", "create", "--account", account_id)
    admin_key = cli(env, tmp_path, "keys", "create", "--admin")
    [key_id] = [k["id"] for k in json.loads(cli_json(env, tmp_path)) if k["role"] == "client"]
    invalid_key = "sk_sandbox_" + "Q" * 32
    live_key = "sk_live_" + "Z" * 32
    secrets = [key, admin_key, invalid_key, live_key]
    # Debug level: granian, httpx and SQLAlchemy log all they can, and all of it is checked.
    settings = {
        "COMMERCE_DATABASE_URL": sqlite_database_url,
        "COMMERCE_LOG_LEVEL": "debug",
        **FAST_DISPATCH,
    }
    async with httpx.AsyncClient(timeout=15.0) as http:
        with serving(tmp_path, settings) as (server, base_url):
            product = await http.post(
                f"{base_url}/v1/products",
                headers=bearer(admin_key),
                json={"name": "Lamp", "price": 10, "category": "home", "inventory_count": 50},
            )
            assert product.status_code == 201, product.text
            product_id = product.json()["id"]
            for headers in (
                bearer(key),
                bearer(invalid_key),
                bearer(live_key),
                {"Authorization": f"Token {key} and more"},  # malformed, with a real key
                {"Authorization": f"Bearer {key} {live_key}"},
                {"Authorization": key},
            ):
                response = await http.get(f"{base_url}/v1/products", headers=headers)
                assert response.status_code in {200, 401}
            response = await http.get(f"{base_url}/v1/orders", params={"api_key": live_key})
            assert response.status_code in {400, 401}

            endpoint = await register_endpoint(http, base_url, key, receiver.url("/hook"))
            secrets.append(endpoint["secret"])
            await place_order(http, base_url, key, product_id)
            await eventually(lambda: len(receiver.requests()) >= 1, within=10, what="a delivery")
            rotated = await http.post(
                f"{base_url}/v1/webhook_endpoints/{endpoint['id']}/rotate_secret",
                headers=bearer(key),
            )
            assert rotated.status_code == 200, rotated.text
            secrets.append(rotated.json()["secret"])
            await place_order(http, base_url, key, product_id)
            await eventually(lambda: len(receiver.requests()) >= 2, within=10, what="2 deliveries")

            assert cli(env, tmp_path, "keys", "revoke", key_id) == key_id
            deadline = time.monotonic() + 10  # other processes learn of it within moments
            while (await http.get(f"{base_url}/v1/orders", headers=bearer(key))).status_code != 401:
                assert time.monotonic() < deadline, "the revoked key still works"
                await asyncio.sleep(0.1)
            assert server.terminate(EXIT_WITHIN_SECONDS) == 0

    signatures = [
        signature
        for request in receiver.requests()
        for signature in request.headers["webhook-signature"].split()
    ]
    assert len(signatures) >= 3  # the second delivery is signed with both secrets
    log = server.stderr_path.read_text(encoding="utf-8")
    for secret in secrets + signatures:
        # The whole value, and the part after the prefix on its own.
        assert secret not in log, f"a secret ({secret[:10]}…) is in the server's log"
        assert secret.split("_")[-1].split(",")[-1] not in log
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    routes = {line.get("route") for line in lines if line["logger"] == "commerce_api.access"}
    assert {"/v1/products", "/v1/webhook_endpoints/{id}/rotate_secret"} <= routes
    deliveries = [line for line in lines if line["message"] == "webhook delivery"]
    assert deliveries
    assert {"event_id", "endpoint_id", "status_code", "outcome", "duration_ms"} <= deliveries[
        0
    ].keys()


def cli_json(env: dict[str, str], workdir: Path) -> str:
    """``keys list --json`` (the whole output: it spans several lines)."""
    return run_cli(env, workdir, "keys", "list", "--json")


# --- SIGTERM -------------------------------------------------------------------------------------


@dataclass
class Sent:
    """One request of the load: when its headers started out, when it ended, and how."""

    headers_sent_at: float | None = None
    ended_at: float | None = None
    status: int | None = None
    error: str | None = None


async def load(
    base_url: str, key: str, sent: list[Sent], signal_after: int, send_signal: Callable[[], None]
) -> None:
    """``len(sent)`` GETs, ``LOAD_CONCURRENCY`` at a time, each on a new connection (so no
    request is written to a kept-alive connection the server is closing: that race is HTTP/1.1's,
    not the server's). ``send_signal`` is called right after the headers of request number
    ``signal_after`` went out, so that requests are certainly in flight at that moment."""
    slots = asyncio.Semaphore(LOAD_CONCURRENCY)
    headers_sent = 0
    limits = httpx.Limits(max_connections=LOAD_CONCURRENCY, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=20.0, limits=limits) as http:

        async def one(record: Sent) -> None:
            async def trace(event: str, _info: dict[str, Any]) -> None:
                nonlocal headers_sent
                if event == "http11.send_request_headers.started":
                    record.headers_sent_at = time.monotonic()
                elif event == "http11.send_request_headers.complete":
                    headers_sent += 1
                    if headers_sent == signal_after:
                        send_signal()

            async with slots:
                try:
                    response = await http.get(
                        "/v1/products", headers=bearer(key), extensions={"trace": trace}
                    )
                    record.status = response.status_code
                except httpx.TransportError as exc:
                    record.error = type(exc).__name__
                record.ended_at = time.monotonic()

        await asyncio.gather(*(one(record) for record in sent))


async def test_sigterm_finishes_accepted_requests_and_deliveries_then_exits_0(
    database_url: str, tmp_path: Path, receiver: Receiver
) -> None:
    """Under load, with slow webhook deliveries in flight, SIGTERM to ``serve``:

    * every request whose headers were on the wire before the signal gets its response: its
      connection had been accepted (granian's worker keeps accepting until the signal reaches
      it from the main process), so it is in flight and granian lets it finish. Requests sent
      after the signal may be refused once the listener closes — that is allowed, so they are
      not checked;
    * the process exits with code 0 within the bound (app.serving.GRACEFUL_SHUTDOWN_SECONDS);
    * no delivery is left claimed: attempts in flight finished (the receiver takes 1 s, less
      than the dispatcher's grace) and anything else claimed was released.
    """
    key, product_id = await client_key_and_product(database_url)
    receiver.reply("/slow", Reply(200, delay=1.0))
    settings = {
        "COMMERCE_DATABASE_URL": database_url,
        "COMMERCE_RATE_LIMIT_ENABLED": "false",
        **FAST_DISPATCH,
    }
    sent = [Sent() for _ in range(LOAD_REQUESTS)]
    async with httpx.AsyncClient(timeout=15.0) as http:
        with serving(tmp_path, settings) as (server, base_url):
            await register_endpoint(http, base_url, key, receiver.url("/slow"))
            for _ in range(3):
                await place_order(http, base_url, key, product_id)
            await eventually(lambda: len(receiver.requests()) >= 1, within=10, what="a delivery")

            signalled: list[float] = []

            def terminate() -> None:
                server.process.send_signal(signal.SIGTERM)
                signalled.append(time.monotonic())

            await asyncio.wait_for(
                load(base_url, key, sent, SIGNAL_AFTER_REQUESTS, terminate), timeout=60
            )
            [signalled_at] = signalled
            exit_code = await asyncio.to_thread(server.process.wait, EXIT_WITHIN_SECONDS + 5)
            exited_after = time.monotonic() - signalled_at

    assert exit_code == 0, server.logs()
    assert exited_after < EXIT_WITHIN_SECONDS, server.logs()
    before = [r for r in sent if r.headers_sent_at is not None and r.headers_sent_at < signalled_at]
    in_flight = [r for r in before if r.ended_at is not None and r.ended_at > signalled_at]
    assert len(before) >= SIGNAL_AFTER_REQUESTS
    assert in_flight, "no request was in flight when the signal came: the test proves nothing"
    failed = [r for r in before if r.status != 200]
    assert not failed, f"requests sent before SIGTERM failed: {failed[:5]}"
    assert all(r.status == 200 or r.error is not None for r in sent)

    rows = await claimed_deliveries(database_url)
    assert len(rows) == 3
    assert [row.claim_token for row in rows] == [None, None, None]
    assert any(row.status == "succeeded" for row in rows)
    assert "Traceback" not in server.stderr_path.read_text(encoding="utf-8"), server.logs()


@asynccontextmanager
async def in_process_api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The API in this process (no dispatcher) to set up endpoints and orders."""
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            yield http


async def test_a_worker_on_sigterm_abandons_slow_attempts_releases_its_claims_and_exits_0(
    database_url: str, tmp_path: Path, receiver: Receiver
) -> None:
    """The receiver takes longer than the dispatcher's stop grace: the worker does not wait
    for it, gives the deliveries back (due again, for any dispatcher; the cut-off attempts
    counted and recorded as interrupted) and exits 0."""
    key, product_id = await client_key_and_product(database_url)
    receiver.reply("/slower", Reply(200, delay=8.0))
    async with in_process_api(database_url) as api:
        await register_endpoint(api, "", key, receiver.url("/slower"))
        for _ in range(2):
            await place_order(api, "", key, product_id)
    settings = {
        "COMMERCE_DATABASE_URL": database_url,
        "COMMERCE_SECRET_KEY": make_settings(database_url).secret_key or "",
        **FAST_DISPATCH,
        "COMMERCE_WEBHOOK_TIMEOUT_SECONDS": "10",
    }
    with child(tmp_path, "worker", ["worker"], settings) as worker:
        await eventually(lambda: len(receiver.requests()) >= 2, within=10, what="2 attempts")
        rows = await claimed_deliveries(database_url)
        assert all(row.claim_token is not None for row in rows)
        started = time.monotonic()
        code = await asyncio.to_thread(worker.terminate, EXIT_WITHIN_SECONDS)
        assert code == 0, worker.logs()
        assert time.monotonic() - started < 8.0, worker.logs()  # before the receiver answered

    rows = await claimed_deliveries(database_url)
    assert [(row.status, row.attempts, row.claim_token) for row in rows] == [
        ("pending", 1, None),
        ("pending", 1, None),
    ]
    db = Database(database_url)
    try:
        async with db.read() as conn:
            attempts = await conn.execute(select(webhook_attempts.c.error))
            recorded = [attempt.error for attempt in attempts]
    finally:
        await db.dispose()
    assert recorded == [INTERRUPTED, INTERRUPTED]
    log = worker.stderr_path.read_text(encoding="utf-8")
    assert "abandoning them" in log
    assert "webhook dispatcher stopped" in log


# --- metrics with several workers ----------------------------------------------------------------


def request_count(text: str, route: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "commerce_http_requests_total" and sample.labels["route"] == route
    )


@pytest.mark.postgresql
async def test_metrics_add_up_every_worker_and_their_directory_is_removed(
    postgresql_database_url: str, tmp_path: Path
) -> None:
    redis_url = await redis_test_url()
    key, _ = await client_key_and_product(postgresql_database_url)
    temp = tmp_path / "tmp"
    temp.mkdir()
    settings = {
        "COMMERCE_DATABASE_URL": postgresql_database_url,
        "COMMERCE_REDIS_URL": redis_url,
        "COMMERCE_REDIS_KEY_PREFIX": unique_redis_prefix(),
        "TMPDIR": str(temp),
    }
    with serving(tmp_path, settings, "--workers", "2") as (server, base_url):
        [directory] = temp.iterdir()
        assert directory.name.startswith("commerce-api-metrics-")
        limits = httpx.Limits(max_keepalive_connections=0)  # spread over both workers
        async with httpx.AsyncClient(base_url=base_url, timeout=10, limits=limits) as http:
            for _ in range(30):
                response = await http.get("/v1/products", headers=bearer(key))
                assert response.status_code == 200
            # Each worker feeds its metrics in batches, at most FLUSH_SECONDS after a request:
            # until a scrape counts all 30 (a poll with a deadline) ...
            deadline = time.monotonic() + RequestObserver.FLUSH_SECONDS * 4 + 10
            while request_count((await http.get("/metrics")).text, "/v1/products") != 30:
                assert time.monotonic() < deadline, "the workers' requests were never all counted"
                await asyncio.sleep(0.05)
            # ... then whichever worker answers, it reports both workers' requests.
            for _ in range(4):
                scrape = await http.get("/metrics")
                assert request_count(scrape.text, "/v1/products") == 30
        assert server.terminate(EXIT_WITHIN_SECONDS) == 0, server.logs()
    assert list(temp.iterdir()) == []
