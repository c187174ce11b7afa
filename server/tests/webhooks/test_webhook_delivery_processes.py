"""Webhook delivery by real processes, in both runtime shapes of docs/design.md.

* Embedded default: one ``commerce-api serve`` (the dispatcher runs inside it) on SQLite. An
  endpoint registered over HTTP gets a verified ``order.created`` within seconds of an order
  placed over HTTP, and ``order.fulfilled`` after the fulfilment.
* Scaled out: ``commerce-api serve --no-dispatcher`` plus a separate ``commerce-api worker`` on
  PostgreSQL, sharing ``COMMERCE_SECRET_KEY``. With the API process alone nothing is delivered;
  once the worker runs, the delivery arrives; SIGTERM stops the worker promptly, exit code 0.

The receivers are real HTTP servers on 127.0.0.1 (``tests/webhook_receiver.py``); deliveries
are verified with ``standardwebhooks``. The processes get only the ``COMMERCE_*`` settings we
pass (``tests/server_process.py`` is reused for ports, health checks and stopping; this
module adds the extra settings and the ``worker`` process). Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import factories
from tests.helpers import bearer
from tests.server_process import (
    COMMERCE_API,
    HOST,
    SHUTDOWN_TIMEOUT_SECONDS,
    STARTUP_TIMEOUT_SECONDS,
    _wait_until_healthy,
    free_port,
    stderr_tail,
    stop_process,
)
from tests.webhook_receiver import Receiver, eventually, running_receiver

pytestmark = pytest.mark.slow

DELIVERY_WITHIN_SECONDS = 10.0
DISPATCHER_STARTED = "webhook dispatcher started"  # logged by Dispatcher.run()
WORKER_STOP_SECONDS = 10.0
SECRET_KEY = "e2e-webhook-secret-key-0123456789abcdef"
FAST_DISPATCH = {
    "COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS": "true",  # the receivers listen on 127.0.0.1
    "COMMERCE_WEBHOOK_POLL_SECONDS": "0.1",
    "COMMERCE_WEBHOOK_RETRY_SCHEDULE": "1,1,1",
    "COMMERCE_WEBHOOK_TIMEOUT_SECONDS": "5",
}


# --- processes ----------------------------------------------------------------------------------


class Child:
    """One ``commerce-api`` child process with exactly the ``COMMERCE_*`` settings given."""

    def __init__(
        self, workdir: Path, name: str, args: Sequence[str], settings: Mapping[str, str]
    ) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
        env.update({"PYTHONUNBUFFERED": "1", **settings})
        self.name = name
        self.stdout_path = workdir / f"{name}.stdout.log"
        self.stderr_path = workdir / f"{name}.stderr.log"
        with self.stdout_path.open("w") as stdout, self.stderr_path.open("w") as stderr:
            self.process = subprocess.Popen(
                [str(COMMERCE_API), *args],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                text=True,
            )

    def logs(self) -> str:
        return f"--- {self.name} stderr ---\n{stderr_tail(self.stderr_path)}"

    def terminate(self, within: float) -> int:
        """SIGTERM; the exit code, or an AssertionError (after a SIGKILL) if it lingers."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=SHUTDOWN_TIMEOUT_SECONDS)
            raise AssertionError(
                f"{self.name} did not exit within {within} s of SIGTERM\n{self.logs()}"
            ) from None

    def stop(self) -> None:
        stop_process(self.process)


@contextmanager
def child(
    workdir: Path, name: str, args: Sequence[str], settings: Mapping[str, str]
) -> Iterator[Child]:
    assert COMMERCE_API.exists(), f"{COMMERCE_API} is not installed (run `make install`)"
    process = Child(workdir, name, args, settings)
    try:
        yield process
    finally:
        process.stop()


@contextmanager
def serving(workdir: Path, settings: Mapping[str, str], *args: str) -> Iterator[tuple[Child, str]]:
    """``commerce-api serve`` on a free port, healthy: (the process, its base URL)."""
    port = free_port()
    base_url = f"http://{HOST}:{port}"
    serve_args = ["serve", "--host", HOST, "--port", str(port), *args]
    with child(workdir, "serve", serve_args, settings) as server:
        try:
            _wait_until_healthy(
                server.process, base_url, time.monotonic() + STARTUP_TIMEOUT_SECONDS
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{server.logs()}") from None
        yield server, base_url


# --- data ---------------------------------------------------------------------------------------


async def client_key_and_product(database_url: str) -> tuple[str, str]:
    """A new account's client key and a product in stock, written straight to the database."""
    async with factories.opened(database_url) as db:
        customer = await factories.new_customer(db, "Webhook e2e")
        product_id = await factories.new_product(db, price_minor=2500, category="webhooks")
    return customer.secret, product_id


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=15.0) as client:
        yield client


def created(response: httpx.Response) -> dict[str, Any]:
    """The record a 201 answer holds (it must be a 201)."""
    assert response.status_code == 201, response.text
    record: dict[str, Any] = response.json()
    return record


async def register_endpoint(
    http: httpx.AsyncClient, base_url: str, key: str, url: str
) -> dict[str, Any]:
    path = f"{base_url}/v1/webhook_endpoints"
    endpoint = created(await http.post(path, headers=bearer(key), json={"url": url}))
    assert endpoint["secret"].startswith("whsec_")
    return endpoint


async def place_order(
    http: httpx.AsyncClient, base_url: str, key: str, product_id: str
) -> dict[str, Any]:
    body = factories.order_body((product_id, 2), customer_id="cus_e2e")
    return created(await http.post(f"{base_url}/v1/orders", headers=bearer(key), json=body))


