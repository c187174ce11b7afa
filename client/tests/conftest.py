"""Fixtures of the client's tests: recorded sleeps, and one real server for the end-to-end
tests (started once per session, on its own SQLite file, stopped at the end)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from client_e2e_server import prepare, serve
from client_testing import E2EServer

import commerce_client
from commerce_client import _retry


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the client waited between attempts (without waiting)."""
    delays: list[float] = []

    async def async_sleep(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(_retry, "sleep", delays.append)
    monkeypatch.setattr(_retry, "async_sleep", async_sleep)
    return delays


@pytest.fixture(scope="session")
def e2e_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("client-e2e")


@pytest.fixture(scope="session")
async def e2e_data(e2e_workdir: Path) -> E2EServer:
    return await prepare(f"sqlite:///{e2e_workdir / 'e2e.db'}")


@pytest.fixture(scope="session")
def e2e_server(e2e_workdir: Path, e2e_data: E2EServer) -> Iterator[E2EServer]:
    """``commerce-api serve --no-dispatcher`` on a free port, with its data prepared."""
    database_url = f"sqlite:///{e2e_workdir / 'e2e.db'}"
    with serve(e2e_workdir, database_url, "--no-dispatcher") as url:
        yield dataclasses.replace(e2e_data, base_url=url)


@pytest.fixture
def api(e2e_server: E2EServer) -> Iterator[commerce_client.Client]:
    """A client with the e2e account's key."""
    with commerce_client.Client(
        api_key=e2e_server.client_key, environment="sandbox", base_url=e2e_server.base_url
    ) as client:
        yield client


@pytest.fixture
async def async_api(e2e_server: E2EServer) -> AsyncIterator[commerce_client.AsyncClient]:
    async with commerce_client.AsyncClient(
        api_key=e2e_server.client_key, environment="sandbox", base_url=e2e_server.base_url
    ) as client:
        yield client
