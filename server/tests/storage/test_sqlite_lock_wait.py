"""Issue 32 item 3 on the embedded default: a write waiting for another process's lock on the
SQLite file answers 503 with ``Retry-After`` within 4 s (it waited 40 s and then failed with a
500), whether it waits in SQLite's busy handler or behind the process's other writers; service
is back the moment the lock is let go."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from commerce_api.http.middleware import DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS
from tests import factories
from tests.conftest import make_settings
from tests.helpers import bearer, running_app
from tests.http.test_error_contract import assert_error

# The deadline (lock timeout + 1 s, the transaction timeout) and 0.5 s of a busy machine.
BOUND_SECONDS = 4.5

_HOLD_THE_WRITE_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(60)
"""


@contextmanager
def write_lock_held_by_another_process(path: str) -> Iterator[None]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_THE_WRITE_LOCK, path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait()


async def test_writes_waiting_on_another_processs_lock_are_503s_within_5_s(
    sqlite_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    async with running_app(make_settings(sqlite_database_url)) as (app, http):
        db = app.state.services.db
        customer = await factories.new_customer(db, "Locked out")
        admin = (await factories.new_key(db, role="admin")).secret
        product_id = await factories.new_product(db, stock=10)
        order = factories.order_body((product_id, 1))

        def requests() -> list[tuple[str, dict[str, object], dict[str, str]]]:
            """Orders (the batch writer) and product creations (a plain write), at once."""
            return [
                *(
                    ("/v1/orders", order, {**bearer(customer.secret), "Idempotency-Key": f"o{n}"})
                    for n in range(3)
                ),
                *(
                    (
                        "/v1/products",
                        factories.product_body(),
                        {**bearer(admin), "Idempotency-Key": f"p{n}"},
                    )
                    for n in range(2)
                ),
            ]

        async def timed(
            path: str, body: dict[str, object], headers: dict[str, str]
        ) -> tuple[httpx.Response, float]:
            started = loop.time()
            response = await http.post(path, json=body, headers=headers)
            return response, loop.time() - started

        assert sqlite_database_url.startswith("sqlite:///")
        with write_lock_held_by_another_process(sqlite_database_url.removeprefix("sqlite:///")):
            caplog.clear()
            answers = await asyncio.gather(*(timed(*request) for request in requests()))
            for response, waited in answers:
                assert_error(response, 503, "server_error", reason="service_unavailable")
                retry_after = str(DATABASE_UNAVAILABLE_RETRY_AFTER_SECONDS)
                assert response.headers["retry-after"] == retry_after
                assert waited < BOUND_SECONDS, f"answered after {waited:.1f} s"
            ours = [r for r in caplog.records if r.name.startswith("commerce_api")]
            assert not [r for r in ours if r.exc_info], "a traceback was logged"
            assert not [r for r in ours if r.levelno >= logging.ERROR]

        # The lock let go: the same requests (the same keys) succeed at once.
        for path, body, headers in requests():
            response = await http.post(path, json=body, headers=headers)
            assert response.status_code == 201, response.text