async def the_event(
    http: httpx.AsyncClient, base_url: str, key: str, event_type: str
) -> dict[str, Any]:
    """The account's only event of this type, with its deliveries."""
    response = await http.get(
        f"{base_url}/v1/events", headers=bearer(key), params={"type": event_type}
    )
    assert response.status_code == 200, response.text
    [listed] = response.json()["data"]
    response = await http.get(f"{base_url}/v1/events/{listed['id']}", headers=bearer(key))
    assert response.status_code == 200, response.text
    event: dict[str, Any] = response.json()
    return event


async def delivered(receiver: Receiver, count: int, process: Child) -> None:
    try:
        await eventually(
            lambda: len(receiver.requests()) >= count,
            within=DELIVERY_WITHIN_SECONDS,
            what=f"{count} webhook deliveries",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{process.logs()}") from None


# --- the embedded default -----------------------------------------------------------------------


async def test_serve_delivers_order_events_from_its_own_dispatcher(
    sqlite_database_url: str, tmp_path: Path, receiver: Receiver, http: httpx.AsyncClient
) -> None:
    key, product_id = await client_key_and_product(sqlite_database_url)
    # No COMMERCE_SECRET_KEY: the sandbox keeps a generated one in its database.
    settings = {"COMMERCE_DATABASE_URL": sqlite_database_url, **FAST_DISPATCH}
    with serving(tmp_path, settings) as (server, base_url):
        endpoint = await register_endpoint(http, base_url, key, receiver.url("/orders"))
        secret = endpoint["secret"]

        started = time.monotonic()
        order = await place_order(http, base_url, key, product_id)
        await delivered(receiver, 1, server)
        assert time.monotonic() - started < DELIVERY_WITHIN_SECONDS
        [created] = receiver.requests()
        payload = created.verify(secret)
        assert payload["type"] == "order.created"
        assert payload["id"] == created.webhook_id
        assert payload["data"] == order
        assert created.headers["content-type"] == "application/json"

        response = await http.post(
            f"{base_url}/v1/orders/{order['id']}/fulfill", headers=bearer(key)
        )
        assert response.status_code == 200, response.text
        await delivered(receiver, 2, server)
        fulfilled = receiver.requests()[1]
        payload = fulfilled.verify(secret)
        assert payload["type"] == "order.fulfilled"
        assert payload["data"] == response.json()
        assert payload["data"]["status"] == "fulfilled"
        assert len({created.webhook_id, fulfilled.webhook_id}) == 2

        async def recorded() -> bool:
            event = await the_event(http, base_url, key, "order.fulfilled")
            return bool(event["deliveries"]) and event["deliveries"][0]["status"] == "succeeded"

        deadline = time.monotonic() + DELIVERY_WITHIN_SECONDS
        while not await recorded():
            assert time.monotonic() < deadline, "the delivery was not recorded as succeeded"
            await asyncio.sleep(0.1)
        event = await the_event(http, base_url, key, "order.fulfilled")
        [delivery] = event["deliveries"]
        assert delivery["endpoint_id"] == endpoint["id"]
        assert [a["status_code"] for a in delivery["attempts"]] == [200]
        assert len(receiver.requests()) == 2  # nothing more arrived meanwhile
        # A serve process with its dispatcher says so (what the scaled-out test relies on).
        assert DISPATCHER_STARTED in server.stderr_path.read_text()


# --- the scaled-out shape -----------------------------------------------------------------------


@pytest.mark.postgresql
async def test_a_separate_worker_delivers_what_serve_no_dispatcher_recorded(
    postgresql_database_url: str, tmp_path: Path, receiver: Receiver, http: httpx.AsyncClient
) -> None:
    key, product_id = await client_key_and_product(postgresql_database_url)
    settings = {
        "COMMERCE_DATABASE_URL": postgresql_database_url,
        "COMMERCE_SECRET_KEY": SECRET_KEY,  # the same for every process
        **FAST_DISPATCH,
    }
    with serving(tmp_path, settings, "--no-dispatcher") as (server, base_url):
        endpoint = await register_endpoint(http, base_url, key, receiver.url("/orders"))
        order = await place_order(http, base_url, key, product_id)

        # The API process alone delivers nothing: it runs no dispatcher (a running one says so
        # on stderr as it starts, before the server answers), and the event waits in the outbox.
        assert DISPATCHER_STARTED not in server.stderr_path.read_text()
        assert receiver.requests() == []
        event = await the_event(http, base_url, key, "order.created")
        [pending] = event["deliveries"]
        assert (pending["status"], pending["attempts"]) == ("pending", [])

        with child(tmp_path, "worker", ["worker"], settings) as worker:
            await delivered(receiver, 1, worker)
            assert DISPATCHER_STARTED in worker.stderr_path.read_text()  # unlike the API process
            [request] = receiver.requests()
            payload = request.verify(endpoint["secret"])
            assert payload["id"] == event["id"] == request.webhook_id
            assert payload["type"] == "order.created"
            assert payload["data"] == order

            started = time.monotonic()
            code = worker.terminate(WORKER_STOP_SECONDS)
            assert code == 0, worker.logs()
            assert time.monotonic() - started < WORKER_STOP_SECONDS
            assert "dispatcher" in stderr_tail(worker.stderr_path).lower()

        event = await the_event(http, base_url, key, "order.created")
        [done] = event["deliveries"]
        assert done["status"] == "succeeded"
        assert [a["status_code"] for a in done["attempts"]] == [200]
        assert len(receiver.requests()) == 1
        assert server.process.poll() is None  # the API process kept serving throughout
