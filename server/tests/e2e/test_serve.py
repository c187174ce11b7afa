"""``commerce-api serve --demo`` as an operator runs it: a real process on a loopback port.

The operator contract: the command applies migrations, loads the demo catalogue into an empty
database, prints a sandbox client key as the last line of standard output (explanations go to
standard error), then serves ``/v1``. These tests read that key and use it over real HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.server_process import running_server
from tests.helpers import bearer

pytestmark = pytest.mark.slow

DEMO_PRODUCTS = 60
DEMO_CATEGORIES = {"books", "electronics", "apparel", "home", "toys", "grocery"}


@dataclass(frozen=True, slots=True)
class Server:
    base_url: str
    key: str
    stdout_lines: list[str]


@contextmanager
def demo_server(database_url: str, workdir: Path) -> Iterator[Server]:
    """Run ``commerce-api serve --demo`` on a free loopback port until the block ends."""
    with running_server(database_url, workdir, args=["--demo"], expect_key=True) as server:
        assert server.key is not None
        yield Server(base_url=server.base_url, key=server.key, stdout_lines=server.stdout_lines)


def _check_demo_server(server: Server, *, fresh_catalogue: bool) -> None:
    assert server.key.startswith("sk_sandbox_")
    assert server.stdout_lines[-1] == server.key, "the key is the last line of stdout"

    with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
        response = http.get("/v1/products", headers=bearer(server.key))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/json")
        assert response.headers["x-request-id"].startswith("req_")
        body = response.json()
        assert len(body["data"]) == 20
        pagination = body["pagination"]
        assert pagination["total"] >= 50
        if fresh_catalogue:
            assert pagination["total"] == DEMO_PRODUCTS
        assert pagination["limit"] == 20
        assert pagination["offset"] == 0
        assert pagination["has_more"] is True
        for product in body["data"]:
            assert set(product) == {"id", "name", "description", "price", "category", "created_at"}
            assert product["id"].startswith("prod_")

        everything = http.get("/v1/products", params={"limit": 100}, headers=bearer(server.key))
        assert everything.status_code == 200
        categories = {product["category"] for product in everything.json()["data"]}
        assert len(categories) >= 3, categories
        if fresh_catalogue:
            assert categories == DEMO_CATEGORIES

        one = body["data"][0]
        detail = http.get(f"/v1/products/{one['id']}", headers=bearer(server.key))
        assert detail.status_code == 200
        assert detail.json()["inventory_count"] >= 0

        anonymous = http.get("/v1/products")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].lower().startswith("bearer")
        error = anonymous.json()["error"]
        assert error["code"] == "unauthorized"
        assert isinstance(error["message"], str)
        assert error["message"]
        assert isinstance(error["details"], str)

        assert http.get("/readyz").status_code == 200


def test_serve_demo_on_sqlite(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with demo_server(database_url, tmp_path) as server:
        _check_demo_server(server, fresh_catalogue=True)


@pytest.mark.postgresql
def test_serve_demo_on_postgresql(postgresql_database_url: str, tmp_path: Path) -> None:
    # The fixture empties the session's shared database first, so the demo catalogue loads.
    with demo_server(postgresql_database_url, tmp_path) as server:
        _check_demo_server(server, fresh_catalogue=True)


def test_serve_demo_twice_keeps_the_catalogue_and_prints_a_new_key(tmp_path: Path) -> None:
    """A restart does not load the demo catalogue again, and the new key works."""
    database_url = f"sqlite:///{tmp_path / 'commerce.db'}"
    with demo_server(database_url, tmp_path) as first:
        first_key = first.key
    with demo_server(database_url, tmp_path) as second:
        assert second.key != first_key
        _check_demo_server(second, fresh_catalogue=True)
